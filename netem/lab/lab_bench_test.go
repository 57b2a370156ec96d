//go:build linux

package lab_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
)

// BenchmarkLab measures a lab of star topologies (the shipped starN at 250,
// 500 and 1000 nodes, whose heartbeat interval grows with N) from StartLab
// to the first leader every node agrees on (s/up-to-leader: the moment the
// last node adopted it, from the nodes' event logs, once a poll of every
// node's control socket confirmed the agreement), with s/build (the
// testbed, links up; the nodes boot meanwhile) and s/boot (from the first
// node process started until every node has booted: the held nodes
// started, the highest node's election over, the rest released), s/poll
// (how much later the confirming poll completed), and Close
// (s/teardown), the CPU the lab itself used to get there (cpu-ms/lab,
// this process), what the nodes' counters say they sent per node
// (frames/node: election frames; connects/node: connections opened, a
// HELLO each; refused/node: frames dropped for an unreachable peer,
// nearly all refused by a node not up), and checks that nothing of the
// run is left. ns/op also counts a pause between iterations: namespaces
// are freed by the kernel after teardown returns, holding locks a build
// needs (see BenchmarkBuild).
//
// On 2 cores s/boot is CPU-bound. With a process per node most of it is
// the processes themselves: starting the bullylab binary (runtime and
// package initialisation, page faults: 15-20 ms) and a process wake-up
// per frame received; each boots on its own election, whose ELECTIONs go
// to every higher node, most of them not up yet (refused/node). A shared
// host boots held, in one election of 3(N-1) frames; before, it booted as
// processes do, and 1000 nodes (the hosting of star500 and star1000) took
// about 21 s to an agreed leader, some 32 ms of CPU per node, most of it
// those refused ELECTIONs and the state files.
func BenchmarkLab(b *testing.B) {
	for _, n := range []int{10, 100, 250, 500, 1000} {
		// The shipped star of that size when there is one: its settings
		// and hosting are the ones users run at that scale. Below 500 the
		// two hostings run side by side, the process per node the
		// baseline of the shared host.
		hostings := []topologies.Hosting{topologies.HostingProcess, topologies.HostingShared}
		if n >= 500 {
			hostings = []topologies.Hosting{""}
		}
		for _, hosting := range hostings {
			name := fmt.Sprint(n)
			if hosting != "" {
				name += "/" + string(hosting)
			}
			b.Run(name, func(b *testing.B) { benchmarkLab(b, n, hosting) })
		}
	}
}

func benchmarkLab(b *testing.B, n int, hosting topologies.Hosting) {
	const settle = time.Second
	netemtest.SkipAboveMaxNodes(b, n)
	bin := labtest.Binary(b)
	topo, err := topologies.Load(fmt.Sprintf("star%d", n))
	if err != nil {
		topo, err = topologies.Star(n)
	}
	if err != nil {
		b.Fatal(err)
	}
	if hosting != "" {
		topo.Hosting = hosting
	}
	var build, boot, poll, up, teardown, nodesCPU, leaderCPU, labCPU time.Duration
	var frames, connects, refused uint64
	for range b.N {
		time.Sleep(settle)
		run := netemtest.RunName(b)
		cpu0 := selfCPU(b)
		lb, err := lab.Boot(b.Context(), topo, lab.BootOptions{Binary: bin, Run: run})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
		ag, err := lb.Monitor().WaitLeader(ctx, nil)
		cancel()
		if err != nil {
			lb.Close()
			b.Fatal(err)
		}
		labCPU += selfCPU(b) - cpu0
		if want := fmt.Sprintf("n%d", n); ag.Node != want {
			b.Errorf("first leader %s, want %s", ag.Node, want)
		}
		f, l := nodeCPU(b, run, ag.Node)
		nodesCPU += f
		leaderCPU += l
		agreed, ok, err := lb.Monitor().AgreedAt(ag)
		if err != nil || !ok {
			lb.Close()
			b.Fatalf("the nodes' logs do not show the agreement the poll saw (%v)", err)
		}
		c := sumCounters(b, lb)
		frames += c.frames
		connects += c.connects
		refused += c.refused
		t := lb.Times()
		build += t.Built.Sub(t.Begin)
		boot += t.Ready.Sub(t.Started)
		poll += ag.At.Sub(agreed)
		up += agreed.Sub(t.Begin)
		start := time.Now()
		if err := lb.Close(); err != nil {
			b.Fatal(err)
		}
		teardown += time.Since(start)
		if c := netemtest.CountLeftovers(b, run); c != (netemtest.Leftovers{}) {
			b.Fatalf("run %s left %+v", run, c)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
	b.ReportMetric(per(build), "s/build")
	b.ReportMetric(per(boot), "s/boot")
	b.ReportMetric(per(poll), "s/poll")
	b.ReportMetric(per(up), "s/up-to-leader")
	b.ReportMetric(per(teardown), "s/teardown")
	if topo.Hosting == topologies.HostingShared {
		// One process: the leader's share cannot be told apart.
		b.ReportMetric(1000*per(nodesCPU)/float64(n), "cpu-ms/node")
	} else {
		b.ReportMetric(1000*per(nodesCPU)/float64(n-1), "cpu-ms/node")
		b.ReportMetric(1000*per(leaderCPU), "cpu-ms/leader")
	}
	b.ReportMetric(1000*per(labCPU), "cpu-ms/lab")
	perNode := func(v uint64) float64 { return float64(v) / float64(b.N) / float64(n) }
	b.ReportMetric(perNode(frames), "frames/node")
	b.ReportMetric(perNode(connects), "connects/node")
	b.ReportMetric(perNode(refused), "refused/node")
}

// bootCounts are what the nodes' counters say they sent to an agreed
// leader: election frames (HEARTBEAT, HELLO, membership left out),
// connections opened (a HELLO starts each), and frames dropped because the
// peer could not be reached, nearly all of them refused by a node not up.
type bootCounts struct{ frames, connects, refused uint64 }

// sumCounters adds up every node's counters.
func sumCounters(b *testing.B, lb *lab.Lab) bootCounts {
	b.Helper()
	var c bootCounts
	for _, name := range lb.Nodes() {
		cl, err := lb.Client(name)
		if err != nil {
			b.Fatal(err)
		}
		s, err := cl.StatusBrief(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		for _, ty := range []string{"ELECTION", "ANSWER", "HALT", "HALT_ACK", "REJECT", "COORDINATOR", "RING_ELECTION", "ELECTED"} {
			c.frames += s.Counters.Sent[ty]
		}
		c.connects += s.Counters.Sent["HELLO"]
		c.refused += s.Counters.DroppedBy["unreachable"]
	}
	return c
}

// selfCPU returns the CPU time this process has used, all threads, kernel
// included: the lab's own share of a boot (building the testbed, starting
// and watching the nodes, polling for the agreement).
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nodeCPU returns the CPU time the run's recorded processes have used: the
// followers' in all, and the leader's; a shared host's counts as the
// followers'.
func nodeCPU(b *testing.B, run, leader string) (followers, lead time.Duration) {
	b.Helper()
	st, err := netem.ReadState(run)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range st.Processes {
		d := procCPU(b, p.PID)
		if p.Node == leader {
			lead += d
		} else {
			followers += d
		}
	}
	return followers, lead
}

// procCPU reads a process's CPU time.
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	cpu, _, err := netem.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
}
