//go:build linux

package bench_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// slowStar5 is star5 with four times its timeouts. node/bully/doc.go's message
// counts hold while every message and every node's turn on a core come
// within the timeouts; on a shared 2-core host under load a node waits for
// a core longer than star5's 200 ms election timeout, its ANSWERs come
// late and the election is no longer the textbook one (REJECTs, lower
// nodes leading). The formulas do not depend on the timeouts, so the test
// asserts them where that cannot happen.
const slowStar5 = `name: slow-star5
nodes: 5
subnet: 10.77.0.0/16
port: 7946
settings: {heartbeat: 400ms, failure_timeout: 2s, election_timeout: 800ms}
`

// TestRunBenchLeaderCrash runs a small bench end to end on real namespaces
// (five leader crashes on star5 with slow timeouts) and holds every
// election's messages on the wire to node/bully/doc.go's counts for N = 5.
func TestMain(m *testing.M) {
	code := m.Run()
	labtest.RemoveBinary()
	os.Exit(code)
}

// slowStar5LeaderCrash is what the bench tests of one star5 leader crash
// start from: root, the node binary, the slow-timeout star5 and the
// built-in leader-crash scenario; it skips under -short.
func slowStar5LeaderCrash(t *testing.T) (bin string, topo *topologies.Topology, scs []*scenario.Scenario) {
	t.Helper()
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	topo, err := topologies.Parse("slow-star5", []byte(slowStar5))
	if err != nil {
		t.Fatal(err)
	}
	scs, err = scenario.Builtin("leader-crash", scenario.Params{Nodes: len(topo.Nodes)})
	if err != nil {
		t.Fatal(err)
	}
	return labtest.Binary(t), topo, scs
}

