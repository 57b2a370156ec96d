//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/urfave/cli/v2"
)

// runCmd runs cmd in an app of its own (main.go registers them) and
// returns the exit status the command asks for and the output.
func runCmd(t *testing.T, cmd *cli.Command, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Name: "bullylab", Writer: &out, ErrWriter: &out, Commands: []*cli.Command{cmd},
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"bullylab", cmd.Name}, args...))
	if err == nil {
		return 0, out.String()
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), out.String() + err.Error()
	}
	return 1, out.String() + err.Error()
}

func TestCompareUnusable(t *testing.T) {
	dir := t.TempDir()
	if code, out := runCmd(t, compareCommand(), filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")); code != 2 {
		t.Errorf("missing inputs: exit %d, want 2: %s", code, out)
	}
	if code, out := runCmd(t, compareCommand(), "only-one"); code != 2 {
		t.Errorf("one argument: exit %d, want 2: %s", code, out)
	}
	if code, out := runCmd(t, compareCommand(), "--max-regress", "lots", "a", "b"); code != 2 {
		t.Errorf("bad threshold: exit %d, want 2: %s", code, out)
	}
	for _, args := range [][]string{{"--max-regress", "0.01", "a", "b"}, {"--format", "yaml", "a", "b"}, {"--alpha", "1.5", "a", "b"}} {
		if code, out := runCmd(t, compareCommand(), args...); code != 2 || strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("%q: exit %d, want 2 and one line: %s", args, code, out)
		}
	}
}

