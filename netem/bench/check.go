//go:build linux

package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// Tenure is a span in which a node considered itself leader of an epoch:
// from its COORDINATOR (or election won) to its crash, its step-down, or
// the end of the run; a pause suspends it.
type Tenure struct {
	Node       string
	Epoch      uint64
	Start, End time.Duration
}

// Disruption is a span in which the network was not connected: a
// partition, an isolation, loss, or delay beyond the timeouts.
type Disruption struct {
	Start, End time.Duration
	What       string
}

// CheckInput is what Check needs of a run.
type CheckInput struct {
	// Tenures are the leads the capture shows; LogTenures those the
	// nodes' event logs show, compared with them when CompareLogs is set,
	// and LogProblems the logs that could not be read, one line each.
	// The safety checks take the tenures of both.
	Tenures     []Tenure
	LogTenures  []Tenure
	CompareLogs bool
	LogProblems []string
	// TenureSlack is how long the two sources may differ at a change of
	// leader: the time from a node's decision, which its log records, to
	// its frame on the wire.
	TenureSlack time.Duration
	Disruptions []Disruption
	// Grace extends every disruption: after a partition heals its two
	// leaders coexist until they hear each other, which SLE2 bounds. Pass
	// the SLE2 bound.
	Grace time.Duration
	// Convergence is the time from the last fault to agreement on the
	// highest live node (see Checks.ConvergenceNS for how a run measures
	// it), nil when it never came; Bound is the SLE2 bound it must meet.
	Convergence *time.Duration
	Bound       time.Duration
}

// Check derives a run's checks from its leadership tenures. A run violates
// safety when two nodes lead at once, or share an epoch, outside every
// disruption and its grace period; it violates liveness when it does not
// converge on the highest live node within the bound.
func Check(in CheckInput) results.Checks {
	k := newChecker(in)
	k.checkEpochs()
	k.checkOverlaps()
	k.checkSources()
	k.checkLiveness()
	k.c.Tenures = tenureRecords(in.Tenures)
	if in.CompareLogs {
		k.c.LogTenures = tenureRecords(in.LogTenures)
	}
	return k.c
}

// checker derives the Checks of one run.
type checker struct {
	in          CheckInput
	tenures     []Tenure     // of both sources
	disruptions []Disruption // by start
	c           results.Checks
}

func newChecker(in CheckInput) *checker {
	ds := slices.Clone(in.Disruptions)
	slices.SortFunc(ds, func(a, b Disruption) int { return cmp.Compare(a.Start, b.Start) })
	ts := slices.Clone(in.Tenures)
	if in.CompareLogs {
		ts = append(ts, in.LogTenures...)
	}
	return &checker{in: in, tenures: ts, disruptions: ds, c: results.Checks{LeadersPerEpoch: []results.EpochLeaders{}, LeaderOverlaps: []results.LeaderOverlap{}}}
}

func (k *checker) violate(property, format string, args ...any) {
	k.c.Violations = append(k.c.Violations, results.Violation{Property: property, Detail: fmt.Sprintf(format, args...)})
}

// excused reports whether [start, end) lies in the union of the
// grace-extended disruptions.
func (k *checker) excused(start, end time.Duration) bool {
	// Walk the disruptions in order, extending the covered prefix.
	covered := start
	for _, d := range k.disruptions {
		if d.Start > covered {
			break
		}
		covered = max(covered, d.End+k.in.Grace)
		if covered >= end {
			return true
		}
	}
	return covered >= end
}

// checkEpochs lists who led each epoch, and finds the epochs two nodes led
// with the network connected.
func (k *checker) checkEpochs() {
	byEpoch := map[uint64][]Tenure{}
	for _, t := range k.tenures {
		byEpoch[t.Epoch] = append(byEpoch[t.Epoch], t)
	}
	for _, e := range slices.Sorted(maps.Keys(byEpoch)) {
		var leaders []string
		for _, t := range byEpoch[e] {
			if !slices.Contains(leaders, t.Node) {
				leaders = append(leaders, t.Node)
			}
		}
		slices.Sort(leaders)
		k.c.LeadersPerEpoch = append(k.c.LeadersPerEpoch, results.EpochLeaders{Epoch: e, Leaders: leaders})
		if len(leaders) >= 2 {
			k.checkSharedEpoch(e, byEpoch[e])
		}
	}
}

