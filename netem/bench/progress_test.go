package bench_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
)

// clock advances 10s a call, as if each run took that long.
func clock() func() time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { t = t.Add(10 * time.Second); return t }
}

func TestProgressPlain(t *testing.T) {
	var out bytes.Buffer
	plain := false
	p := bench.NewProgress(&out, 3, bench.ProgressOptions{Terminal: &plain, Now: clock()})
	p.Start("leader-crash", 1, 3)
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 1, Runs: 3, OK: true, Leader: "n16", TimeToLeader: 612 * time.Millisecond})
	p.Start("leader-crash", 2, 3)
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 2, Runs: 3, FailureKind: "liveness", Failure: "no leader\nwithin 30s"})
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 3, Runs: 3, OK: true, Leader: "n15", TimeToLeader: 1500 * time.Millisecond})
	p.Finish()
	want := "run 1/3 leader-crash: leader n16 after 612ms\n" +
		"run 2/3 leader-crash: FAILED (liveness) no leader within 30s\n" +
		"run 3/3 leader-crash: leader n15 after 1.50s\n" +
		"3 runs in 10s, 1 failed\n"
	if out.String() != want {
		t.Errorf("plain output\n%q\nwant\n%q", out.String(), want)
	}
}

func TestProgressTerminal(t *testing.T) {
	var out bytes.Buffer
	tty := true
	p := bench.NewProgress(&out, 4, bench.ProgressOptions{Terminal: &tty, Width: 100, Now: clock()})
	p.Start("leader-crash", 1, 4)
	first := out.String()
	if first != "\r\x1b[Kleader-crash 1/4 ▕░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░▏ 0/4 · ETA --" {
		t.Errorf("first bar %q", first)
	}
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 1, Runs: 4, OK: true, Leader: "n16", TimeToLeader: 612 * time.Millisecond})
	out.Reset()
	p.Start("leader-crash", 2, 4)
	// One run in 20s of clock (start, then this call): 3 runs to go, 60s.
	bar := out.String()
	if !strings.HasPrefix(bar, "\r\x1b[Kleader-crash 2/4 ▕██████████░░░░") || !strings.HasSuffix(bar, "1/4 · n16 after 612ms · ETA 1m0s") {
		t.Errorf("bar after one run %q", bar)
	}
	out.Reset()
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 2, Runs: 4, FailureKind: "safety", Failure: "two leaders"})
	// The failure is a line of its own above the redrawn bar.
	if s := out.String(); !strings.HasPrefix(s, "\r\x1b[Krun 2/4 leader-crash: FAILED (safety) two leaders\n\r\x1b[K") || !strings.Contains(s, "2/4 · 1 failed · run failed") {
		t.Errorf("failure output %q", s)
	}
	out.Reset()
	p.Finish()
	if s := out.String(); s != "\r\x1b[K2 runs in 40s, 1 failed\n" {
		t.Errorf("finish %q", s)
	}

	// A narrow terminal gets no bar, and never a line wider than itself.
	out.Reset()
	p = bench.NewProgress(&out, 4, bench.ProgressOptions{Terminal: &tty, Width: 30, Now: clock()})
	p.Start("latency-sweep delay=100ms", 1, 30)
	if s := strings.TrimPrefix(out.String(), "\r\x1b[K"); len([]rune(s)) > 29 || strings.Contains(s, "▕") {
		t.Errorf("narrow terminal: %q", s)
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
	p.Done(bench.RunUpdate{Scenario: "s", Index: 1, Runs: 1, OK: true, Leader: "n2", TimeToLeader: time.Millisecond})
	data, _ := os.ReadFile(f.Name())
	if string(data) != "run 1/1 s: leader n2 after 1.00ms\n" {
		t.Errorf("file got %q", data)
	}
}