func TestRunBenchLeaderCrash(t *testing.T) {
	bin, topo, scs := slowStar5LeaderCrash(t)
	out := t.TempDir()
	var progress, summary bytes.Buffer
	term := false
	const runs = 5
	res, err := runBench(t.Context(), bench.RunOptions{
		Topology: topo, Scenarios: scs, ScenarioArg: "leader-crash", Runs: runs, Seed: 1,
		OutDir: out, Binary: bin, Version: "test",
		Progress: bench.NewProgress(&progress, runs, bench.ProgressOptions{Terminal: &term}),
	}, &summary)
	if err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	t.Logf("progress:\n%s\nsummary:\n%s", progress.String(), summary.String())

	// Every output, captures included, is readable by all; the runs'
	// cluster keys by their owner alone.
	requireOutputModes(t, out, "results.json", "bench.txt", "report.html")

	// results.json parses with the schema and agrees with what RunBench returned.
	got, err := results.ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(got.Scenarios) != 1 || len(got.Scenarios[0].Runs) != runs {
		t.Fatalf("results.json: %d scenarios, want 1 with %d runs", len(got.Scenarios), runs)
	}
	if got.Topology.Nodes != 5 || got.Seed != 1 {
		t.Errorf("results.json: topology %+v seed %d", got.Topology, got.Seed)
	}
	// bench.txt parses.
	txt, err := os.ReadFile(filepath.Join(out, "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bt, err := results.ParseBenchText("bench.txt", txt)
	if err != nil {
		t.Fatalf("bench.txt: %v", err)
	}
	// report.html is there and self-contained.
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//|@import`).Find(html); m != nil {
		t.Errorf("report.html refers to something outside it: %q", m)
	}

	// Every run passed, and its counts on the wire are within node/bully/doc.go's
	// ranges for N nodes with leader N crashed: the textbook counts less
	// what went to the crashed node, plus what late detectors add.
	n := len(topo.Nodes)
	sc := got.Scenarios[0]
	for _, r := range sc.Runs {
		var det time.Duration
		if r.DetectionNS != nil {
			det = time.Duration(*r.DetectionNS)
		}
		t.Logf("run %d seed %d: ok=%v leader %s epoch %d time to leader %s detection %s messages %v counters %+v frames verified %d unverified %d",
			r.Index, r.Seed, r.OK, r.Leader, r.Epoch, time.Duration(r.TimeToLeaderNS), det, r.Messages, r.Counters, r.FramesVerified, r.FramesUnverified)
		if !r.OK {
			t.Errorf("run %d failed (%s): %s", r.Index, r.FailureKind, r.Failure)
			continue
		}
		if r.Leader != "n4" {
			t.Errorf("run %d: leader %s, want n4", r.Index, r.Leader)
		}
		// The leader's host refused for its killed process: the
		// survivors elected on that evidence, not the failure timeout.
		if r.DetectedBy != results.DetectedByCrash {
			t.Errorf("run %d: detected by %q, want %q", r.Index, r.DetectedBy, results.DetectedByCrash)
		}
		if r.DetectionNS == nil || *r.DetectionNS <= 0 || *r.DetectionNS > r.TimeToLeaderNS {
			t.Errorf("run %d: detection %v, time to leader %d", r.Index, r.DetectionNS, r.TimeToLeaderNS)
		}
		// The capture began before the first node: every connection's
		// HELLO is in it, and the run's key verifies every frame.
		if r.FramesVerified == 0 || r.FramesUnverified != 0 {
			t.Errorf("run %d: %d frames verified with the run's key, %d unverified: want every frame verified", r.Index, r.FramesVerified, r.FramesUnverified)
		}
		late := lateElections(t, filepath.Join(out, r.Capture))
		if msg := checkLeaderCrashCounts(n, late, r.Messages); msg != "" {
			t.Errorf("run %d (%d late ELECTIONs): %s", r.Index, late, msg)
		}
		if _, err := os.Stat(filepath.Join(out, r.Capture)); err != nil {
			t.Errorf("run %d: capture: %v", r.Index, err)
		}
		// The run's key, kept beside its capture, verifies the capture
		// after the lab is gone as the run did.
		key, err := wire.ReadKeyFile(filepath.Join(out, capture.ClusterKeyFile(r.Capture)))
		if err != nil {
			t.Errorf("run %d: %v", r.Index, err)
			continue
		}
		later, err := capture.AnalyzeFile(filepath.Join(out, r.Capture), capture.AnalyzeOptions{Key: &key})
		if err != nil || later.Auth == nil || later.Auth.Verified != r.FramesVerified || later.Auth.Failed != 0 {
			t.Errorf("run %d: the kept key verifies %+v (%v), the run verified %d frames", r.Index, later.Auth, err, r.FramesVerified)
		}
	}
	if len(bt.Results) != sc.Summary.OK {
		t.Errorf("bench.txt has %d result lines, want one per passed run (%d)", len(bt.Results), sc.Summary.OK)
	}
	// A bench compared with itself passes, from either file.
	for _, f := range []string{"results.json", "bench.txt"} {
		path := filepath.Join(out, f)
		cmp, err := results.CompareFiles(path, path, results.CompareOptions{MaxRegress: 0.10})
		if v := results.VerdictOf(cmp, err); v != results.Pass {
			t.Errorf("comparing %s with itself: %v (%v)", f, v, err)
		}
	}
	if res.Scenarios[0].Summary.OK != runs {
		t.Errorf("summary: %d of %d runs ok", res.Scenarios[0].Summary.OK, runs)
	}
}

// TestRunBenchEveryBuiltin runs every built-in scenario once on star5 with
// slow timeouts (see slowStar5; the latency sweep at 10 ms and 100 ms, loss
// at 5% only) with live capture, analysis, the counter cross-check, the
// safety and liveness checks and the tenures of the capture against the
// nodes' logs: every run must pass them all, and measure the election its
// scenario means (checkMeasured).
func TestRunBenchEveryBuiltin(t *testing.T) {
	netemtest.RequireImpairment(t) // the latency sweep delays links
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	bin := labtest.Binary(t)
	topo, err := topologies.Parse("slow-star5", []byte(slowStar5))
	if err != nil {
		t.Fatal(err)
	}
	// One loss point, the one loss had before it swept: a run per
	// default point would add three testbeds and nothing the checks
	// do not see at 5%.
	params := scenario.Params{Nodes: len(topo.Nodes), Seed: 1,
		Delays: []time.Duration{10 * time.Millisecond, 100 * time.Millisecond},
		Losses: []float64{scenario.DefaultLoss}, Hold: 5 * time.Second}
	for _, name := range scenario.BuiltinNames() {
		scs, err := scenario.Builtin(name, params)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scs {
			t.Run(sc.Key(), func(t *testing.T) {
				out := t.TempDir()
				res, err := runBench(t.Context(), bench.RunOptions{
					Topology: topo, Scenarios: []*scenario.Scenario{sc}, ScenarioArg: name, Runs: 1, Seed: 1,
					OutDir: out, Binary: bin, Version: "test",
				}, nil)
				if err != nil {
					t.Fatalf("RunBench: %v", err)
				}
				r := res.Scenarios[0].Runs[0]
				t.Logf("schedule: %v", r.Schedule)
				t.Logf("ok=%v leader %s time to leader %s messages %v counters %+v bound %s",
					r.OK, r.Leader, time.Duration(r.TimeToLeaderNS), r.Messages, r.Counters, time.Duration(r.Checks.BoundNS))
				for _, tn := range r.Checks.Tenures {
					t.Logf("wire: %+v", tn)
				}
				for _, tn := range r.Checks.LogTenures {
					t.Logf("log:  %+v", tn)
				}
				if !r.OK {
					t.Fatalf("failed (%s): %s", r.FailureKind, r.Failure)
				}
				if !r.Counters.OK {
					t.Errorf("counters: %v", r.Counters.Mismatches)
				}
				// Both sources of tenures were compared (a disagreement
				// fails the run), and the measured election is the one
				// the scenario means: its leader, its epoch, and its
				// time between the timeouts' floor and the SLE2 bound.
				if len(r.Checks.LogTenures) == 0 {
					t.Error("the run shows no tenure from the nodes' logs")
				}
				checkMeasured(t, topo, sc, r, out)
				if name == "churn" {
					// Nodes really left and joined: LEAVE, JOIN and
					// MEMBERS crossed the wire.
					rep, err := capture.AnalyzeFile(filepath.Join(out, r.Capture), capture.AnalyzeOptions{})
					if err != nil {
						t.Fatal(err)
					}
					for _, typ := range []wire.Type{wire.TypeLeave, wire.TypeJoin, wire.TypeMembers} {
						if rep.Messages.Get(typ) == 0 {
							t.Errorf("churn: no %s on the wire", typ)
						}
					}
				}
			})
		}
	}
}

// lateElections counts the ELECTIONs of nodes bullied again after they
// followed the new leader, in the elections a crash triggered in capture
// path.
func lateElections(t *testing.T, path string) int {
	t.Helper()
	rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	late := 0
	for _, e := range rep.Elections {
		if e.Trigger.Kind != "crash" {
			continue
		}
		tl, err := rep.ElectionTimeline(e.N)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range tl.Entries {
			if en.Type == "ELECTION" && en.Reason == "bullied" {
				late++
			}
		}
	}
	return late
}

// checkRingLeaderCrashCounts holds the messages of one ring leader-crash
// election on the wire to the ring's counts for n nodes, n-1 survivors;
// "" when they fit. The highest survivor h initiates and skips the dead
// leader: n-1 RING_ELECTION hops round the survivors and n-1 ELECTED,
// nothing to the dead node. A survivor s, the j-th lowest, whose detector
// fires before h's run reaches it (a loaded host) starts a second run,
// lower than h's (same epoch, lower initiator): it goes up the ring from s
// and dies at the first node that forwarded a higher run, h at the
// furthest, so it adds at most n-1-j hops; several late runs telescope
// (each dies at the next late initiator above it), so they add at most
// n-2, the lowest survivor's. Only h's run wins: ELECTED stays n-1.
func checkRingLeaderCrashCounts(n int, m map[string]int) string {
	for _, typ := range []string{"ELECTION", "ANSWER", "HALT", "HALT_ACK", "REJECT", "COORDINATOR"} {
		if m[typ] != 0 {
			return fmt.Sprintf("%d %s in a ring election", m[typ], typ)
		}
	}
	if e := m["RING_ELECTION"]; e < n-1 || e > n-1+n-2 {
		return fmt.Sprintf("%d RING_ELECTION, want %d..%d", e, n-1, 2*n-3)
	}
	if m["ELECTED"] != n-1 {
		return fmt.Sprintf("%d ELECTED, want %d", m["ELECTED"], n-1)
	}
	return ""
}

// checkLeaderCrashCounts holds the messages of one leader-crash election
// on the wire to node/bully/doc.go's "Message counts" for n nodes, late the
// ELECTIONs with reason bullied among them; "" when they fit.
func checkLeaderCrashCounts(n, late int, m map[string]int) string {
	exact := map[string]int{"HALT": n - 2, "HALT_ACK": n - 2, "REJECT": 0}
	for typ, want := range exact {
		if m[typ] != want {
			return fmt.Sprintf("%d %s, want %d", m[typ], typ, want)
		}
	}
	// Detections: from none (the highest survivor alone, which the
	// detection stagger makes the usual case) to every survivor's, when a
	// loaded host delays the highest survivor's HALTs past the stagger,
	// (N-1)(N-2)/2 on the wire; each late ELECTION on top.
	if e := m["ELECTION"] - late; e < 0 || e > (n-1)*(n-2)/2 {
		return fmt.Sprintf("%d ELECTION with %d late, want at most %d + late", m["ELECTION"], late, (n-1)*(n-2)/2)
	}
	if m["ANSWER"] > m["ELECTION"] {
		return fmt.Sprintf("%d ANSWER for %d ELECTION", m["ANSWER"], m["ELECTION"])
	}
	// One COORDINATOR per survivor but the leader, and one more for each
	// late ELECTION the leader answered by re-asserting itself.
	if c := m["COORDINATOR"]; c < n-2 || c > n-2+late {
		return fmt.Sprintf("%d COORDINATOR, want %d..%d", c, n-2, n-2+late)
	}
	return ""
}

// TestRunBenchUnknownNode: a scenario naming a node the topology lacks
// fails before any testbed is built (no root needed to see it), naming
// the file, the step and the node.
func TestRunBenchUnknownNode(t *testing.T) {
	topo, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse("mine.yaml", []byte("steps:\n  - inject: {crash: leader}\n  - wait_leader\n  - inject: {restart: n5}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	_, err = bench.RunBench(t.Context(), bench.RunOptions{Topology: topo, Scenarios: []*scenario.Scenario{sc},
		Runs: 1, OutDir: out, Binary: "/nonexistent/bullylab"})
	want := `mine.yaml:4: steps[2].inject.restart: topology star3 has no node or group "n5"`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("RunBench: %v, want %s", err, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("RunBench created %s before refusing the scenario", out)
	}
}

// TestRunBenchAlgorithms runs one star5 leader crash (slow timeouts, as
// TestRunBenchLeaderCrash) on each algorithm node.Algorithms lists, with
// one seed and so one fault schedule: each algorithm's result carries it
// in its key and benchmark name, the summary sets them side by side, and
// each election's messages on the wire are its algorithm's counts.
func TestRunBenchAlgorithms(t *testing.T) {
	bin, topo, scs := slowStar5LeaderCrash(t)
	algorithms := node.Algorithms()
	out := t.TempDir()
	var summary bytes.Buffer
	res, err := runBench(t.Context(), bench.RunOptions{
		Topology: topo, Scenarios: scs, Algorithms: algorithms, ScenarioArg: "leader-crash", Runs: 1, Seed: 1,
		OutDir: out, Binary: bin, Version: "test",
	}, &summary)
	if err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	t.Logf("summary:\n%s", summary.String())
	if len(res.Scenarios) != len(algorithms) {
		t.Fatalf("%d results, want one per algorithm %v", len(res.Scenarios), algorithms)
	}
	txt, err := os.ReadFile(filepath.Join(out, "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(topo.Nodes)
	var schedules []string
	for i, a := range algorithms {
		sc := res.Scenarios[i]
		if sc.Algorithm != a || len(sc.Runs) != 1 {
			t.Fatalf("result %d: algorithm %q with %d runs, want %s with 1", i, sc.Algorithm, len(sc.Runs), a)
		}
		r := sc.Runs[0]
		t.Logf("%s: ok=%v leader %s epoch %d time to leader %s messages %v counters %+v",
			a, r.OK, r.Leader, r.Epoch, time.Duration(r.TimeToLeaderNS), r.Messages, r.Counters)
		if !r.OK {
			t.Errorf("%s: failed (%s): %s", a, r.FailureKind, r.Failure)
			continue
		}
		if r.Leader != "n4" {
			t.Errorf("%s: leader %s, want n4", a, r.Leader)
		}
		var msg string
		if a == wire.AlgorithmRing {
			msg = checkRingLeaderCrashCounts(n, r.Messages)
		} else {
			msg = checkLeaderCrashCounts(n, lateElections(t, filepath.Join(out, r.Capture)), r.Messages)
		}
		if msg != "" {
			t.Errorf("%s: %s", a, msg)
		}
		schedules = append(schedules, strings.Join(r.Schedule, "; "))
		name := "BenchmarkElection/topology=slow-star5/scenario=leader-crash/algorithm=" + a + " "
		if !strings.Contains(string(txt), "\n"+name) {
			t.Errorf("bench.txt has no line %s:\n%s", name, txt)
		}
	}
	for _, s := range schedules[1:] {
		if s != schedules[0] {
			t.Errorf("the algorithms ran other schedules: %q and %q", schedules[0], s)
		}
	}
	if len(algorithms) > 1 && !strings.Contains(summary.String(), "algorithm") {
		t.Errorf("the summary does not set the algorithms side by side:\n%s", summary.String())
	}
}