// checkSharedEpoch checks an epoch several nodes led, its tenures ts.
// Shared epochs come from a partition or lost messages hiding one leader
// from the other, so the later tenure must have begun inside one.
func (k *checker) checkSharedEpoch(e uint64, ts []Tenure) {
	var first Tenure
	for i, t := range ts {
		if i == 0 || t.Start < first.Start {
			first = t
		}
	}
	for _, t := range ts {
		if t.Node != first.Node && !k.excused(t.Start, t.Start+1) {
			k.violate("safety", "epoch %d led by %s at %s and by %s at %s with the network connected",
				e, first.Node, fmtOffset(first.Start), t.Node, fmtOffset(t.Start))
			return
		}
	}
}

// tenureEdge is where a tenure starts (delta +1) or ends (-1).
type tenureEdge struct {
	at    time.Duration
	node  string
	delta int
}

// tenureEdges returns the starts and ends of the tenures that last, in
// time order.
func tenureEdges(tenures []Tenure) []tenureEdge {
	var edges []tenureEdge
	for _, t := range tenures {
		if t.End > t.Start {
			edges = append(edges, tenureEdge{t.Start, t.Node, +1}, tenureEdge{t.End, t.Node, -1})
		}
	}
	slices.SortFunc(edges, func(a, b tenureEdge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta // a handover at one instant is not two leaders
	})
	return edges
}

// checkOverlaps sweeps the tenure edges for spans with two or more
// leaders: leaders apart, or dual leaders (results.LeaderOverlap).
func (k *checker) checkOverlaps() {
	leading := map[string]int{}
	var open *results.LeaderOverlap
	for _, e := range tenureEdges(k.tenures) {
		leading[e.node] += e.delta
		if leading[e.node] == 0 {
			delete(leading, e.node)
		}
		switch {
		case len(leading) >= 2 && open == nil:
			open = &results.LeaderOverlap{StartNS: int64(e.at)}
			fallthrough
		case len(leading) >= 2:
			for n := range leading {
				if !slices.Contains(open.Leaders, n) {
					open.Leaders = append(open.Leaders, n)
				}
			}
		case open != nil:
			k.closeOverlap(open, e.at)
			open = nil
		}
	}
}

// closeOverlap records the overlap open, which ended at end.
func (k *checker) closeOverlap(open *results.LeaderOverlap, end time.Duration) {
	start := time.Duration(open.StartNS)
	open.EndNS = int64(end)
	slices.Sort(open.Leaders)
	open.Dual = !k.excused(start, end)
	k.c.LeaderOverlaps = append(k.c.LeaderOverlaps, *open)
	if open.Dual {
		k.violate("safety", "dual leaders: %s led at once for %s from %s with the network connected",
			strings.Join(open.Leaders, " and "), time.Duration(open.EndNS-open.StartNS), fmtOffset(start))
	}
}

// checkSources holds the capture's tenures and the logs' to each other.
func (k *checker) checkSources() {
	for _, p := range k.in.LogProblems {
		k.violate("tenures", "%s", p)
	}
	if !k.in.CompareLogs {
		return
	}
	for _, d := range tenureDisagreements(k.in.Tenures, k.in.LogTenures, k.in.TenureSlack, k.excused) {
		k.violate("tenures", "%s", d)
	}
}

// checkLiveness records the convergence and holds it to the bound.
func (k *checker) checkLiveness() {
	in := k.in
	k.c.BoundNS = int64(in.Bound)
	if in.Convergence != nil {
		ns := int64(*in.Convergence)
		k.c.ConvergenceNS = &ns
	}
	switch {
	case in.Convergence == nil:
		k.violate("liveness", "the live nodes never agreed on the highest of them after the last fault")
	case in.Bound > 0 && *in.Convergence > in.Bound:
		k.violate("liveness", "the live nodes agreed on the highest of them %s after the last fault, beyond the SLE2 bound of %s",
			*in.Convergence, in.Bound)
	}
}

// fmtOffset prints a time relative to the measured fault.
func fmtOffset(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
