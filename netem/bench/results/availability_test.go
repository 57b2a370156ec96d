package results_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// withAvailability is Sample(1) whose runs measured their availability:
// run i was unavailable for base plus i ms and saw changes leader changes,
// every run converged but the last, which flapped.
func withAvailability(base time.Duration, changes int) *results.Results {
	r := resultstest.Sample(1)
	for k := range r.Scenarios {
		runs := r.Scenarios[k].Runs
		for i := range runs {
			un := int64(base + time.Duration(i)*time.Millisecond)
			c := changes
			conv := un
			a := &results.Availability{DisruptionNS: 0, Verdict: results.VerdictConverged, ConvergedNS: &conv,
				LeaderChangesPerS: 0.5, Leaders: []string{"n15"}, DualLeaderNS: 0,
				LeaderlessNS: map[string]int64{"n1": un, "n15": 0}}
			if i == len(runs)-1 {
				a.Verdict, a.ConvergedNS = results.VerdictFlapping, nil
			}
			runs[i].UnavailableNS, runs[i].LeaderChanges, runs[i].Availability = &un, &c, a
		}
	}
	r.Summarize()
	return r
}

func TestAvailabilityRoundTrip(t *testing.T) {
	r := withAvailability(600*time.Millisecond, 1)
	path := writeResults(t, r, "results.json")
	back, err := results.ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	got, want := back.Scenarios[0].Runs[2], r.Scenarios[0].Runs[2]
	if got.UnavailableNS == nil || *got.UnavailableNS != *want.UnavailableNS || got.LeaderChanges == nil || *got.LeaderChanges != 1 {
		t.Fatalf("unavailable %v, leader changes %v after a round trip", got.UnavailableNS, got.LeaderChanges)
	}
	a := got.Availability
	if a == nil || a.Verdict != results.VerdictConverged || a.ConvergedNS == nil || *a.ConvergedNS != *want.UnavailableNS ||
		a.LeaderlessNS["n1"] != *want.UnavailableNS || len(a.Leaders) != 1 || a.LeaderChangesPerS != 0.5 {
		t.Fatalf("availability %+v after a round trip, want %+v", a, want.Availability)
	}
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"unavailable_ns"`, `"leader_changes"`, `"availability"`, `"verdict": "converged"`,
		`"converged_ns"`, `"leader_changes_per_s"`, `"leaders"`, `"dual_leader_ns"`, `"leaderless_ns"`, `"verdicts"`} {
		if !strings.Contains(buf.String(), field) {
			t.Errorf("results.json lacks %s", field)
		}
	}
	back.Summarize()
	s := back.Scenarios[0].Summary.Availability
	// Run 7 failed: 29 passed runs, 600..629ms less run 7's 606ms.
	if s == nil || s.Unavailable.N != 29 || s.Unavailable.MaxNS != int64(629*time.Millisecond) || s.LeaderChanges.Max != 1 {
		t.Fatalf("summary %+v", s)
	}
	if s.Verdicts[results.VerdictConverged] != 29 || s.Verdicts[results.VerdictFlapping] != 1 {
		t.Errorf("verdicts %v, want 29 converged and 1 flapping (of every run, the failed one too)", s.Verdicts)
	}
}

// A results.json from before availability was measured has none: its
// summary has none, and it is not gated.
func TestAvailabilityUnknown(t *testing.T) {
	old := resultstest.Sample(1)
	if old.Scenarios[0].Summary.Availability != nil {
		t.Fatal("a bench without availability summarised one")
	}
	var buf bytes.Buffer
	if err := old.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "unavailable") {
		t.Error("a run that measured no availability wrote one")
	}
	nw := withAvailability(10*time.Second, 9)
	c, err := results.Compare("old.json", old, "new.json", nw, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if c.Verdict() != results.Pass {
		t.Errorf("verdict %v against a bench without availability: %v", c.Verdict(), c.Regressions())
	}
	if ch := change(t, c, "leader-crash", "unavailable p50"); ch.Status != results.Unavailable {
		t.Errorf("unavailable p50 against none: %v, want n/a", ch.Status)
	}
	c, err = results.Compare("old.json", old, "old.json", old, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range c.Changes {
		if strings.HasPrefix(ch.Metric, "unavailable") || strings.HasPrefix(ch.Metric, "leader changes") {
			t.Errorf("compared %s between two benches without availability", ch.Metric)
		}
	}
}

// More unavailability, or more leader changes, fails the gate as a slower
// time to leader does; the same passes.
func TestCompareAvailabilityGate(t *testing.T) {
	base := withAvailability(600*time.Millisecond, 1)
	for _, tc := range []struct {
		name    string
		nw      *results.Results
		metrics []string // regressed
	}{
		{"same", withAvailability(600*time.Millisecond, 1), nil},
		{"unavailable longer", withAvailability(900*time.Millisecond, 1), []string{"unavailable p50", "unavailable max"}},
		{"more leader changes", withAvailability(600*time.Millisecond, 3), []string{"leader changes mean"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := results.Compare("base.json", base, "new.json", tc.nw, results.CompareOptions{MaxRegress: 0.1})
			if err != nil {
				t.Fatal(err)
			}
			var regressed []string
			for _, ch := range c.Regressions() {
				if ch.Scenario == "leader-crash" {
					regressed = append(regressed, ch.Metric)
				}
			}
			for _, m := range tc.metrics {
				if !strings.Contains(strings.Join(regressed, ","), m) {
					t.Errorf("%s did not regress; regressions: %v", m, regressed)
				}
			}
			if len(tc.metrics) == 0 && c.Verdict() != results.Pass {
				t.Errorf("verdict %v for the same availability: %v", c.Verdict(), regressed)
			}
			if len(tc.metrics) > 0 && c.Verdict() != results.Regressed {
				t.Errorf("verdict %v, want regressed", c.Verdict())
			}
			if len(tc.metrics) > 0 {
				var table bytes.Buffer
				if err := results.WriteComparison(&table, c); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(table.String(), tc.metrics[0]) {
					t.Errorf("the comparison table lacks %s:\n%s", tc.metrics[0], table.String())
				}
			}
		})
	}
}

// The summary says each scenario's verdicts and unavailability.
func TestSummaryAvailabilityLine(t *testing.T) {
	var buf bytes.Buffer
	if err := results.WriteSummary(&buf, withAvailability(600*time.Millisecond, 1), results.SummaryOptions{Width: -1}); err != nil {
		t.Fatal(err)
	}
	want := "leader-crash: verdict converged 29, flapping 1; unavailable p50 615ms, max 629ms; leader changes mean 1.0, max 1"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, buf.String())
	}
}
