package results_test

import (
	"io"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// summaryOnTerminal writes the summary of r to a terminal of cols columns
// and returns what the terminal got. The writer closes the terminal's
// slave when done, which ends the master's reads once it has read all.
func summaryOnTerminal(t *testing.T, r *results.Results, cols uint16) string {
	t.Helper()
	ptmx, pts := resultstest.OpenPTY(t, cols)
	done := make(chan error, 1)
	go func() {
		err := results.WriteSummary(pts, r)
		pts.Close()
		done <- err
	}()
	got, _ := io.ReadAll(ptmx) // ends in EIO, the slave closed
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(got), "\r\n", "\n")
}

// TestSummaryDetectsTerminal: on a terminal the summary takes its width,
// or $COLUMNS when set.
func TestSummaryDetectsTerminal(t *testing.T) {
	r := resultstest.Sample(1)
	t.Setenv("COLUMNS", "")
	if out := summaryOnTerminal(t, r, 80); strings.Contains(out, "┌") || !strings.Contains(out, "passed") {
		t.Errorf("an 80-column terminal got no compact summary:\n%s", out)
	}
	if out := summaryOnTerminal(t, r, 200); !strings.Contains(out, "┌") {
		t.Errorf("a 200-column terminal got no full summary:\n%s", out)
	}
	t.Setenv("COLUMNS", "200")
	if out := summaryOnTerminal(t, r, 80); !strings.Contains(out, "┌") {
		t.Errorf("an 80-column terminal with COLUMNS=200 got no full summary:\n%s", out)
	}
}
