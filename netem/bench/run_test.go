package bench_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node/cluster"
	"github.com/bullylab/bullylab/topologies"
)

// TestRunBenchLeaderCrash runs a tiny bench end to end on real namespaces:
// star5, leader-crash, two runs.
func TestRunBenchLeaderCrash(t *testing.T) {
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	bin, cleanup, err := cluster.BuildTemp()
	if err != nil {
		t.Fatalf("building bullylab: %v", err)
	}
	t.Cleanup(cleanup)
	topo, err := topologies.Load("star5")
	if err != nil {
		t.Fatal(err)
	}
	scs, err := scenario.Builtin("leader-crash", scenario.Params{Nodes: len(topo.Nodes)})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var progress, summary bytes.Buffer
	term := false
	const runs = 2
	res, err := bench.RunBench(t.Context(), bench.RunOptions{
		Topology: topo, Scenarios: scs, ScenarioArg: "leader-crash", Runs: runs, Seed: 1,
		OutDir: out, Binary: bin, Version: "test",
		Progress: bench.NewProgress(&progress, runs, bench.ProgressOptions{Terminal: &term}),
		Summary:  &summary,
	})
	if err != nil {
		t.Fatalf("RunBench: %v", err)
	}
	t.Logf("progress:\n%s\nsummary:\n%s", progress.String(), summary.String())

	// results.json parses with the schema and agrees with what RunBench returned.
	got, err := bench.ReadResults(filepath.Join(out, "results.json"))
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
	bt, err := bench.ParseBenchText("bench.txt", txt)
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

	// Every run passed, and its counts on the wire are within node/doc.go's
	// formulas for N nodes with leader N crashed, less what went to the
	// crashed node (one COORDINATOR; the lowest-detects case's N-2 ELECTIONs).
	n := len(topo.Nodes)
	ranges := map[string][2]int{
		"ELECTION":    {0, max((n-2)*(n-1)/2, (n-1)*(n-2)/2)},
		"ANSWER":      {0, max((n-2)+(n-3)*(n-2)/2, (n-1)*(n-2)/2)},
		"HALT":        {n - 2, n - 2},
		"HALT_ACK":    {n - 2, n - 2},
		"COORDINATOR": {n - 2, n - 2},
		"REJECT":      {0, 0},
	}
	sc := got.Scenarios[0]
	for _, r := range sc.Runs {
		var det time.Duration
		if r.DetectionNS != nil {
			det = time.Duration(*r.DetectionNS)
		}
		t.Logf("run %d seed %d: ok=%v leader %s epoch %d time to leader %s detection %s messages %v counters %+v",
			r.Index, r.Seed, r.OK, r.Leader, r.Epoch, time.Duration(r.TimeToLeaderNS), det, r.Messages, r.Counters)
		if !r.OK {
			t.Errorf("run %d failed (%s): %s", r.Index, r.FailureKind, r.Failure)
			continue
		}
		if r.Leader != "n4" {
			t.Errorf("run %d: leader %s, want n4", r.Index, r.Leader)
		}
		if r.DetectionNS == nil || *r.DetectionNS <= 0 || *r.DetectionNS > r.TimeToLeaderNS {
			t.Errorf("run %d: detection %v, time to leader %d", r.Index, r.DetectionNS, r.TimeToLeaderNS)
		}
		for typ, rg := range ranges {
			if c := r.Messages[typ]; c < rg[0] || c > rg[1] {
				t.Errorf("run %d: %d %s on the wire, want %d..%d", r.Index, c, typ, rg[0], rg[1])
			}
		}
		if _, err := os.Stat(filepath.Join(out, r.Capture)); err != nil {
			t.Errorf("run %d: capture: %v", r.Index, err)
		}
	}
	if len(bt.Results) != sc.Summary.OK {
		t.Errorf("bench.txt has %d result lines, want one per passed run (%d)", len(bt.Results), sc.Summary.OK)
	}
	// A bench compared with itself passes, from either file.
	for _, f := range []string{"results.json", "bench.txt"} {
		path := filepath.Join(out, f)
		cmp, err := bench.CompareFiles(path, path, bench.CompareOptions{MaxRegress: 0.10})
		if v := bench.VerdictOf(cmp, err); v != bench.Pass {
			t.Errorf("comparing %s with itself: %v (%v)", f, v, err)
		}
	}
	if res.Scenarios[0].Summary.OK != runs {
		t.Errorf("summary: %d of %d runs ok", res.Scenarios[0].Summary.OK, runs)
	}
}
