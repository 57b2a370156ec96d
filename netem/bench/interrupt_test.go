//go:build linux

package bench_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/netemtest"
)

// TestRunBenchInterrupted interrupts a bench of three runs once the first
// finished and the second's testbed is up, as SIGINT does in `bullylab
// bench`: the second run's testbed is torn down, leaving nothing on the
// machine; the outputs hold the first run alone, marked partial; the
// second run and its capture are gone.
func TestRunBenchInterrupted(t *testing.T) {
	bin, topo, scs := slowStar5LeaderCrash(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	var (
		mu   sync.Mutex
		labs []string
	)
	secondUp := make(chan struct{})
	defer bench.SetLabStarted(func(run string) {
		mu.Lock()
		defer mu.Unlock()
		labs = append(labs, run)
		if len(labs) == 2 {
			close(secondUp)
		}
	})()
	// The runs are one after the other: the second lab starts after the
	// first run's end.
	go func() {
		select {
		case <-secondUp:
			cancel(errors.New("interrupted by SIGINT"))
		case <-ctx.Done():
		}
	}()

	out := t.TempDir()
	var progress, summary bytes.Buffer
	// A terminal's bar, which shows each run's phases.
	term := true
	const runs = 3
	res, err := runBench(ctx, bench.RunOptions{
		Topology: topo, Scenarios: scs, ScenarioArg: "leader-crash", Runs: runs, Seed: 1,
		OutDir: out, Binary: bin, Version: "test",
		Progress: bench.NewProgress(&progress, runs, bench.ProgressOptions{Terminal: &term, Width: 200}),
	}, &summary)
	t.Logf("progress:\n%q\nsummary:\n%s", progress.String(), summary.String())
	if !errors.Is(err, bench.ErrInterrupted) {
		t.Fatalf("RunBench: %v, want ErrInterrupted", err)
	}
	// Run 1 went through every phase, its capture analysed after the
	// teardown; run 2 was torn down as it settled.
	var phases []string
	for _, bar := range strings.Split(progress.String(), "\r\x1b[K") {
		if f := strings.Fields(bar); len(f) > 3 && f[0] == "run" && (len(phases) == 0 || phases[len(phases)-1] != f[1]+" "+f[3]) {
			phases = append(phases, f[1]+" "+f[3])
		}
	}
	wantPhases := []string{"1/3 build", "1/3 settle", "1/3 inject", "1/3 measure", "1/3 teardown", "1/3 measure",
		"1/3 leader", "2/3 build", "2/3 settle", "2/3 teardown"}
	if strings.Join(phases, ", ") != strings.Join(wantPhases, ", ") {
		t.Errorf("the bar showed\n%q\nwant\n%q", phases, wantPhases)
	}
	mu.Lock()
	started := append([]string(nil), labs...)
	mu.Unlock()
	if len(started) != 2 {
		t.Errorf("%d labs started (%q), want 2: the bench went on after the interrupt", len(started), started)
	}
	for _, run := range started {
		netemtest.RequireClean(t, run)
	}

	got, err := results.ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	want := results.Partial{Reason: "interrupted by SIGINT", RunsPlanned: runs, RunsDone: 1}
	if got.Partial == nil || *got.Partial != want {
		t.Errorf("results.json partial %+v, want %+v", got.Partial, want)
	}
	if len(got.Scenarios) != 1 || len(got.Scenarios[0].Runs) != 1 || got.Scenarios[0].Runs[0].Index != 1 {
		t.Fatalf("results.json: %+v, want run 1 of leader-crash alone", got.Scenarios)
	}
	if res == nil || res.Partial == nil || *res.Partial != want {
		t.Errorf("RunBench's results: partial %+v, want %+v", res, want)
	}
	if !strings.Contains(summary.String(), "partial: interrupted by SIGINT after 1 of 3 runs") {
		t.Errorf("the summary does not say the bench is partial:\n%s", summary.String())
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte("Partial bench")) {
		t.Error("report.html does not say the bench is partial")
	}
	// bench.txt, and run 1's capture and key alone: the interrupted run's
	// are gone.
	requireOutputModes(t, out, "results.json", "bench.txt", "report.html", got.Scenarios[0].Runs[0].Capture, capture.ClusterKeyFile(got.Scenarios[0].Runs[0].Capture))
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("--out holds %q, want the three outputs and run 1's capture and key", names)
	}
}

// TestRunBenchAborted interrupts a bench of three runs as the second
// run's testbed comes up and closes Abort at once, as a second SIGINT does
// in `bullylab bench`: RunBench still tears that testbed down, leaving
// nothing on the machine, but writes no outputs (run 1's capture, written
// as it ran, stays) and returns ErrAborted.
func TestRunBenchAborted(t *testing.T) {
	bin, topo, scs := slowStar5LeaderCrash(t)
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	abort := make(chan struct{})
	var (
		mu   sync.Mutex
		labs []string
	)
	// The second lab is up and its run not yet torn down: both signals
	// arrive now, before RunBench can write anything.
	defer bench.SetLabStarted(func(run string) {
		mu.Lock()
		defer mu.Unlock()
		labs = append(labs, run)
		if len(labs) == 2 {
			cancel(errors.New("interrupted by SIGINT"))
			close(abort)
		}
	})()

	out := t.TempDir()
	var progress, summary bytes.Buffer
	term := false
	const runs = 3
	res, err := runBench(ctx, bench.RunOptions{
		Topology: topo, Scenarios: scs, ScenarioArg: "leader-crash", Runs: runs, Seed: 1,
		OutDir: out, Binary: bin, Version: "test",
		Progress: bench.NewProgress(&progress, runs, bench.ProgressOptions{Terminal: &term}), Abort: abort,
	}, &summary)
	t.Logf("progress:\n%s\nsummary:\n%s", progress.String(), summary.String())
	if !errors.Is(err, bench.ErrAborted) || errors.Is(err, bench.ErrInterrupted) {
		t.Fatalf("RunBench: %v, want ErrAborted", err)
	}
	if want := "bench aborted: interrupted by SIGINT after 1 of 3 runs, nothing written"; err.Error() != want {
		t.Errorf("RunBench: %q, want %q", err, want)
	}
	mu.Lock()
	started := append([]string(nil), labs...)
	mu.Unlock()
	if len(started) != 2 {
		t.Errorf("%d labs started (%q), want 2: the bench went on after the abort", len(started), started)
	}
	for _, run := range started {
		netemtest.RequireClean(t, run)
	}
	want := results.Partial{Reason: "interrupted by SIGINT", RunsPlanned: runs, RunsDone: 1}
	if res == nil || res.Partial == nil || *res.Partial != want {
		t.Errorf("RunBench's results: %+v, want partial %+v", res, want)
	}
	if summary.Len() != 0 {
		t.Errorf("an aborted bench printed its summary:\n%s", summary.String())
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"run-leader-crash-1.key", "run-leader-crash-1.pcapng"}; !slices.Equal(names, want) {
		t.Errorf("--out holds %q, want run 1's capture and its key alone: %q", names, want)
	}
}
