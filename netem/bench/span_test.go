//go:build linux

package bench_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// The leader-crash bench across three stand-in hosts, over SSH and the
// VXLAN overlay: each run's leader crashes on its host, the next highest,
// on whichever host, wins with node/bully/doc.go's messages, counted in the
// merged capture of the three hosts' and equal to the nodes' counters,
// its every frame verified with the run's key kept beside it;
// every run's times carry the hosts' clock bound, and nothing is left on
// any host. A scenario naming a host partitions it from the others.
func TestRunBenchSpan(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds across stand-in hosts")
	}
	hs := remotetest.StartHosts(t, 3)
	bin := labtest.Binary(t)
	file := hs.Topology("name: slow-star6x3\nnodes: 6\nsettings: {heartbeat: 200ms, failure_timeout: 1s, election_timeout: 400ms}\n")
	topo, err := topologies.Parse("slow-star6x3.yaml", file)
	if err != nil {
		t.Fatal(err)
	}
	scs, err := scenario.Builtin("leader-crash", scenario.Params{Nodes: len(topo.Nodes)})
	if err != nil {
		t.Fatal(err)
	}
	// A scenario may name a host for its nodes: n6, the leader, runs on
	// h3 with n3, cut off from the four others, which elect n5.
	hostCut, err := scenario.Parse("partition-host.yaml", []byte(`description: the leader's host is cut off from the others; they elect; then heal
steps:
  - inject: {partition: {groups: [h3, rest]}}
  - wait_leader: {measure: true}
  - heal
  - wait_leader: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	scs = append(scs, hostCut)
	var started []string
	defer bench.SetLabStarted(func(run string) { started = append(started, run) })()
	out := t.TempDir()
	var summary bytes.Buffer
	// One run a scenario: the two scenarios already build, run and tear
	// down two testbeds in turn on the same hosts, and a second run of each
	// added 50 s to a CI run that must stay under 20 minutes.
	const runs = 1
	res, err := runBench(t.Context(), bench.RunOptions{
		Topology: topo, Scenarios: scs, ScenarioArg: "leader-crash", Runs: runs, Seed: 1,
		OutDir: out, Binary: bin, Version: "test",
		Hosts: &bench.HostsOptions{CheckOptions: remote.CheckOptions{Binary: bin, BinaryDir: t.TempDir(), Dial: hs.DialTCP},
			Source: "slow-star6x3.yaml", File: file},
	}, &summary)
	if err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	t.Logf("summary:\n%s", summary.String())
	if len(started) != 2*runs {
		t.Errorf("%d testbeds started, want %d", len(started), 2*runs)
	}
	for _, run := range started {
		netemtest.RequireClean(t, run)
	}
	n := len(topo.Nodes)
	for _, r := range res.Scenarios[0].Runs {
		t.Logf("run %d: ok=%v leader %s time to leader %v ± %v, messages %v, counters %+v", r.Index, r.OK, r.Leader,
			time.Duration(r.TimeToLeaderNS), time.Duration(r.ClockErrorNS), r.Messages, r.Counters)
		if !r.OK {
			t.Errorf("run %d failed (%s): %s", r.Index, r.FailureKind, r.Failure)
			continue
		}
		if r.Leader != "n5" || r.TimeToLeaderFrom != results.TimeFromCapture {
			t.Errorf("run %d: leader %s from %s, want n5 from the capture", r.Index, r.Leader, r.TimeToLeaderFrom)
		}
		for _, typ := range []string{"HALT", "HALT_ACK", "COORDINATOR"} {
			if r.Messages[typ] != n-2 {
				t.Errorf("run %d: %d %s, want N-2 = %d", r.Index, r.Messages[typ], typ, n-2)
			}
		}
		if !r.Counters.OK {
			t.Errorf("run %d: counters against the merged capture: %+v", r.Index, r.Counters)
		}
		if r.ClockErrorNS <= 0 || r.ClockErrorNS > r.TimeToLeaderNS/10 {
			t.Errorf("run %d: clock bound %v for a time to leader of %v", r.Index, time.Duration(r.ClockErrorNS), time.Duration(r.TimeToLeaderNS))
		}
		// The run's key, kept beside the merged capture, verifies every
		// frame of it: every host captured from before the first node.
		key, err := wire.ReadKeyFile(filepath.Join(out, capture.ClusterKeyFile(r.Capture)))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := capture.AnalyzeFile(filepath.Join(out, r.Capture), capture.AnalyzeOptions{Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		if a := rep.Auth; a == nil || a.Verified != rep.Frames || a.Unverified != 0 || a.Failed != 0 || r.FramesUnverified != 0 {
			t.Errorf("run %d: the kept key verifies %+v of %d frames (the run: %d unverified); want every frame", r.Index, a, rep.Frames, r.FramesUnverified)
		}
		var hosts []string
		for _, rec := range rep.Records {
			if rec.Testbed != nil {
				for _, h := range rec.Testbed.Hosts {
					hosts = append(hosts, h.Name)
				}
			}
		}
		if !slices.Equal(hosts, []string{"h1", "h2", "h3"}) || rep.Capture == nil || rep.Capture.Drops != 0 {
			t.Errorf("run %d: merged capture of hosts %v, counters %+v", r.Index, hosts, rep.Capture)
		}
	}
	for _, r := range res.Scenarios[1].Runs {
		t.Logf("%s run %d: ok=%v leader %s time to leader %v ± %v, messages %v", res.Scenarios[1].Key(), r.Index, r.OK, r.Leader,
			time.Duration(r.TimeToLeaderNS), time.Duration(r.ClockErrorNS), r.Messages)
		if !r.OK || r.Leader != "n5" {
			t.Errorf("%s run %d: ok=%v leader %s (%s: %s), want n5", res.Scenarios[1].Key(), r.Index, r.OK, r.Leader, r.FailureKind, r.Failure)
		}
	}
	if !strings.Contains(summary.String(), "across hosts, times are known within ±") {
		t.Errorf("the summary does not give the clock bound:\n%s", summary.String())
	}
}

// BenchmarkSpanLeaderCrash runs the leader-crash bench on star64 on this
// host, then on star64 spread over three stand-in hosts (SSH, the VXLAN
// overlay, captures merged), three runs each: the medians of their times to
// leader, the span's as a ratio of the one host's, measured in the same
// round, and the span's clock bound.
func BenchmarkSpanLeaderCrash(b *testing.B) {
	hs := remotetest.StartHosts(b, 3)
	bin := labtest.Binary(b)
	local, err := topologies.Load("star64")
	if err != nil {
		b.Fatal(err)
	}
	file := hs.Topology("name: star64x3\nnodes: 64\nsubnet: 10.77.0.0/16\nport: 7946\nsettings: {heartbeat: 100ms, failure_timeout: 500ms, election_timeout: 200ms}\n")
	span, err := topologies.Parse("star64x3.yaml", file)
	if err != nil {
		b.Fatal(err)
	}
	hosts := &bench.HostsOptions{CheckOptions: remote.CheckOptions{Binary: bin, BinaryDir: b.TempDir(), Dial: hs.DialTCP}, Source: "star64x3.yaml", File: file}
	const runs = 3
	bench1 := func(topo *topologies.Topology, h *bench.HostsOptions) results.Summary {
		scs, err := scenario.Builtin("leader-crash", scenario.Params{Nodes: len(topo.Nodes)})
		if err != nil {
			b.Fatal(err)
		}
		var summary bytes.Buffer
		res, err := runBench(b.Context(), bench.RunOptions{Topology: topo, Scenarios: scs, ScenarioArg: "leader-crash",
			Runs: runs, OutDir: b.TempDir(), Binary: bin, Version: "bench", Hosts: h}, &summary)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s:\n%s", topo.Name, summary.String())
		s := res.Scenarios[0].Summary
		if s.Failed > 0 {
			b.Fatalf("%s: %d of %d runs failed: %+v", topo.Name, s.Failed, runs, s.Failures)
		}
		return s
	}
	var one, three, ratio, bound float64
	for b.Loop() {
		l := bench1(local, nil)
		s := bench1(span, hosts)
		one += float64(l.TimeToLeader.P50NS) / 1e6
		three += float64(s.TimeToLeader.P50NS) / 1e6
		ratio += float64(s.TimeToLeader.P50NS) / float64(l.TimeToLeader.P50NS)
		bound += float64(s.ClockErrorNS) / 1e3
	}
	n := float64(b.N)
	b.ReportMetric(one/n, "ms-ttl-1host")
	b.ReportMetric(three/n, "ms-ttl-3hosts")
	b.ReportMetric(ratio/n, "ttl-ratio")
	b.ReportMetric(bound/n, "us-clock-bound")
}
