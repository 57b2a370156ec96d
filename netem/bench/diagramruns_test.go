//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
)

// diagramScenario is five runs, 30, 10, 50, 20 and 40 ms to leader, and a
// sixth that failed, each with an election to draw.
func diagramScenario() (*results.ScenarioResult, []*runDetail) {
	sr := &results.ScenarioResult{Name: "leader-crash"}
	var details []*runDetail
	for i, ms := range []int64{30, 10, 50, 20, 40, 0} {
		r := results.Run{Index: i + 1, Seed: int64(i + 1), OK: ms > 0, Leader: "n4", TimeToLeaderNS: ms * 1e6,
			Capture: fmt.Sprintf("run-leader-crash-%d.pcapng", i+1)}
		if !r.OK {
			r.FailureKind = results.FailLiveness
		}
		sr.Runs = append(sr.Runs, r)
		seq := election5(0, "crash")
		details = append(details, &runDetail{seq: &seq})
	}
	return sr, details
}

// TestDiagramsPick: the default draws the median and the slowest run, one
// diagram when they are one run; numbers and all draw those runs, failed
// ones too; each diagram is titled with its run, its role and its time to
// leader, and carries its run's capture.
func TestDiagramsPick(t *testing.T) {
	sr, details := diagramScenario()
	for in, want := range map[string][]string{
		"":               {"leader-crash, run 1 (seed 1), the median run: leader n4 after 30.0ms", "leader-crash, run 3 (seed 3), the slowest run: leader n4 after 50.0ms"},
		"median":         {"leader-crash, run 1 (seed 1), the median run: leader n4 after 30.0ms"},
		"6,2":            {"leader-crash, run 2 (seed 2): leader n4 after 10.0ms", "leader-crash, run 6 (seed 6): failed (liveness)"},
		"slowest,3,9":    {"leader-crash, run 3 (seed 3), the slowest run: leader n4 after 50.0ms"},
		"all":            nil,
		"median,slowest": nil,
	} {
		var dr report.DiagramRuns
		if in != "" {
			var err error
			if dr, err = report.ParseDiagramRuns(in); err != nil {
				t.Fatal(err)
			}
		}
		seqs := diagrams(sr, details, dr)
		var got []string
		for _, s := range seqs {
			got = append(got, s.Title)
		}
		switch in {
		case "all":
			if len(seqs) != 6 {
				t.Errorf("all: %d diagrams, want 6", len(seqs))
			}
		case "median,slowest":
			if len(seqs) != 2 {
				t.Errorf("median,slowest: %q", got)
			}
		default:
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q: %q, want %q", in, got, want)
			}
		}
		for _, s := range seqs {
			if !strings.HasPrefix(s.Capture, "run-leader-crash-") {
				t.Errorf("%q: %s has capture %q", in, s.Title, s.Capture)
			}
		}
	}
	// One run both median and slowest: one diagram.
	one := &results.ScenarioResult{Name: "x", Runs: []results.Run{{Index: 1, OK: true, Leader: "n4", TimeToLeaderNS: 7e6}}}
	seqs := diagrams(one, details[:1], report.DiagramRuns{})
	if len(seqs) != 1 || seqs[0].Title != "x, run 1 (seed 0), the median and the slowest run: leader n4 after 7.00ms" {
		t.Errorf("one run: %d diagrams %+v", len(seqs), seqs)
	}
}

// TestReportLinksDiagramCaptures: report.html links the capture of each
// run it draws, beside its diagram and in the table of runs.
func TestReportLinksDiagramCaptures(t *testing.T) {
	sr, details := diagramScenario()
	dr, _ := report.ParseDiagramRuns("median,slowest,6")
	seqs := diagrams(sr, details, dr)
	r := &results.Results{Schema: results.Schema, Scenarios: []results.ScenarioResult{*sr}, Settings: results.RunSettings{Runs: 6}}
	r.Summarize()
	var buf bytes.Buffer
	if err := report.Write(&buf, r, seqs...); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, run := range []int{1, 3, 6} {
		capture := fmt.Sprintf("run-leader-crash-%d.pcapng", run)
		title := fmt.Sprintf("<h2>Message sequence: leader-crash, run %d (seed %d)", run, run)
		i := strings.Index(page, title)
		if i < 0 {
			t.Errorf("no diagram of run %d", run)
			continue
		}
		section := page[i:]
		section = section[:strings.Index(section, "</svg>")]
		if !strings.Contains(section, fmt.Sprintf(`<a href="%s">%s</a>`, capture, capture)) {
			t.Errorf("the diagram of run %d does not link %s", run, capture)
		}
	}
	for run := 1; run <= 6; run++ {
		if n := strings.Count(page, fmt.Sprintf(`<a href="run-leader-crash-%d.pcapng">`, run)); n < 1 {
			t.Errorf("run %d's capture is not linked", run)
		}
	}
	if n := strings.Count(page, `<svg class="seq"`); n != 3 {
		t.Errorf("%d diagrams, want 3", n)
	}
}
