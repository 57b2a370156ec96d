//go:build linux

package remote_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
	"github.com/bullylab/bullylab/topologies"
)

// The size of BenchmarkSpan's testbed: BULLYLAB_SPAN_NODES nodes over
// BULLYLAB_SPAN_HOSTS stand-in hosts, with hosting: shared, each host's
// nodes in one host process of its own. Unset, it builds star64 over three
// hosts with a process per node, the size CI runs once: 5000 nodes take
// minutes to build and boot on 2 cores.
const (
	spanNodesEnv = "BULLYLAB_SPAN_NODES"
	spanHostsEnv = "BULLYLAB_SPAN_HOSTS"
)

// BenchmarkSpan builds a topology over stand-in hosts (star64 over three
// unless spanNodesEnv and spanHostsEnv say otherwise) and tears it down,
// the binary copied to the hosts before. It reports:
//
//   - s/up: BuildSpan, from SSH to each host until every node booted (in a
//     shared topology the span's highest node has won and every host has
//     released what its election missed);
//   - s/build: the agents building their shares (namespaces, overlay);
//   - s/agreed: from BuildSpan's start until the last node adopted the
//     leader every node follows, from the nodes' event logs, once a poll
//     of every node confirmed the agreement (the stand-in hosts share this
//     machine's clock);
//   - cpu-ms/node: the nodes' processes' CPU, a shared host's included, up
//     to the agreement, per node; cpu-s/agent: each agent's, the labs that
//     built the shares and boot the nodes;
//   - files/host: the most files one shared host process held open, the
//     limit its nodes share (20,000 here, which root cannot raise);
//   - s/down: every share's teardown.
//
// Each iteration checks that nothing of the run is left.
func BenchmarkSpan(b *testing.B) {
	n, k, hosting := spanSize(b)
	netemtest.SkipAboveMaxNodes(b, n)
	hs := remotetest.StartHosts(b, k)
	name := fmt.Sprintf("star%dx%d", n, k)
	head := fmt.Sprintf("name: %s\nnodes: %d\n", name, n)
	if hosting == topologies.HostingShared {
		head += fmt.Sprintf("hosting: shared\nsettings: %s\n", spanSettings(n))
	}
	file := hs.Topology(head)
	topo, err := topologies.Parse(name+".yaml", file)
	if err != nil {
		b.Fatal(err)
	}
	opts := spanOptions(b, hs)
	for _, r := range remote.Check(b.Context(), hs.Hosts, opts.CheckOptions) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	var up, build, agreed, down, nodeCPU, agentCPU time.Duration
	files := 0
	for b.Loop() {
		sp, err := remote.BuildSpan(b.Context(), topo, name+".yaml", file, opts)
		if err != nil {
			b.Fatal(err)
		}
		t := sp.Times()
		at, err := spanAgreedAt(b, sp)
		if err != nil {
			sp.Close()
			b.Fatal(err)
		}
		procs, agents := spanCPU(b, sp)
		hf, err := sp.HostFiles()
		if err != nil {
			sp.Close()
			b.Fatal(err)
		}
		peak := 0
		for k, host := range hf {
			for _, h := range host {
				peak = max(peak, h.PeakFiles)
				b.Logf("%s: shared host process %d: %d nodes, at most %d files open", topo.Hosts[k].Name, h.PID, h.Nodes, h.PeakFiles)
			}
		}
		b.Logf("%d nodes over %d hosts: up %v (connect %v, build %v, start %v, boot %v), agreed %v; nodes' CPU %v, agents' %v",
			n, k, t.Ready.Sub(t.Begin).Round(time.Millisecond), t.Connected.Sub(t.Begin).Round(time.Millisecond),
			t.Built.Sub(t.Connected).Round(time.Millisecond), t.Started.Sub(t.Built).Round(time.Millisecond),
			t.Ready.Sub(t.Started).Round(time.Millisecond), at.Sub(t.Begin).Round(time.Millisecond),
			procs.Round(time.Millisecond), agents.Round(time.Millisecond))
		closing := time.Now()
		if err := sp.Close(); err != nil {
			b.Fatal(err)
		}
		down += time.Since(closing)
		up += t.Ready.Sub(t.Begin)
		build += t.Built.Sub(t.Connected)
		agreed += at.Sub(t.Begin)
		nodeCPU += procs
		agentCPU += agents
		files = max(files, peak)
		netemtest.RequireClean(b, sp.Run())
	}
	iters := float64(b.N)
	b.ReportMetric(up.Seconds()/iters, "s/up")
	b.ReportMetric(build.Seconds()/iters, "s/build")
	b.ReportMetric(agreed.Seconds()/iters, "s/agreed")
	b.ReportMetric(float64(nodeCPU.Milliseconds())/iters/float64(n), "cpu-ms/node")
	b.ReportMetric(agentCPU.Seconds()/iters/float64(k), "cpu-s/agent")
	if hosting == topologies.HostingShared {
		b.ReportMetric(float64(files), "files/host")
	}
	b.ReportMetric(down.Seconds()/iters, "s/down")
}

