package report_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// threeSizes are benches of star5, star16 and star64, both algorithms
// each, whose leader crashes cost the closed forms' messages.
func threeSizes() []report.Bench {
	var benches []report.Bench
	for _, top := range []struct {
		name string
		n    int
	}{{"star5", 5}, {"star16", 16}, {"star64", 64}} {
		benches = append(benches, report.Bench{Source: filepath.Join(top.name, "results.json"), Results: resultstest.AlgorithmsSampleOf(top.name, top.n)})
	}
	return benches
}

// A report of three benches draws the six points, one per topology and
// algorithm, over both closed forms, lists them beside the closed form,
// and sets each bench's algorithms side by side.
func TestWriteBenches(t *testing.T) {
	var buf bytes.Buffer
	if err := report.WriteBenches(&buf, threeSizes()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	start, end := strings.Index(page, `<svg class="messages"`), strings.Index(page, "</svg>")
	if start < 0 || end < start {
		t.Fatalf("no messages chart:\n%s", page)
	}
	els := parseSVG(t, page[start:end+len("</svg>")])
	if got := countEls(els, "circle", "measured"); got != 6 {
		t.Errorf("%d measured points, want 6", got)
	}
	if got := countEls(els, "line", "closed-form"); got != 2 {
		t.Errorf("%d closed-form lines, want 2", got)
	}
	for _, want := range []string{
		"<title>bullylab benches: star5, star16, star64</title>",
		"ring: 2(N-1)", "bully: 3N-6",
		"ring on 64 nodes: 126.0 messages per election, the mean of the 3 runs that passed; closed form 126",
		"bully on 64 nodes: 186.0 messages per election, the mean of the 3 runs that passed; closed form 186",
		"bully on 16 nodes: 42.0 messages per election",
		"ring on 5 nodes: 8.0 messages per election",
		"<td>16</td><td class=\"l\">star16</td><td class=\"l\">ring</td><td>3</td><td>30.0</td><td>30</td>",
		"<h2 id=\"sc-star64-results.json\">star64: 64 nodes</h2>",
		"From <b>star5/results.json</b>",
		">RING_ELECTION<", ">ELECTED<", ">HALT_ACK<", ">COORDINATOR<",
		"<dt>detection</dt>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// A table per bench, a row per algorithm: the ring's failed run shows.
	if n := strings.Count(page, `<td class="l">leader-crash</td><td class="l">ring</td><td>4</td><td><span class="bad">1</span></td>`); n != 3 {
		t.Errorf("%d ring rows with their failed run, want one per bench", n)
	}
	if n := strings.Count(page, `<td class="l">leader-crash</td><td class="l">bully</td><td>3</td><td>0</td>`); n != 3 {
		t.Errorf("%d bully rows, want one per bench", n)
	}
	if strings.Contains(page, "<svg class=\"dist\"") || strings.Contains(page, "Message sequence") {
		t.Error("the report of several benches draws a bench's own plots")
	}
	if strings.Contains(page, "No leader-crash run passed") {
		t.Error("the page misses points it has")
	}

	// A bench none of whose leader crashes passed has no point, and the
	// page says so.
	benches := threeSizes()
	for i := range benches[1].Results.Scenarios {
		for j := range benches[1].Results.Scenarios[i].Runs {
			benches[1].Results.Scenarios[i].Runs[j].OK = false
		}
	}
	benches[1].Results.Summarize()
	buf.Reset()
	if err := report.WriteBenches(&buf, benches); err != nil {
		t.Fatal(err)
	}
	page = buf.String()
	if n := strings.Count(page, `<circle class="measured"`); n != 4 {
		t.Errorf("%d measured points without star16's, want 4", n)
	}
	if !strings.Contains(page, "No leader-crash run passed in star16/results.json: no point of it.") {
		t.Error("the page does not say which bench has no point")
	}
}
