package report

import (
	"fmt"
	"strings"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// faultCell sums up a run's fault checks for the report's runs table.
type faultCell struct {
	Text string
	Bad  bool
}

func faultsOf(r results.Run) faultCell {
	if len(r.FaultChecks) == 0 {
		return faultCell{Text: "-"}
	}
	var ok, unverified int
	var bad []string
	for _, c := range r.FaultChecks {
		switch {
		case !c.OK:
			bad = append(bad, c.Kind+" "+c.Check)
		case !c.Verified:
			unverified++
		default:
			ok++
		}
	}
	if len(bad) > 0 {
		return faultCell{Text: "failed: " + strings.Join(bad, ", "), Bad: true}
	}
	s := fmt.Sprintf("%d ok", ok)
	if unverified > 0 {
		s += fmt.Sprintf(", %d unverified", unverified)
	}
	return faultCell{Text: s}
}

// faultRun picks the run whose fault checks the report lists.
func faultRun(sc *results.ScenarioResult) *results.Run {
	for i := range sc.Runs {
		if results.FaultFailure(sc.Runs[i].FaultChecks) != "" {
			return &sc.Runs[i]
		}
	}
	if r, ok := MedianRun(sc); ok && len(r.FaultChecks) > 0 {
		return &r
	}
	return nil
}
