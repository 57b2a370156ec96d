package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// On a real pseudo-terminal NewProgress draws the bar by itself.
func TestProgressDetectsTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	ptmx, pts := resultstest.OpenPTY(t, 80)
	p := bench.NewProgress(pts, 2)
	p.Start("leader-crash", 1, 2)
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 1, Runs: 2, OK: true, Leader: "n16", TimeToLeader: time.Second})
	buf := make([]byte, 4096)
	ptmx.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, _ := ptmx.Read(buf)
	s := string(buf[:got])
	if !strings.Contains(s, "\x1b[K") || !strings.Contains(s, "▕") {
		t.Errorf("terminal got %q, want a bar", s)
	}
	for _, line := range strings.Split(s, "\r\x1b[K") {
		if len([]rune(line)) > 79 {
			t.Errorf("line wider than the 80-column terminal: %q", line)
		}
	}

	// TERM=dumb asks for plain lines.
	t.Setenv("TERM", "dumb")
	p = bench.NewProgress(pts, 1)
	p.Done(bench.RunUpdate{Scenario: "s", Index: 1, Runs: 1, OK: true, Leader: "n2", TimeToLeader: time.Second})
	// The terminal may still hold the tail of the bar drawn above: read on
	// to the plain line and judge that line alone.
	var acc string
	ptmx.SetReadDeadline(time.Now().Add(2 * time.Second))
	const plain = "run 1/1 s:"
	for !strings.Contains(acc, "n2") {
		got, err := ptmx.Read(buf)
		if err != nil {
			t.Fatalf("TERM=dumb: no line mentioning n2 in %q: %v", acc, err)
		}
		acc += string(buf[:got])
	}
	// The bar drawn above ends without a newline, so its tail and the plain
	// line can arrive as one piece: the plain line starts at its text.
	i := strings.Index(acc, plain)
	if i < 0 {
		t.Fatalf("TERM=dumb: no plain line %q in %q", plain, acc)
	}
	line := acc[i:]
	if strings.Contains(line, "\x1b[K") {
		t.Errorf("TERM=dumb got %q", line)
	}
}
