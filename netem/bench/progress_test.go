//go:build linux

package bench_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// Plain output is one line per finished run, numbered among all the
// bench's runs across its scenarios, and nothing for starts or phases.
func TestProgressPlain(t *testing.T) {
	var out bytes.Buffer
	plain := false
	clk := newFakeClock()
	p := bench.NewProgress(&out, 4, bench.ProgressOptions{Terminal: &plain, Now: clk.now})
	p.Start("loss=1%", 1, 2)
	p.Phase(bench.PhaseSettle)
	clk.advance(10 * time.Second)
	p.Done(bench.RunUpdate{Scenario: "loss=1%", Index: 1, Runs: 2, OK: true, Leader: "n16", TimeToLeader: 612 * time.Millisecond})
	p.Start("loss=1%", 2, 2)
	clk.advance(10 * time.Second)
	p.Done(bench.RunUpdate{Scenario: "loss=1%", Index: 2, Runs: 2, FailureKind: "liveness", Failure: "no leader\nwithin 30s"})
	p.Start("loss=5%", 1, 2)
	p.Phase(bench.PhaseInject)
	clk.advance(10 * time.Second)
	p.Done(bench.RunUpdate{Scenario: "loss=5%", Index: 1, Runs: 2, OK: true, Leader: "n15", TimeToLeader: 1500 * time.Millisecond})
	p.Finish()
	want := "run 1/4 loss=1%: leader n16 after 612ms\n" +
		"run 2/4 loss=1%: FAILED (liveness) no leader within 30s\n" +
		"run 3/4 loss=5%: leader n15 after 1.50s\n" +
		"3 runs in 30s, 1 failed\n"
	if out.String() != want {
		t.Errorf("plain output\n%q\nwant\n%q", out.String(), want)
	}
}

func TestProgressTerminal(t *testing.T) {
	var out bytes.Buffer
	tty := true
	clk := newFakeClock()
	p := bench.NewProgress(&out, 4, bench.ProgressOptions{Terminal: &tty, Width: 100, Now: clk.now})
	take := func() string { s := out.String(); out.Reset(); return s }

	p.Start("leader-crash", 1, 2)
	if s := take(); s != "\r\x1b[Krun 1/4 leader-crash: build    ▕░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░▏ elapsed 0s  ETA --" {
		t.Errorf("first bar %q", s)
	}
	clk.advance(2 * time.Second)
	p.Phase(bench.PhaseSettle)
	if s := take(); !strings.HasPrefix(s, "\r\x1b[Krun 1/4 leader-crash: settle   ▕") || !strings.HasSuffix(s, "▏ elapsed 2s  ETA --") {
		t.Errorf("settle bar %q", s)
	}
	// The same phase again draws nothing.
	p.Phase(bench.PhaseSettle)
	if s := take(); s != "" {
		t.Errorf("a repeated phase drew %q", s)
	}
	clk.advance(18 * time.Second)
	// A passed run's line replaces the bar and stays, as a failed run's.
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 1, Runs: 2, OK: true, Leader: "n16", TimeToLeader: 612 * time.Millisecond})
	if s := take(); s != "\r\x1b[Krun 1/4 leader-crash: leader n16 after 612ms\n" {
		t.Errorf("passed run %q", s)
	}

	// One run of 20s done, three to go: 1m00s, less what the run under
	// way has had.
	p.Start("leader-crash", 2, 2)
	clk.advance(5 * time.Second)
	p.Phase(bench.PhaseInject)
	bar := take()
	want := "run 2/4 leader-crash: inject   ▕██████████░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░▏ elapsed 25s  ETA 55s"
	if !strings.HasSuffix(bar, want) || strings.Count(bar, "\r\x1b[K") != 2 {
		t.Errorf("bar after one run\n%q\nwant it to end in\n%q", bar, want)
	}
	// A run slower than the mean does not drive the ETA below the runs
	// after it.
	clk.advance(60 * time.Second)
	p.Phase(bench.PhaseTeardown)
	if s := take(); !strings.HasSuffix(s, "teardown ▕██████████░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░▏ elapsed 1m25s  ETA 40s") {
		t.Errorf("slow run's bar %q", s)
	}
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 2, Runs: 2, FailureKind: "safety", Failure: "two leaders"})
	if s := take(); s != "\r\x1b[Krun 2/4 leader-crash: FAILED (safety) two leaders\n" {
		t.Errorf("failure output %q", s)
	}
	// The counter goes on across scenarios; the failures are counted.
	p.Start("partition-minority", 1, 2)
	if s := take(); !strings.HasSuffix(s, "run 3/4 partition-minority: build    ▕████████████░░░░░░░░░░░░░▏ elapsed 1m25s  ETA 1m25s  1 failed") {
		t.Errorf("third bar %q", s)
	}
	clk.advance(time.Hour)
	p.Phase(bench.PhaseMeasure)
	if s := take(); !strings.Contains(s, "elapsed 1h01m25s  ETA 43s  1 failed") {
		t.Errorf("an hour on %q", s)
	}
	p.Finish()
	if s := take(); s != "\r\x1b[K2 runs in 1h1m25s, 1 failed\n" {
		t.Errorf("finish %q", s)
	}

	// A narrow terminal gets no bar, and never a line wider than itself.
	p = bench.NewProgress(&out, 4, bench.ProgressOptions{Terminal: &tty, Width: 30, Now: clk.now})
	p.Start("latency-sweep delay=100ms", 1, 30)
	if s := strings.TrimPrefix(take(), "\r\x1b[K"); len([]rune(s)) > 29 || strings.Contains(s, "▕") || !strings.HasPrefix(s, "run 1/4 latency-sweep") {
		t.Errorf("narrow terminal: %q", s)
	}
	// Without room for the bar the words stay.
	p = bench.NewProgress(&out, 4, bench.ProgressOptions{Terminal: &tty, Width: 55, Now: clk.now})
	p.Start("leader-crash", 1, 4)
	if s := take(); s != "\r\x1b[Krun 1/4 leader-crash: build     elapsed 0s  ETA --" {
		t.Errorf("terminal without room for the bar: %q", s)
	}
}

// A file that is not a terminal gets plain lines.
func TestProgressDetectsFile(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := bench.NewProgress(f, 1)
	p.Start("s", 1, 1)
	p.Phase(bench.PhaseInject)
	p.Done(bench.RunUpdate{Scenario: "s", Index: 1, Runs: 1, OK: true, Leader: "n2", TimeToLeader: time.Millisecond})
	data, _ := os.ReadFile(f.Name())
	if string(data) != "run 1/1 s: leader n2 after 1.00ms\n" {
		t.Errorf("file got %q", data)
	}
}
