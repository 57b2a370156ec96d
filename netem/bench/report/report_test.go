package report_test

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// sampleSequence is the textbook "only the lowest detects" election of
// eight nodes after n8 crashed: n3 detects first, its ELECTION climbs,
// everyone above answers and elects in turn, n7 hears no ANSWER for an
// election timeout, halts the lower nodes and takes epoch 2.
func sampleSequence() report.Sequence {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * 1e6)) }
	seq := report.Sequence{
		Title:  "leader-crash, run 12 (seed 12): leader n7 after 707ms",
		Nodes:  []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"},
		Origin: t0,
		Faults: []report.FaultMark{{Kind: "crash", Time: t0, Text: "crash n8 (SIGKILL)", Nodes: []string{"n8"}}},
	}
	send := func(ms float64, typ string, epoch uint64, from string, to ...string) float64 {
		for i, d := range to {
			sent := ms + float64(i)*0.04
			seq.Messages = append(seq.Messages, report.SequenceMessage{Time: at(sent), RecvTime: at(sent + 0.35), From: from, To: d, Type: typ, Epoch: epoch})
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
		seq.Messages = append(seq.Messages, report.SequenceMessage{Time: at(t + float64(i)*0.03), From: "n7", To: n, Type: "COORDINATOR", Epoch: 2})
	}
	return seq
}

