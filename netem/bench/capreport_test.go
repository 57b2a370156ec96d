//go:build linux

package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
)

// TestAnalyzeCaptureReport: a capture's report draws each of its
// elections from its trigger, the crash that triggered it among the
// faults, and says what the capture lets be checked.
func TestAnalyzeCaptureReport(t *testing.T) {
	data, _, _, _ := haltFirstCapture(t)
	path := filepath.Join(t.TempDir(), "halt-first.pcapng")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cr, err := AnalyzeCaptureReport(path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cr.Report.Elections); n == 0 || len(cr.Diagrams) != n {
		t.Fatalf("%d elections, %d diagrams", n, len(cr.Diagrams))
	}
	for i, d := range cr.Diagrams {
		if d == nil || len(d.Messages) == 0 {
			t.Fatalf("election %d has no diagram: %+v", i+1, d)
		}
	}
	seq := cr.Diagrams[len(cr.Diagrams)-1]
	if len(seq.Faults) != 1 || seq.Faults[0].Kind != "crash" || !seq.Origin.Equal(seq.Faults[0].Time) {
		t.Errorf("the diagram's faults %+v, origin %v: want the crash, at the origin", seq.Faults, seq.Origin)
	}
	if want := "election 1, triggered by crash n4: leader n3 (epoch 2) after "; !strings.HasPrefix(seq.Title, want) {
		t.Errorf("title %q, want it to start %q", seq.Title, want)
	}
	var b strings.Builder
	if err := report.WriteCaptures(&b, []*report.CaptureReport{cr}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"<h1>bullylab capture: star4 run bl0001</h1>",
		"Message sequence: election 1, triggered by crash n4: leader n3 (epoch 2)",
		"crash n4", "no authenticated frame",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if got, want := strings.Count(page, `<svg`), len(cr.Report.Elections); got != want {
		t.Errorf("%d diagrams on the page, want one per election, %d", got, want)
	}
}
