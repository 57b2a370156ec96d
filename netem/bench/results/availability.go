package results

import (
	"fmt"
	"slices"
	"strings"
)

// Verdicts of a run's hold window (Availability.Verdict).
const (
	// VerdictConverged: the nodes settled before the window's end and
	// stayed so: each live node followed a leader it reached both ways,
	// that leader leading.
	VerdictConverged = "converged"
	// VerdictFlapping: not settled at the window's end, and leader
	// changes went on: two or more tenures began within the window, one
	// of them within its last quarter. A lone change is one election,
	// however late, not flapping.
	VerdictFlapping = "flapping"
	// VerdictStuck: neither: unsettled, and no change going on.
	VerdictStuck = "stuck"
)

// Verdicts lists the verdicts, best first.
var Verdicts = []string{VerdictConverged, VerdictFlapping, VerdictStuck}

// Availability is what a run's nodes believed about their leader from the
// measured disruption's start (the first fault of the run that changed
// the network or the processes) to the run's end, next to what the faults
// let them reach. Times are nanoseconds.
type Availability struct {
	// DisruptionNS is the disruption's start relative to the measured
	// fault: 0 when it is that fault, negative when it came before (a
	// cut whose heal is the measured fault).
	DisruptionNS int64 `json:"disruption_ns"`
	// HoldNS is the hold window's length: from the disruption, when it
	// cut links (partition, isolate, cut), to the heal, or to the run's
	// end without one; 0 when the disruption cut no link (a crash).
	HoldNS  int64  `json:"hold_ns,omitempty"`
	Verdict string `json:"verdict"`
	// ConvergedNS is, for a converged verdict, when the nodes settled for
	// good, from the disruption's start: without a hold, the time to
	// leader measured from it.
	ConvergedNS *int64 `json:"converged_ns,omitempty"`
	// LeaderChangesPerS is the leader changes within the hold window (the
	// whole run after the disruption when it has none) per second of it.
	LeaderChangesPerS float64 `json:"leader_changes_per_s"`
	// Leaders are the nodes that led at some time after the disruption,
	// by name.
	Leaders []string `json:"leaders,omitempty"`
	// DualLeaderNS is how long two nodes that each led could reach each
	// other both ways, by the faults in force.
	DualLeaderNS int64 `json:"dual_leader_ns"`
	// LeaderlessNS is, per node, how long it ran without a leader it
	// could reach both ways.
	LeaderlessNS map[string]int64 `json:"leaderless_ns,omitempty"`
}

// AvailabilitySummary aggregates the runs' availability: Unavailable and
// LeaderChanges over the runs that passed and measured them (as the other
// distributions), Verdicts over every run that has one.
type AvailabilitySummary struct {
	Unavailable   Dist           `json:"unavailable"`
	LeaderChanges Count          `json:"leader_changes"`
	Verdicts      map[string]int `json:"verdicts,omitempty"`
}

// summarizeAvailability is the runs' AvailabilitySummary, nil when no run
// measured its availability (a results.json from before it was).
func summarizeAvailability(runs []Run) *AvailabilitySummary {
	var un []int64
	var changes []int
	verdicts := map[string]int{}
	measured := false
	for _, r := range runs {
		if r.Availability != nil && r.Availability.Verdict != "" {
			verdicts[r.Availability.Verdict]++
		}
		measured = measured || r.UnavailableNS != nil || r.LeaderChanges != nil
		if !r.OK {
			continue
		}
		if r.UnavailableNS != nil {
			un = append(un, *r.UnavailableNS)
		}
		if r.LeaderChanges != nil {
			changes = append(changes, *r.LeaderChanges)
		}
	}
	if !measured {
		return nil
	}
	s := &AvailabilitySummary{Unavailable: Distribution(un), LeaderChanges: countOf(changes)}
	if len(verdicts) > 0 {
		s.Verdicts = verdicts
	}
	return s
}

// minLeaderChanges is the noise floor of a change of the mean leader
// changes: half a change, as compare's half a message.
const minLeaderChanges = 0.5

// availabilityChanges are the availability metrics compare gates: the
// unavailability percentiles, as the time to leader's, and the mean leader
// changes. A side without them (a results.json from before they were
// measured) leaves them unknown: none is gated.
func availabilityChanges(b, n Summary, add func(metric, unit string, bv, nv float64, hb, hn bool, floor float64), timeFloor float64) {
	if b.Availability == nil && n.Availability == nil {
		return
	}
	var ba, na AvailabilitySummary
	if b.Availability != nil {
		ba = *b.Availability
	}
	if n.Availability != nil {
		na = *n.Availability
	}
	hb, hn := ba.Unavailable.N > 0, na.Unavailable.N > 0
	for _, p := range TimePercentiles {
		bu, nu := ba.Unavailable, na.Unavailable
		if !pctComparable(p.Name, bu, nu, hb, hn) {
			continue
		}
		add(metricUnavailable+" "+p.Name, "ns", float64(p.Of(&bu)), float64(p.Of(&nu)), hb, hn, timeFloor)
	}
	add(metricLeaderChanges, "changes", ba.LeaderChanges.Mean, na.LeaderChanges.Mean,
		b.Availability != nil && b.OK > 0, n.Availability != nil && n.OK > 0, minLeaderChanges)
}

// The availability metrics' names in a comparison.
const (
	metricUnavailable   = "unavailable"
	metricLeaderChanges = "leader changes mean"
)

// availabilityFamily is the per-run value behind an availability metric,
// nil for another metric.
func availabilityFamily(metric string) func(Run) (float64, bool) {
	switch {
	case strings.HasPrefix(metric, metricUnavailable+" "):
		return func(r Run) (float64, bool) {
			if r.UnavailableNS == nil {
				return 0, false
			}
			return float64(*r.UnavailableNS), true
		}
	case metric == metricLeaderChanges:
		return func(r Run) (float64, bool) {
			if r.LeaderChanges == nil {
				return 0, false
			}
			return float64(*r.LeaderChanges), true
		}
	}
	return nil
}

// availabilityLine is a scenario's availability in one line of the
// summary: its verdicts, its unavailability's p50 and max and its leader
// changes; "" when its runs did not measure it.
func availabilityLine(key string, s Summary) string {
	a := s.Availability
	if a == nil {
		return ""
	}
	var vs []string
	for _, v := range Verdicts {
		if n := a.Verdicts[v]; n > 0 {
			vs = append(vs, fmt.Sprintf("%s %d", v, n))
		}
	}
	var others []string
	for v := range a.Verdicts {
		if !slices.Contains(Verdicts, v) {
			others = append(others, v)
		}
	}
	slices.Sort(others)
	for _, v := range others {
		vs = append(vs, fmt.Sprintf("%s %d", v, a.Verdicts[v]))
	}
	line := key + ": verdict " + strings.Join(vs, ", ")
	if len(vs) == 0 {
		line = key + ": no verdict"
	}
	if a.Unavailable.N > 0 {
		line += fmt.Sprintf("; unavailable p50 %s, max %s; leader changes mean %s, max %d",
			FormatNS(a.Unavailable.P50NS), FormatNS(a.Unavailable.MaxNS), FormatMean(a.LeaderChanges.Mean), a.LeaderChanges.Max)
	}
	return line
}