func TestWriteReport(t *testing.T) {
	r := resultstest.Sample(1)
	// Text from nodes and files must not become markup.
	r.Scenarios[0].Runs[6].Failure = `no leader: n3 said "<script>alert(1)</script>"`
	r.Scenarios[0].Summary = results.Summarize(r.Scenarios[0].Runs)
	var buf bytes.Buffer
	if err := report.Write(&buf, r, sampleSequence()); err != nil {
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
		"time to leader (ms", "cumulative share of runs", ">runs<",
		">p50 ", ">p95 ", ">max ",
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
	// 30 runs do not support a p99 (results.PercentileShown): no figure
	// marks one.
	if strings.Contains(page, ">p99 ") {
		t.Error("a histogram marks the p99 of 30 runs")
	}
	// One histogram per scenario, one diagram.
	if n := strings.Count(page, `<svg class="dist"`); n != 2 {
		t.Errorf("%d distribution plots, want 2", n)
	}
	if n := strings.Count(page, `<svg class="seq"`); n != 1 {
		t.Errorf("%d sequence diagrams, want 1", n)
	}
	seq := sampleSequence()
	if n := len(regexp.MustCompile(`marker-end="url\(#arrow-[^"]*\)"><title>`).FindAllString(page, -1)); n != len(seq.Messages) {
		t.Errorf("%d arrows, want one per message (%d)", n, len(seq.Messages))
	}
}

func TestMedianRun(t *testing.T) {
	sc := &results.ScenarioResult{Name: "x"}
	for i, ms := range []int64{30, 10, 50, 20, 40} {
		sc.Runs = append(sc.Runs, results.Run{Index: i + 1, Seed: int64(i), OK: true, Leader: "n5", TimeToLeaderNS: ms * 1e6})
	}
	sc.Runs = append(sc.Runs, results.Run{Index: 6, FailureKind: results.FailLiveness})
	run, ok := report.MedianRun(sc)
	if !ok || run.Index != 1 {
		t.Errorf("median run %d, %v; want run 1 (30ms, the third of five)", run.Index, ok)
	}
	if got, want := report.SequenceTitle(sc, run), "x, run 1 (seed 0): leader n5 after 30.0ms"; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	if _, ok := report.MedianRun(&results.ScenarioResult{Runs: []results.Run{{Index: 1, FailureKind: "setup"}}}); ok {
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
		go func() { done <- report.DistributionSVG(ns, "x") }()
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

// TestDistributionAxis: three runs 3.5 ms apart at 730 ms are drawn on an
// axis that starts at a round floor with a least span and says so, not
// stretched across the width; runs near zero get an axis from zero.
func TestDistributionAxis(t *testing.T) {
	svg := report.DistributionSVG([]int64{730.5e6, 732e6, 734e6}, "x")
	if !strings.Contains(svg, "not at zero)") {
		t.Errorf("the axis title does not say where a non-zero axis starts: %s", svg)
	}
	var xs []float64
	for _, m := range regexp.MustCompile(`<line x1="([0-9.]+)" x2="[0-9.]+" y1="([0-9.]+)" y2="([0-9.]+)" stroke="#1b2631" stroke-opacity="0.6"/>`).FindAllStringSubmatch(svg, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		xs = append(xs, x)
	}
	if len(xs) != 3 {
		t.Fatalf("%d run ticks, want 3", len(xs))
	}
	// The plot is 738 px wide; the spread, 3.5 ms of a span of at least
	// 146.8 ms (a fifth of 734), takes at most 3.5/146.8 of it.
	if spread := xs[2] - xs[0]; spread > 738*3.5/146.8+1 {
		t.Errorf("3.5 ms of spread drawn %.1f px wide: the axis stretches it", spread)
	}
	svg = report.DistributionSVG([]int64{80e6, 120e6, 200e6}, "x")
	if !strings.Contains(svg, "the axis from zero") {
		t.Errorf("runs near zero not on an axis from zero: %s", svg)
	}
	for _, name := range []string{">p95 ", ">p99 "} {
		if strings.Contains(svg, name) {
			t.Errorf("3 runs' histogram marks %s", name)
		}
	}
}

func renderReport(t *testing.T, r *results.Results, seqs ...report.Sequence) string {
	t.Helper()
	var buf bytes.Buffer
	if err := report.Write(&buf, r, seqs...); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestReportPercentileWording: the report says for each scenario how many
// runs its percentiles rest on and which run each is, for the runs it has:
// no sentence about 30 runs on a report of 1 or 5.
func TestReportPercentileWording(t *testing.T) {
	for _, tc := range []struct {
		runs    int
		want    []string
		notWant []string
	}{
		{1, []string{
			"In every scenario 1 run passed: p50 and max are all that one run; p95 and p99 are left out below 20 and 100 runs.",
			"The one run passed. Time to leader over the one run that passed (p50 578ms, max 578ms): p50 and max are all that one run; p95 and p99 are left out below 20 and 100 runs.",
			"Detection over the one run that passed",
			"Convergence over the one run that passed",
			"time to leader of the one run that passed of leader-crash",
			"<summary>the one run</summary>",
		}, []string{"slowest", "30 runs", "2nd", "15th", "p95 578ms", "p95 " + "&lt;", ">p95 "}},
		{5, []string{
			"In every scenario 5 runs passed: p50 is the 3rd fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs.",
			"5 of 5 runs passed. Time to leader over the 5 runs that passed (p50 578ms, max 798ms): p50 is the 3rd fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs.",
			"Detection over the 5 runs that passed (p50 573ms, max 596ms): p50 is the 3rd fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs.",
			"In 3 of these 5 runs the election held no ELECTION: its first election message, where detection ends, was a HALT.",
			"<summary>all 5 runs</summary>",
			// p95 and p99 of 5 runs would be the slowest run again.
			"<td>578ms</td><td>-</td><td>-</td><td>798ms</td>",
		}, []string{"30 runs", "2nd slowest", "15th", "p95 798ms", "p99 798ms", ">p95 "}},
		{30, []string{
			// leader-crash lost run 7.
			"leader-crash, 29 runs passed: p50 is the 15th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs.",
			"latency-sweep delay=50ms, 30 runs passed: p50 is the 15th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs.",
			"29 of 30 runs passed. Time to leader over the 29 runs that passed (p50 577ms, p95 776ms, max 798ms): p50 is the 15th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs.",
			"In 21 of these 29 runs the election held no ELECTION: its first election message, where detection ends, was a HALT.",
			"<summary>all 30 runs</summary>",
			"<td>577ms</td><td>776ms</td><td>-</td><td>798ms</td>",
		}, nil},
	} {
		t.Run(strconv.Itoa(tc.runs), func(t *testing.T) {
			page := renderReport(t, resultstest.SampleFirstRuns(tc.runs))
			for _, want := range tc.want {
				if !strings.Contains(page, want) {
					t.Errorf("report of %d runs lacks %q", tc.runs, want)
				}
			}
			for _, bad := range append(tc.notWant, "with 30 runs p99 is the slowest run") {
				if strings.Contains(page, bad) {
					t.Errorf("report of %d runs says %q", tc.runs, bad)
				}
			}
		})
	}
}

// TestPercentileRanks: which run each nearest-rank percentile is, counted
// from the nearer end, and Percentile agrees.
func TestPercentileRanks(t *testing.T) {
	for n, want := range map[int]string{
		0:    "",
		1:    "p50 and max are all that one run; p95 and p99 are left out below 20 and 100 runs",
		2:    "p50 is the fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs",
		5:    "p50 is the 3rd fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs",
		19:   "p50 is the 10th fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs",
		20:   "p50 is the 10th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs",
		30:   "p50 is the 15th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs",
		100:  "p50 is the 50th fastest run; p95 is the 6th slowest; p99 is the 2nd slowest; max is the slowest",
		1000: "p50 is the 500th fastest run; p95 is the 51st slowest; p99 is the 11th slowest; max is the slowest",
	} {
		if got := results.PercentileRanks(n); got != want {
			t.Errorf("%d runs: %q, want %q", n, got, want)
		}
	}
	// The wording's ranks are Percentile's: with runs 1..n ms, the k-th
	// fastest is k ms and the k-th slowest n-k+1.
	for n := 1; n <= 250; n++ {
		ms := make([]int64, n)
		for i := range ms {
			ms[i] = int64(i + 1)
		}
		text := results.PercentileRanks(n)
		for _, p := range []float64{50, 95, 99} {
			if !results.PercentileShown(fmt.Sprintf("p%g", p), n) {
				if !strings.Contains(text, fmt.Sprintf("p%g", p)) || !strings.Contains(text, "left out") {
					t.Fatalf("%d runs: p%g is not said to be left out: %q", n, p, text)
				}
				continue
			}
			v := int(results.Percentile(ms, p))
			var name string
			switch {
			case n == 1:
				name = "all that one run"
			case v == n:
				name = "the slowest"
			case v == 1:
				name = "the fastest"
			case v <= n-v+1:
				name = fmt.Sprintf("the %d", v)
			default:
				name = fmt.Sprintf("the %d", n-v+1)
			}
			if !regexp.MustCompile(fmt.Sprintf(`p%g[^;]* %s(st|nd|rd|th)?\b`, p, regexp.QuoteMeta(name))).MatchString(text) {
				t.Fatalf("%d runs: p%g is run %d of the sorted, but the wording says %q", n, p, v, text)
			}
		}
	}
}

// TestSummaryTablePercentiles: the summary table is followed by which run
// each percentile is for the runs that passed.
func TestSummaryTablePercentiles(t *testing.T) {
	for n, want := range map[int]string{
		1:  "percentiles are nearest-rank over the one run that passed: p50 and max are all that one run; p95 and p99 are left out below 20 and 100 runs\n",
		5:  "percentiles are nearest-rank over the 5 runs that passed: p50 is the 3rd fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs\n",
		30: "percentiles of leader-crash are nearest-rank over the 29 runs that passed: p50 is the 15th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs\n",
	} {
		var out bytes.Buffer
		if err := results.WriteSummary(&out, resultstest.SampleFirstRuns(n)); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary of %d runs lacks %q:\n%s", n, want, out.String())
		}
		if n == 30 && !strings.Contains(out.String(), "leader-crash: 1 of 30 runs failed on liveness (run 7): step 2") {
			t.Errorf("summary of 30 runs does not name the failed run:\n%s", out.String())
		}
	}
}

// TestReportUncheckedRun: a run that stopped before its checks (setup
// failed) is not said to match its counters, to have no split brain or to
// have sent no message.
func TestReportUncheckedRun(t *testing.T) {
	r := resultstest.SampleFirstRuns(1)
	sc := &r.Scenarios[0]
	sc.Runs = append(sc.Runs, results.Run{Index: 2, Seed: 2, FailureKind: results.FailSetup, Failure: "starting the lab: no netns",
		Messages: map[string]int{}, Capture: "run-leader-crash-2.pcapng"})
	r.Summarize()
	page := renderReport(t, r)
	i := strings.Index(page, "starting the lab: no netns")
	if i < 0 {
		t.Fatal("the failed run is missing")
	}
	i = strings.LastIndex(page, "starting the lab: no netns")
	row := page[i:]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<a href="run-leader-crash-2.pcapng">`) {
		t.Errorf("the run's capture is not linked: %s", row)
	}
	row = regexp.MustCompile(`</?a[^>]*>`).ReplaceAllString(row, "")
	if got := regexp.MustCompile(`<td[^>]*>([^<]*)</td>`).FindAllStringSubmatch(row, -1); len(got) < 7 {
		t.Fatalf("row %q", row)
	} else {
		var cells []string
		for _, c := range got {
			cells = append(cells, c[1])
		}
		// time to leader, detection, messages, leader, counters, split
		// brain, faults on the wire, capture
		want := []string{"-", "-", "-", "", "-", "-", "-", "run-leader-crash-2.pcapng"}
		if len(cells) < len(want) || !slices.Equal(cells[len(cells)-len(want):], want) {
			t.Errorf("cells %q, want them to end %q", cells, want)
		}
	}
	if !strings.Contains(page, "1 of 2 runs passed") || !strings.Contains(page, "<span class=\"bad\">setup</span>: 1 run (2), starting the lab") {
		t.Error("the failure is not listed")
	}
}

// TestReportSequenceNote: the note over the diagram says what it shows:
// where arrows start and end, those level and dashed for want of a send or
// receipt time, the gaps drawn shorter and the origin.
func TestReportSequenceNote(t *testing.T) {
	seq := sampleSequence()
	page := renderReport(t, resultstest.SampleFirstRuns(5), seq)
	for _, want := range []string{
		"Time runs down; the times on the left are from the fault crash n8 (SIGKILL).",
		"An arrow starts when the sender's kernel sent the message (its TCP timestamp) and ends when the frame reached the receiver's port",
		"Messages whose receipt is unknown (6) are drawn level and dashed at their send.",
		"Grey bands mark 2 long gaps drawn shorter than they were (505ms, 198ms): time runs to scale only between them.",
	} {
		if !strings.Contains(page, html.EscapeString(want)) {
			t.Errorf("report lacks %q", want)
		}
	}
	// As a bench draws a capture whose TCP timestamps it cannot read: no
	// send time, no receipt, no fault, no gap.
	bare := report.Sequence{Title: "x", Nodes: []string{"n1", "n2"}}
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	bare.Messages = []report.SequenceMessage{{Time: t0, SendUnknown: true, From: "n2", To: "n1", Type: "COORDINATOR", Epoch: 2}}
	note := report.SequenceNote(bare)
	if want := "Time runs down; the times on the left are from the first event shown. The capture holds no send times (the senders' TCP timestamps could not be read): every arrow is drawn level and dashed when the capture saw the frame enter the switch, after any delay the sender's egress added, so no arrow shows that delay."; note != want {
		t.Errorf("note %q, want %q", note, want)
	}
}

// TestReportLaterChanges: a run whose leader changed again after settling
// is counted in the summary table, in red, and named in its run's row;
// results without the count have no such column.
func TestReportLaterChanges(t *testing.T) {
	if page := renderReport(t, resultstest.SampleFirstRuns(3)); strings.Contains(page, "<th>later leader changes</th>") {
		t.Error("results without later changes get their column")
	}
	r := resultstest.SampleFirstRuns(3)
	zero, one := 0, 1
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		for j := range sc.Runs {
			sc.Runs[j].LaterLeaderChanges = &zero
		}
		if i == 0 {
			sc.Runs[1].LaterLeaderChanges = &one
		}
		sc.Summary = results.Summarize(sc.Runs)
	}
	page := renderReport(t, r)
	for _, want := range []string{"<th>later leader changes</th>", `<span class="bad" title="runs 2">1/3</span>`, "<td>0/3</td>",
		`<span class="bad">then 1 later leader change</span>`, "<dt>later leader changes</dt>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestReportLeaderOverlaps: a run's leaders apart across a cut and its dual
// leaders are counted apart, only dual leaders in red, and both defined.
func TestReportLeaderOverlaps(t *testing.T) {
	r := resultstest.SampleFirstRuns(3)
	sc := &r.Scenarios[0]
	sc.Runs[0].Checks.LeaderOverlaps = []results.LeaderOverlap{{Leaders: []string{"n3", "n5"}}, {Leaders: []string{"n3", "n5"}}}
	sc.Runs[1].Checks.LeaderOverlaps = []results.LeaderOverlap{{Leaders: []string{"n3", "n5"}}, {Leaders: []string{"n4", "n5"}, Dual: true}}
	page := renderReport(t, r)
	for _, want := range []string{"<td class=\"l\">apart 2 (expected)</td>", `<span class="bad">dual leaders 1, apart 1</span>`,
		"<b>Leaders apart</b>", "<b>Dual leaders</b>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "split brain") {
		t.Error("the page still says split brain")
	}
}
