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
	for _, f := range faults {
		if f.Time.After(measured) {
			until = min(until, int64(f.Time.Sub(measured)))
		}
	}
	n := results.CountLaterLeaderChanges(r.Checks.Tenures, r.TimeToLeaderNS, until)
	return &n
}
