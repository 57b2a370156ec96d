package results_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// TestCountLaterLeaderChanges: a tenure begun after the run settled and
// before the next fault is a later change; the settled leader's own lead,
// a lead resumed after a pause and a lead a later fault brought are not.
func TestCountLaterLeaderChanges(t *testing.T) {
	ms := int64(1e6)
	ts := []results.TenureRecord{
		{Node: "n5", Epoch: 1, StartNS: -900 * ms},
		{Node: "n3", Epoch: 3, StartNS: 500 * ms},  // the measured election's
		{Node: "n3", Epoch: 3, StartNS: 800 * ms},  // resumed after a pause
		{Node: "n4", Epoch: 4, StartNS: 1035 * ms}, // took over: later
		{Node: "n5", Epoch: 5, StartNS: 3000 * ms}, // after the heal at 2 s
	}
	if got := results.CountLaterLeaderChanges(ts, 520*ms, 2000*ms); got != 1 {
		t.Errorf("%d later changes, want 1 (n4 at epoch 4)", got)
	}
	if got := results.CountLaterLeaderChanges(ts, 520*ms, results.NoLaterFault); got != 2 {
		t.Errorf("without a later fault: %d later changes, want 2", got)
	}
	if got := results.CountLaterLeaderChanges(ts[:3], 520*ms, results.NoLaterFault); got != 0 {
		t.Errorf("a settled run: %d later changes", got)
	}
}

// TestSummaryLaterChanges: the summary counts the runs whose leader
// changed again, in a column and in a line that names them; results
// without the count show neither.
func TestSummaryLaterChanges(t *testing.T) {
	r := resultstest.SampleFirstRuns(3)
	var out bytes.Buffer
	if err := results.WriteSummary(&out, r, results.SummaryOptions{Width: -1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "later leader") {
		t.Errorf("results without later changes show them:\n%s", out.String())
	}
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
	for _, width := range []int{-1, 80} {
		out.Reset()
		if err := results.WriteSummary(&out, r, results.SummaryOptions{Width: width}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"1/3 !", "0/3", "the leader changed again after settling in 1 of 3 runs (run 2; at most 1 change)", "later leader changes: runs whose"} {
			if !strings.Contains(strings.ReplaceAll(out.String(), "\n", " "), want) {
				t.Errorf("width %d: summary lacks %q:\n%s", width, want, out.String())
			}
		}
	}
}
