package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// TestHistoryGate: CI appends a bench per commit and checks after each;
// check fails once, at the third bench after a rise of the time to leader
// (the fewest a segment holds), naming the commit that rose, and writes
// its markdown and HTML.
func TestHistoryGate(t *testing.T) {
	dir := t.TempDir()
	h := filepath.Join(dir, "history.jsonl")
	t0 := time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)
	var failed []int
	for i := 1; i <= 13; i++ {
		r := resultstest.Sample(uint64(i))
		r.Scenarios = r.Scenarios[:1]
		if i > 10 {
			for j := range r.Scenarios[0].Runs {
				r.Scenarios[0].Runs[j].TimeToLeaderNS += int64(100 * time.Millisecond)
			}
			r.Topology.Settings.FailureTimeoutNS = int64(600 * time.Millisecond)
		}
		r.Summarize()
		path := filepath.Join(dir, fmt.Sprintf("results-%d.json", i))
		if err := r.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := runApp("history", "append", "--file", h, "--commit", fmt.Sprintf("c%02d", i), "--time", t0.Add(time.Duration(i)*time.Hour).Format(time.RFC3339), path)
		if code != 0 || out != "appended 1 entry to "+h+"\n" {
			t.Fatalf("history append: exit %d, %q, %q", code, out, stderr)
		}
		md, page := filepath.Join(dir, "h.md"), filepath.Join(dir, "h.html")
		out, stderr, code = runApp("history", "check", "--file", h, "--markdown", md, "--html", page)
		if code == 2 || strings.Count(out, "\n") != 2 {
			t.Fatalf("history check after c%02d: exit %d\n%s%s", i, code, out, stderr)
		}
		if code != 1 {
			continue
		}
		failed = append(failed, i)
		want := "star16 leader-crash bully, time to leader p50: REGRESSION at c11, started by c13: "
		if !strings.Contains(out, want) || !strings.Contains(out, "settings changed: failure_timeout 500ms -> 600ms") ||
			stderr != "bullylab: history check: the newest entry, c13, starts a regression\n" {
			t.Errorf("history check after c13: stdout\n%s\nstderr %q; want %q", out, stderr, want)
		}
		mdText, _ := os.ReadFile(md)
		pageText, _ := os.ReadFile(page)
		for _, w := range []string{"## Regression history: **regression** at c13", "| time to leader p50 | c11 |", "| c13 |"} {
			if !strings.Contains(string(mdText), w) {
				t.Errorf("markdown lacks %q:\n%s", w, mdText)
			}
		}
		for _, w := range []string{"<svg", ">c11 +", "<h2>star16 leader-crash bully, time to leader p50</h2>"} {
			if !strings.Contains(string(pageText), w) {
				t.Errorf("HTML lacks %q", w)
			}
		}
	}
	if len(failed) != 1 || failed[0] != 13 {
		t.Errorf("check failed after commits %v, want after c13 only", failed)
	}
	checkUsage(t, "no-such.jsonl", "history", "check", "--file", filepath.Join(dir, "no-such.jsonl"))
	checkUsage(t, `--metric "latency"`, "history", "check", "--file", h, "--metric", "latency")
	checkUsage(t, `--min-effect "2"`, "history", "check", "--file", h, "--min-effect", "2")
	checkUsage(t, "permutations cannot reach", "history", "check", "--file", h, "--permutations", "9")
	checkUsage(t, "--time", "history", "append", "--file", h, "--commit", "x", "--time", "yesterday", "r.json")
	checkUsage(t, "want one or more results.json", "history", "append", "--file", h, "--commit", "x")
	os.WriteFile(h, []byte("{\"time\":1}\n"), 0o644)
	checkUsage(t, h+":1: time: want an RFC 3339 time", "history", "check", "--file", h)
}