// spanSize reads the benchmark's nodes and hosts from the environment:
// star64 over three hosts, a process per node, when neither is set.
func spanSize(b *testing.B) (nodes, hosts int, hosting topologies.Hosting) {
	b.Helper()
	nv, kv := os.Getenv(spanNodesEnv), os.Getenv(spanHostsEnv)
	if nv == "" && kv == "" {
		return 64, 3, topologies.HostingProcess
	}
	nodes, err := strconv.Atoi(nv)
	if err != nil || nodes < 1 || nodes > topologies.MaxSpanNodes {
		b.Fatalf("%s=%q: want 1..%d nodes", spanNodesEnv, nv, topologies.MaxSpanNodes)
	}
	hosts = 1
	if kv != "" {
		if hosts, err = strconv.Atoi(kv); err != nil || hosts < 1 || hosts > nodes || (nodes+hosts-1)/hosts > topologies.MaxNodes {
			b.Fatalf("%s=%q: want 1..%d hosts, each building %d nodes at most", spanHostsEnv, kv, nodes, topologies.MaxNodes)
		}
	}
	return nodes, hosts, topologies.HostingShared
}

// spanSettings are the election timings of a shared span of n nodes, as
// star1000's scale with N: the leader heartbeats every follower directly,
// 2000 frames a second at any size, and the election timeout covers the
// highest node's HALT round to every other, 1.55 s at 1000 on 2 cores.
func spanSettings(n int) string {
	hb := time.Duration(max(n, 200)) * time.Millisecond / 2
	return fmt.Sprintf("{heartbeat: %v, failure_timeout: %v, election_timeout: %v}", hb, 5*hb, 6*hb)
}

// spanAgreedAt polls sp until every node follows its highest node, and
// returns when the last of them adopted it, from their event logs.
func spanAgreedAt(b *testing.B, sp *remote.Span) (time.Time, error) {
	b.Helper()
	nodes := sp.Nodes()
	top := nodes[len(nodes)-1]
	ctx, cancel := context.WithTimeout(b.Context(), 3*time.Minute)
	defer cancel()
	ag, err := sp.WaitLeader(ctx, func(l lab.Leader) bool { return l.Node == top })
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, name := range ag.Nodes {
		log, offset, err := sp.EventLog(name)
		if err != nil {
			return time.Time{}, err
		}
		at, ok, err := lab.AgreedSince(log, ag.ID.String(), ag.Epoch, time.Now().Add(offset))
		if err != nil {
			return time.Time{}, fmt.Errorf("node %s: event log: %w", name, err)
		}
		if !ok {
			return time.Time{}, fmt.Errorf("node %s: its event log does not show it adopt %s at epoch %d", name, ag.Node, ag.Epoch)
		}
		if at = at.Add(-offset); at.After(last) {
			last = at
		}
	}
	return last, nil
}

// spanCPU returns the CPU time the span's node processes (shared hosts
// included) and its agents have used: on the stand-in hosts both are
// processes of this machine, recorded in the shares' state (the agent
// is a host process's parent).
func spanCPU(b *testing.B, sp *remote.Span) (procs, agents time.Duration) {
	b.Helper()
	seen := map[int]bool{}
	for _, run := range sp.Runs {
		st, err := netem.ReadState(run)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range st.Processes {
			cpu, ppid := procStat(b, p.PID)
			procs += cpu
			if !seen[ppid] {
				seen[ppid] = true
				a, _ := procStat(b, ppid)
				agents += a
			}
		}
	}
	return procs, agents
}

// procStat reads a process's CPU time and parent.
func procStat(b *testing.B, pid int) (cpu time.Duration, ppid int) {
	b.Helper()
	cpu, ppid, err := netem.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu, ppid
}
