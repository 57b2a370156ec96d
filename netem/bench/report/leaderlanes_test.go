package report_test

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// sampleLanes is a partition of n4,n5 from n1..n3 at 0 healed at 30s: n3
// leads its side from 2s, n1 follows n5 unreachable until then, and n5
// takes everyone back after the heal.
func sampleLanes() report.LeaderLanes {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	return report.LeaderLanes{
		Nodes: []string{"n1", "n3", "n5"}, Origin: at(30), From: at(0), To: at(40),
		Marks: []report.LaneMark{{Time: at(0), Text: "disruption"}, {Time: at(30), Text: "heal"}},
		Spans: []report.LeaderSpan{
			{Node: "n1", Leader: "n5", Epoch: 1, Start: at(0), End: at(1), Unreachable: true},
			{Node: "n1", Leader: "n3", Epoch: 2, Start: at(2.01), End: at(31.01)},
			{Node: "n1", Leader: "n5", Epoch: 3, Start: at(31.01), End: at(40)},
			{Node: "n3", Leader: "n3", Epoch: 2, Start: at(2), End: at(31.01)},
			{Node: "n3", Leader: "n5", Epoch: 3, Start: at(31.01), End: at(40)},
			{Node: "n5", Leader: "n5", Epoch: 1, Start: at(0), End: at(31)},
			{Node: "n5", Leader: "n5", Epoch: 3, Start: at(31), End: at(40)},
		},
	}
}

func TestLeaderLanesSVG(t *testing.T) {
	svg := report.LeaderLanesSVG(sampleLanes())
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	if n := strings.Count(svg, `class="lane-span"`); n != 7 {
		t.Errorf("%d spans drawn, want 7", n)
	}
	// Hatched where a node leads: n3's epoch 2, n5's two.
	if n := strings.Count(svg, `class="lane-lead"`); n != 3 {
		t.Errorf("%d leads hatched, want 3", n)
	}
	if n := strings.Count(svg, `fill-opacity="0.35"`); n != 1 {
		t.Errorf("%d spans faded, want n1's unreachable n5", n)
	}
	// One colour per leader, the same wherever it is followed.
	colorOf := func(leader string) map[string]bool {
		cs := map[string]bool{}
		for _, part := range strings.Split(svg, `<rect class="lane-span"`)[1:] {
			if strings.Contains(part, `data-leader="`+leader+`"`) {
				i := strings.Index(part, `fill="`) + len(`fill="`)
				cs[part[i:i+7]] = true
			}
		}
		return cs
	}
	c3, c5 := colorOf("n3"), colorOf("n5")
	if len(c3) != 1 || len(c5) != 1 {
		t.Fatalf("leaders' colours n3 %v, n5 %v: want one each", c3, c5)
	}
	for c := range c3 {
		if c5[c] {
			t.Errorf("n3 and n5 share colour %s", c)
		}
	}
	for _, want := range []string{">n1<", ">n5<", ">heal<", ">disruption<", ">follows n3<", ">follows n5<", ">-30s<", ">0s<",
		"n1 follows n5 (epoch 1) from -30.0s to -29.0s, unreachable", "n3 leads epoch 2 from -28.0s to 1.01s", `url(#lead-hatch)`} {
		if !strings.Contains(svg, want) {
			t.Errorf("lanes lack %q", want)
		}
	}
}

// The report draws a run's lanes under its diagram, and its caption says
// its availability.
func TestReportLeaderLanes(t *testing.T) {
	r := resultstest.Sample(1)
	sc := &r.Scenarios[0]
	run := sc.Runs[11]
	un, changes, conv := int64(31010*time.Millisecond), 2, int64(2010*time.Millisecond)
	run.UnavailableNS, run.LeaderChanges = &un, &changes
	run.Availability = &results.Availability{Verdict: results.VerdictConverged, ConvergedNS: &conv}
	seq := sampleSequence()
	seq.Title = report.SequenceTitle(sc, run, "median")
	lanes := sampleLanes()
	seq.Lanes = &lanes
	var buf bytes.Buffer
	if err := report.Write(&buf, r, seq, sampleSequence()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if want := "leader n15 after " + results.FormatNS(run.TimeToLeaderNS) + "; converged after 2.01s, unavailable 31.0s, 2 leader changes"; !strings.Contains(page, want) {
		t.Errorf("caption lacks %q", want)
	}
	if n := strings.Count(page, `<svg class="lanes"`); n != 1 {
		t.Errorf("%d lanes drawn, want 1: the diagram without lanes has none", n)
	}
	if i, j := strings.Index(page, `<svg class="seq"`), strings.Index(page, `<svg class="lanes"`); i < 0 || j < i {
		t.Error("the lanes are not under the diagram")
	}
	run.Availability, run.UnavailableNS, run.LeaderChanges = nil, nil, nil
	if title := report.SequenceTitle(sc, run); strings.Contains(title, "unavailable") {
		t.Errorf("a run without availability is captioned %q", title)
	}
}
