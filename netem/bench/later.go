//go:build linux

package bench

import (
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/topologies/fault"
)

// laterLeaderChanges counts the run's leader changes in its capture after
// it settled, at its time to leader from the measured fault at measured,
// and before the next fault of faults after that one
// (results.CountLaterLeaderChanges); nil when the run measured no time to
// leader.
func laterLeaderChanges(r *results.Run, faults []fault.Fault, measured time.Time) *int {
	if r.TimeToLeaderFrom == "" {
		return nil
	}
	until := int64(results.NoLaterFault)
	if next := nextFaultAfter(faults, measured); next != nil {
		until = int64(next.Time.Sub(measured))
	}
	n := results.CountLaterLeaderChanges(r.Checks.Tenures, r.TimeToLeaderNS, until)
	return &n
}

// nextFaultAfter is the earliest of faults after t, nil when none is: the
// fault that ends the span in which a leader change counts as a later one.
func nextFaultAfter(faults []fault.Fault, t time.Time) *fault.Fault {
	var next *fault.Fault
	for i := range faults {
		if faults[i].Time.After(t) && (next == nil || faults[i].Time.Before(next.Time)) {
			next = &faults[i]
		}
	}
	return next
}
