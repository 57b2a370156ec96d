package bench_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
)

// sampleSequence is the textbook "only the lowest detects" election of
// eight nodes after n8 crashed: n3 detects first, its ELECTION climbs,
// everyone above answers and elects in turn, n7 hears no ANSWER for an
// election timeout, halts the lower nodes and takes epoch 2.
func sampleSequence() bench.Sequence {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * 1e6)) }
	seq := bench.Sequence{
		Title:  "leader-crash, run 12 (seed 12): leader n7 after 707ms",
		Nodes:  []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"},
		Origin: t0,
		Faults: []bench.FaultMark{{Time: t0, Text: "crash n8 (SIGKILL)", Nodes: []string{"n8"}}},
	}
	send := func(ms float64, typ string, epoch uint64, from string, to ...string) float64 {
		for i, d := range to {
			sent := ms + float64(i)*0.04
			seq.Messages = append(seq.Messages, bench.SequenceMessage{Time: at(sent), RecvTime: at(sent + 0.35), From: from, To: d, Type: typ, Epoch: epoch})
		}
		return ms + float64(len(to))*0.04 + 0.35
	}
	t := send(505.2, "ELECTION", 1, "n3", "n4", "n5", "n6", "n7")
	for i, n := range []string{"n4", "n5", "n6", "n7"} {
		send(t+float64(i)*0.05, "ANSWER", 1, n, "n3")
	}
	t = send(t+0.3, "ELECTION", 1, "n4", "n5", "n6", "n7")
	t = send(t+0.1, "ELECTION", 1, "n5", "n6", "n7")
	for i, n := range []string{"n5", "n6", "n7"} {
		send(t+float64(i)*0.05, "ANSWER", 1, n, "n4")
	}
	t = send(t+0.3, "ELECTION", 1, "n6", "n7")
	send(t, "ANSWER", 1, "n7", "n6")
	t = send(706.1, "HALT", 2, "n7", "n6", "n5", "n4", "n3", "n2", "n1")
	for i, n := range []string{"n6", "n5", "n4", "n3", "n2", "n1"} {
		send(t+float64(i)*0.06, "HALT_ACK", 2, n, "n7")
	}
	t += 0.8
	// The capture saw the COORDINATORs leave n7 but not arrive.
	for i, n := range []string{"n6", "n5", "n4", "n3", "n2", "n1"} {
		seq.Messages = append(seq.Messages, bench.SequenceMessage{Time: at(t + float64(i)*0.03), From: "n7", To: n, Type: "COORDINATOR", Epoch: 2})
	}
	return seq
}

func TestWriteReport(t *testing.T) {
	r := sampleResults(1)
	// Text from nodes and files must not become markup.
	r.Scenarios[0].Runs[6].Failure = `no leader: n3 said "<script>alert(1)</script>"`
	r.Scenarios[0].Summary = bench.Summarize(r.Scenarios[0].Runs)
	var buf bytes.Buffer
	if err := bench.WriteReport(&buf, r, sampleSequence()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if dir := os.Getenv("BULLYLAB_REPORT_DIR"); dir != "" {
		// For a look: BULLYLAB_REPORT_DIR=/tmp/r go test -run TestWriteReport ./netem/bench
		if err := os.WriteFile(filepath.Join(dir, "report.html"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Self-contained: nothing fetched from elsewhere.
	for _, m := range regexp.MustCompile(`https?://[^\s"'<>]*`).FindAllString(page, -1) {
		if m != "http://www.w3.org/2000/svg" {
			t.Errorf("external reference %q", m)
		}
	}
	for _, bad := range []string{"<script", "<link", "<img", "@import", " src="} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if urls := regexp.MustCompile(`url\((#?)[^)]*\)`).FindAllStringSubmatch(page, -1); len(urls) == 0 {
		t.Error("no arrow markers referenced")
	} else {
		for _, u := range urls {
			if u[1] != "#" {
				t.Errorf("url() outside the page: %s", u[0])
			}
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("failure reason not escaped")
	}

	for _, want := range []string{
		"bullylab bench: star16",
		`<a href="#sc-latency-sweep-delay-50ms">latency-sweep delay=50ms</a>`,
		"time to leader (ms)", "cumulative share of runs", ">runs<",
		">p50 ", ">p95 ", ">p99 ",
		"29 of 30 runs passed",
		"Message sequence: leader-crash, run 12",
		">HALT e2 ×6<", ">ELECTION e1 ×4<", ">ANSWER e1<", ">COORDINATOR e2 ×6<",
		"crash n8 (SIGKILL)",
		`stroke-dasharray="5 3"`, // the COORDINATORs whose receipt was not captured
		"⋯ 505ms ⋯",              // the failure timeout, cut
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// One histogram per scenario, one diagram.
	if n := strings.Count(page, `<svg class="dist"`); n != 2 {
		t.Errorf("%d distribution plots, want 2", n)
	}
	if n := strings.Count(page, `<svg class="seq"`); n != 1 {
		t.Errorf("%d sequence diagrams, want 1", n)
	}
	seq := sampleSequence()
	if n := strings.Count(page, `marker-end="url(#arrow-`); n != len(seq.Messages) {
		t.Errorf("%d arrows, want one per message (%d)", n, len(seq.Messages))
	}
}

func TestMedianRun(t *testing.T) {
	sc := &bench.ScenarioResult{Name: "x"}
	for i, ms := range []int64{30, 10, 50, 20, 40} {
		sc.Runs = append(sc.Runs, bench.Run{Index: i + 1, Seed: int64(i), OK: true, Leader: "n5", TimeToLeaderNS: ms * 1e6})
	}
	sc.Runs = append(sc.Runs, bench.Run{Index: 6, FailureKind: bench.FailLiveness})
	run, ok := bench.MedianRun(sc)
	if !ok || run.Index != 1 {
		t.Errorf("median run %d, %v; want run 1 (30ms, the third of five)", run.Index, ok)
	}
	if got, want := bench.SequenceTitle(sc, run), "x, run 1 (seed 0): leader n5 after 30.0ms"; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	if _, ok := bench.MedianRun(&bench.ScenarioResult{Runs: []bench.Run{{Index: 1, FailureKind: "setup"}}}); ok {
		t.Error("a median among no passed runs")
	}
}

// Corrupt results with times near the int64 limit still draw, and quickly:
// adding a tick step to such a float does not change it.
func TestDistributionSVGExtremes(t *testing.T) {
	for _, ns := range [][]int64{
		{9.2e18, 9.2e18 + 2e3},
		{0, 9.2e18},
		{5},
		{1, 1, 1, 1},
	} {
		done := make(chan string)
		go func() { done <- bench.DistributionSVG(ns, "x") }()
		select {
		case svg := <-done:
			if !strings.HasPrefix(svg, "<svg") || !strings.HasSuffix(svg, "</svg>") {
				t.Errorf("%v: %.60q", ns, svg)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%v: still drawing after 5s", ns)
		}
	}
}
