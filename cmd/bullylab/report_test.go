package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// writeBench writes a bench of both algorithms on topology (n nodes) to
// dir/results.json, as `bullylab bench --out dir` would.
func writeBench(t *testing.T, dir, topology string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := resultstest.AlgorithmsSampleOf(topology, n).WriteFile(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
}

// TestReportCommand: benches given as directories or results.json make
// one report.html with a point per bench and algorithm over both closed
// forms.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	s5, s16, s64 := filepath.Join(dir, "s5"), filepath.Join(dir, "s16"), filepath.Join(dir, "s64")
	writeBench(t, s5, "star5", 5)
	writeBench(t, s16, "star16", 16)
	writeBench(t, s64, "star64", 64)
	out := filepath.Join(dir, "sweep")
	stdout, stderr, code := runApp("report", "--out", out, s5, filepath.Join(s16, "results.json"), s64)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	page := filepath.Join(out, "report.html")
	if stdout != "report of 3 benches in "+page+"\n" {
		t.Errorf("stdout %q", stdout)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if n := strings.Count(html, `<circle class="measured"`); n != 6 {
		t.Errorf("%d measured points, want 6", n)
	}
	if n := strings.Count(html, `<line class="closed-form"`); n != 2 {
		t.Errorf("%d closed-form lines, want 2", n)
	}
	for _, want := range []string{"ring: 2(N-1)", "bully: 3N-6", "star5: 5 nodes", "star16: 16 nodes", "star64: 64 nodes"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// TestReportCommandBadInput: an input that cannot be used fails with exit
// status 2 and one line naming it and what is wrong, and nothing is
// written.
func TestReportCommandBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "s5")
	writeBench(t, good, "star5", 5)
	notResults := filepath.Join(dir, "topology.yaml")
	if err := os.WriteFile(notResults, []byte("name: star5\nnodes: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(notJSON, []byte("BenchmarkElection/topology=star5 30 1 ns/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loss := resultstest.SweepSample()
	loss.Scenarios = loss.Scenarios[5:] // loss=1 .. loss=20 only
	lossDir := filepath.Join(dir, "loss")
	if err := os.MkdirAll(lossDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := loss.WriteFile(filepath.Join(lossDir, "results.json")); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nosuch")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{missing}, []string{filepath.Join(missing, ""), "no such file"}},
		{[]string{filepath.Join(dir, "empty-dir-missing")}, []string{"empty-dir-missing"}},
		{[]string{notResults}, []string{notResults}},
		{[]string{notJSON}, []string{notJSON}},
		{[]string{lossDir}, []string{filepath.Join(lossDir, "results.json"), "no leader-crash scenario", "loss loss=1"}},
		{[]string{"--out", good, good}, []string{good, "own report.html"}},
	} {
		// The good bench comes first: the bad one fails the report.
		out := filepath.Join(dir, "out")
		args := append([]string{"report", "--out", out, good}, tc.args...)
		if tc.args[0] == "--out" {
			args = append([]string{"report"}, tc.args...)
		}
		_, stderr, code := runApp(args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "bullylab: report: ") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line", tc.args, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr %q does not say %q", tc.args, stderr, w)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "report.html")); err == nil {
			t.Errorf("%q: report.html written", tc.args)
		}
	}
}