// TestBenchBadInput: what is wrong with bench's input is said in one
// line and exit status 2, before the check for root and before any
// testbed is built.
func TestBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	unknownNode := filepath.Join(dir, "n9.yaml")
	if err := os.WriteFile(unknownNode, []byte("steps:\n  - inject: {crash: n9}\n  - wait_leader\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--topology", "no-such-topology"}, `bench: --topology: topology "no-such-topology": no such file or built-in topology`},
		{[]string{"--topology", "/dev/zero"}, "bench: --topology: topology /dev/zero: larger than 8 MiB"},
		{[]string{"--scenario", "no-such-scenario"}, `bench: --scenario: scenario "no-such-scenario": no such built-in scenario`},
		{[]string{"--scenario", fifo}, "bench: --scenario: " + fifo + ": empty scenario"},
		{[]string{"--topology", "star5", "--scenario", unknownNode},
			"bench: --scenario: " + unknownNode + `:2: steps[0].inject.crash: topology star5 has no node or group "n9" (its 5 nodes are n1 to n5; it has no groups)`},
		{[]string{"--runs", "0"}, "bench: --runs 0: want at least 1"},
		{[]string{"--backend", "tc"}, `--backend "tc": want netem or nfqueue`},
		{[]string{"--algorithm", "raft"}, `bench: --algorithm "raft": not an election algorithm (known: ` + strings.Join(node.Algorithms(), ", ") + ")"},
		{[]string{"--algorithm", "bully,"}, `bench: --algorithm "": not an election algorithm`},
		{[]string{"--algorithm", "bully,bully"}, `bench: --algorithm: bully is listed twice`},
		{[]string{"extra"}, `bench: unexpected argument "extra"`},
		{[]string{"--diagram-runs", "median,quickest"}, `bench: --diagram-runs: "quickest" is not a run number (from 1), fastest, median, slowest or all`},
		{[]string{"--diagram-runs", ""}, `bench: --diagram-runs: empty: want run numbers, fastest, median, slowest or all`},
		{[]string{"--runs", "5", "--diagram-runs", "median,7"}, `bench: --diagram-runs: run 7, but each scenario runs 5 times`},
		{[]string{"--diagram-scale", "linear"}, `bench: --diagram-scale: "linear" is not a diagram scale (auto, true, compressed)`},
		{[]string{"--scenario", "chained", "--hold", "-1s"}, "bench: --hold -1s: want a positive duration"},
		{[]string{"--scenario", "chained", "--hold", "0s"}, "bench: --hold 0s: want a positive duration"},
		{[]string{"--scenario", "chained", "--hold", "long"}, `bench: --hold: "long" is not a duration (like 250ms or 1s)`},
		{[]string{"--topology", "star3", "--scenario", "bridge"}, "bench: --scenario: scenario bridge: bridge needs at least 4 nodes, the topology has 3"},
	} {
		code, out := runCmd(t, benchCommand(), tc.args...)
		if code != 2 || !strings.HasPrefix(out, tc.want) || strings.Contains(out, "\n") {
			t.Errorf("%v: exit %d, want 2 and one line starting %s:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// TestBackendFlag: bench takes the --backend values up takes, and refuses
// the others with up's error.
func TestBackendFlag(t *testing.T) {
	_, upOut := runCmd(t, upCommand(), "star3", "--backend", "tc")
	_, benchOut := runCmd(t, benchCommand(), "--backend", "tc")
	if upOut != benchOut || upOut != `--backend "tc": want netem or nfqueue` {
		t.Errorf("up says %q, bench says %q", upOut, benchOut)
	}
	for _, b := range []string{"", "netem", "nfqueue"} {
		if err := checkBackend(b); err != nil {
			t.Errorf("--backend %q: %v", b, err)
		}
	}
}

// TestAlgorithmFlags: bench's --algorithm takes a list of the names
// node.Algorithms lists, up's one of them; either refuses another name
// with a one-line usage error naming the flag, before any testbed.
func TestAlgorithmFlags(t *testing.T) {
	all := strings.Join(node.Algorithms(), ",")
	got, err := parseAlgorithms(" " + strings.ReplaceAll(all, ",", " , ") + " ")
	if err != nil || !slices.Equal(got, node.Algorithms()) {
		t.Errorf("parseAlgorithms(%q) = %v, %v", all, got, err)
	}
	code, out := runCmd(t, upCommand(), "star3", "--algorithm", "raft")
	if want := `--algorithm "raft": not an election algorithm (known: ` + strings.Join(node.Algorithms(), ", ") + ")"; code != 2 || out != want {
		t.Errorf("up --algorithm raft: exit %d, %q; want 2, %q", code, out, want)
	}
	code, out = runCmd(t, upCommand(), "--algorithm", "bully,ring", "star3")
	if code != 2 || !strings.HasPrefix(out, `--algorithm "bully,ring": not an election algorithm`) {
		t.Errorf("up takes one algorithm: exit %d, %q", code, out)
	}
}

// TestBenchLossParam: --loss takes one percentage, as it always did, or a
// comma-separated sweep of them; what is wrong with it is said before any
// testbed.
func TestBenchLossParam(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []float64
	}{
		{"20", []float64{20}},
		{"20%", []float64{20}},
		{"1,5,10,20", []float64{1, 5, 10, 20}},
		{" 2.5%, 0.5 ", []float64{2.5, 0.5}},
	} {
		got, err := parseLosses(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseLosses(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if got := formatLosses([]float64{20, 2.5}); got != "20,2.5" {
		t.Errorf("formatLosses = %q", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "loss", "--loss", "lots"}, `bench: --loss: "lots" is not a percentage such as 5 or 2.5%`},
		{[]string{"--scenario", "loss", "--loss", "5,,10"}, `bench: --loss: "" is not a percentage`},
		{[]string{"--scenario", "loss", "--loss", "NaN"}, `bench: --loss: "NaN" is not a percentage`},
		{[]string{"--scenario", "loss", "--loss", "0"}, "bench: --scenario: scenario loss: loss 0% is not in (0, 100]"},
		{[]string{"--scenario", "loss", "--loss", "5,120"}, "bench: --scenario: scenario loss: loss 120% is not in (0, 100]"},
		{[]string{"--scenario", "loss", "--loss", "5,5%"}, "bench: --scenario: scenario loss: loss 5% is listed twice"},
	} {
		code, out := runCmd(t, benchCommand(), tc.args...)
		if code != 2 || !strings.HasPrefix(out, tc.want) || strings.Contains(out, "\n") {
			t.Errorf("%v: exit %d, want 2 and one line starting %s:\n%s", tc.args, code, tc.want, out)
		}
	}
}

// TestBenchHostFilesRefused: a partition whose elections would exhaust the
// shared host's open files is refused in one line, exit status 2, before
// anything is built.
func TestBenchHostFilesRefused(t *testing.T) {
	topo, err := topologies.Load("star1000")
	if err != nil {
		t.Fatal(err)
	}
	scs, err := scenario.Lookup("partition-minority", scenario.Params{Nodes: len(topo.Nodes)})
	if err != nil {
		t.Fatal(err)
	}
	if bench.CheckHostFiles(topo, scs, []string{topo.Algorithm}) == nil {
		t.Skip("this machine's open-files limit carries partition-minority on star1000: nothing to refuse")
	}
	code, out := runCmd(t, benchCommand(), "--topology", "star1000", "--scenario", "partition-minority", "--runs", "1", "--out", t.TempDir())
	if code != 2 || !strings.HasPrefix(out, "bench: partition-minority with bully on star1000 needs about ") || !strings.Contains(out, "ulimit -Hn") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("exit %d: %q, want 2 and one line with the estimate and what to do", code, out)
	}
}

// TestBenchOutRefused: an --out holding another bench's outputs is
// refused in one line naming it and a file, exit status 2, before the
// check for root; nothing in it is touched.
func TestBenchOutRefused(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"report.html", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out := runCmd(t, benchCommand(), "--topology", "star5", "--runs", "1", "--out", dir)
	if code != 2 || !strings.Contains(out, dir) || !strings.Contains(out, "report.html") || strings.Count(strings.TrimSpace(out), "\n") > 0 {
		t.Errorf("exit %d: %q, want 2 and one line naming %s and report.html", code, out, dir)
	}
	for _, name := range []string{"report.html", "notes.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("refused, yet: %v", err)
		}
	}
}

// TestComparePartial: compare warns on stderr, one line per partial side
// naming its file, and still compares.
func TestComparePartial(t *testing.T) {
	base, err := results.ReadResults(filepath.Join("..", "..", "netem", "bench", "baseline", "star5-leader-crash.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	full := filepath.Join(dir, "full.json")
	if err := base.WriteFile(full); err != nil {
		t.Fatal(err)
	}
	base.Partial = &results.Partial{Reason: "interrupted by SIGINT", RunsPlanned: 100, RunsDone: 30}
	cut := filepath.Join(dir, "cut.json")
	if err := base.WriteFile(cut); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	app := &cli.App{Name: "bullylab", Writer: &stdout, ErrWriter: &stderr, Commands: []*cli.Command{compareCommand()},
		ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run([]string{"bullylab", "compare", "--format", "markdown", cut, cut}); err != nil {
		t.Fatalf("compare: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	want := "compare: warning: " + cut + " is partial: interrupted by SIGINT after 30 of 100 runs\n"
	if stderr.String() != want+want {
		t.Errorf("stderr %q, want the warning once per side: %q", stderr.String(), want)
	}
	if !strings.Contains(stdout.String(), "> note: "+cut+" is partial") {
		t.Errorf("the markdown lacks the note:\n%s", stdout.String())
	}

	stdout.Reset()
	stderr.Reset()
	if err := app.Run([]string{"bullylab", "compare", full, full}); err != nil {
		t.Fatalf("compare: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if stderr.Len() != 0 || strings.Contains(stdout.String(), "partial") {
		t.Errorf("full benches: stderr %q, stdout:\n%s", stderr.String(), stdout.String())
	}
}
