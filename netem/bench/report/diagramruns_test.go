package report

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
)

func TestParseDiagramRuns(t *testing.T) {
	for in, want := range map[string]DiagramRuns{
		"median,slowest":    {Median: true, Slowest: true},
		" all ":             {All: true},
		"12, 3,median,3":    {Median: true, Runs: []int{3, 12}},
		"Slowest,1":         {Slowest: true, Runs: []int{1}},
		"median , SLOWEST":  {Median: true, Slowest: true},
		"007,all,slowest,2": {Slowest: true, All: true, Runs: []int{2, 7}},
		"fastest":           {Fastest: true},
		"FASTEST,median,4":  {Fastest: true, Median: true, Runs: []int{4}},
	} {
		got, err := ParseDiagramRuns(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, word := range map[string]string{
		"":                     `empty`,
		"median,quickest":      `"quickest"`,
		"0":                    `"0"`,
		"-1":                   `"-1"`,
		"+3":                   `"+3"`,
		"3,,4":                 `""`,
		"1e3":                  `"1e3"`,
		"median;slowest":       `"median;slowest"`,
		"99999999999999999999": `"99999999999999999999"`,
		"x\ny":                 `"x\ny"`,
	} {
		_, err := ParseDiagramRuns(in)
		if err == nil {
			t.Errorf("%q: no error", in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, word) || strings.ContainsAny(msg, "\r\n") {
			t.Errorf("%q: error %q does not name %s in one line", in, msg, word)
		}
	}
	dr, _ := ParseDiagramRuns("4,31")
	if err := dr.CheckRuns(30); err == nil || err.Error() != "run 31, but each scenario runs 30 times" {
		t.Errorf("run beyond the runs: %v", err)
	}
	if err := dr.CheckRuns(31); err != nil {
		t.Errorf("run 31 of 31: %v", err)
	}
}

// FuzzParseDiagramRuns: any input parses, and then reads back the same
// from its String, or fails in one line.
func FuzzParseDiagramRuns(f *testing.F) {
	for _, s := range []string{"median,slowest", "fastest,median", "all", "1,2,3", "median, 7", "", ",", "0", "+1", "x\ny", "MEDIAN", "18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dr, err := ParseDiagramRuns(s)
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || len(msg) > 512 {
				t.Fatalf("%q: error %q", s, msg)
			}
			return
		}
		if dr.IsZero() {
			t.Fatalf("%q parsed to nothing", s)
		}
		back, err := ParseDiagramRuns(dr.String())
		if err != nil || !reflect.DeepEqual(back, dr) {
			t.Fatalf("%q: %+v reads back from %q as %+v, %v", s, dr, dr.String(), back, err)
		}
	})
}

// diagramScenario is five runs, 30, 10, 50, 20 and 40 ms to leader, and a
// sixth that failed, each with an election to draw.
func diagramScenario() (*results.ScenarioResult, []*Sequence) {
	sr := &results.ScenarioResult{Name: "leader-crash"}
	var elections []*Sequence
	for i, ms := range []int64{30, 10, 50, 20, 40, 0} {
		r := results.Run{Index: i + 1, Seed: int64(i + 1), OK: ms > 0, Leader: "n4", TimeToLeaderNS: ms * 1e6,
			Capture: fmt.Sprintf("run-leader-crash-%d.pcapng", i+1)}
		if !r.OK {
			r.FailureKind = results.FailLiveness
		}
		sr.Runs = append(sr.Runs, r)
		seq := election5(0, "crash")
		elections = append(elections, &seq)
	}
	return sr, elections
}

// TestDiagramsPick: the default draws the median and the slowest run, one
// diagram when they are one run; fastest draws the quickest run that
// passed; numbers and all draw those runs, failed ones too; each diagram is titled with its run, its role and its time to
// leader, and carries its run's capture.
func TestDiagramsPick(t *testing.T) {
	sr, elections := diagramScenario()
	for in, want := range map[string][]string{
		"":                {"leader-crash, run 1 (seed 1), the median run: leader n4 after 30.0ms", "leader-crash, run 3 (seed 3), the slowest run: leader n4 after 50.0ms"},
		"median":          {"leader-crash, run 1 (seed 1), the median run: leader n4 after 30.0ms"},
		"fastest":         {"leader-crash, run 2 (seed 2), the fastest run: leader n4 after 10.0ms"},
		"fastest,slowest": {"leader-crash, run 2 (seed 2), the fastest run: leader n4 after 10.0ms", "leader-crash, run 3 (seed 3), the slowest run: leader n4 after 50.0ms"},
		"6,2":             {"leader-crash, run 2 (seed 2), the fastest run: leader n4 after 10.0ms", "leader-crash, run 6 (seed 6): failed (liveness)"},
		"slowest,3,9":     {"leader-crash, run 3 (seed 3), the slowest run: leader n4 after 50.0ms"},
		"all":             nil,
		"median,slowest":  nil,
	} {
		var dr DiagramRuns
		if in != "" {
			var err error
			if dr, err = ParseDiagramRuns(in); err != nil {
				t.Fatal(err)
			}
		}
		seqs := dr.Sequences(sr, elections)
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
	// One run the fastest, the median and the slowest: one diagram.
	one := &results.ScenarioResult{Name: "x", Runs: []results.Run{{Index: 1, OK: true, Leader: "n4", TimeToLeaderNS: 7e6}}}
	seqs := DiagramRuns{}.Sequences(one, elections[:1])
	if len(seqs) != 1 || seqs[0].Title != "x, run 1 (seed 0), the fastest, the median and the slowest run: leader n4 after 7.00ms" {
		t.Errorf("one run: %d diagrams %+v", len(seqs), seqs)
	}
	dr, _ := ParseDiagramRuns("fastest,median,slowest")
	seqs = dr.Sequences(one, elections[:1])
	if len(seqs) != 1 || seqs[0].Title != "x, run 1 (seed 0), the fastest, the median and the slowest run: leader n4 after 7.00ms" {
		t.Errorf("one run: %d diagrams %+v", len(seqs), seqs)
	}
}

// TestReportLinksDiagramCaptures: report.html links the capture of each
// run it draws, beside its diagram and in the table of runs.
func TestReportLinksDiagramCaptures(t *testing.T) {
	sr, elections := diagramScenario()
	dr, _ := ParseDiagramRuns("median,slowest,6")
	seqs := dr.Sequences(sr, elections)
	r := &results.Results{Schema: results.Schema, Scenarios: []results.ScenarioResult{*sr}, Settings: results.RunSettings{Runs: 6}}
	r.Summarize()
	var buf bytes.Buffer
	if err := Write(&buf, r, seqs...); err != nil {
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
