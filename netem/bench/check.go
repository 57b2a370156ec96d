package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Checks are the safety and liveness checks of one run. Times are
// relative to the run's measured fault.
type Checks struct {
	// LeadersPerEpoch lists, for every epoch someone led, who led it; more
	// than one leader in an epoch is an anomaly that only a partition or
	// lost messages excuse.
	LeadersPerEpoch []EpochLeaders `json:"leaders_per_epoch"`
	// SplitBrain lists the windows in which two or more nodes led at once.
	SplitBrain []SplitBrain `json:"split_brain"`
	// ConvergenceNS is from the last fault to the moment every live node
	// followed the highest live node for good; absent when that never
	// happened within the run.
	ConvergenceNS *int64 `json:"convergence_ns,omitempty"`
	// BoundNS is the SLE2 bound the run's convergence was held to: the
	// topology's, or larger when a fault delayed the network; absent when
	// loss was still in force at the end, as SLE2 then bounds nothing.
	BoundNS int64 `json:"sle2_bound_ns,omitempty"`
	// Violations are what failed the run; empty when it passed.
	Violations []Violation `json:"violations,omitempty"`
}

// EpochLeaders is who led one epoch.
type EpochLeaders struct {
	Epoch   uint64   `json:"epoch"`
	Leaders []string `json:"leaders"`
}

// SplitBrain is a window in which several nodes led at once.
type SplitBrain struct {
	StartNS int64    `json:"start_ns"`
	EndNS   int64    `json:"end_ns"`
	Leaders []string `json:"leaders"`
	// Connected is true when part of the window fell outside every
	// disruption and its grace period: an SLE1 violation.
	Connected bool `json:"connected"`
}

// Violation is a broken property: "safety" (SLE1) or "liveness" (SLE2).
type Violation struct {
	Property string `json:"property"`
	Detail   string `json:"detail"`
}

// Tenure is a span in which a node considered itself leader of an epoch:
// from its COORDINATOR (or election won) to its crash, its step-down, or
// the end of the run.
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
	Tenures     []Tenure
	Disruptions []Disruption
	// Grace extends every disruption: after a partition heals its two
	// leaders coexist until they hear each other, which SLE2 bounds. Pass
	// the SLE2 bound.
	Grace time.Duration
	// Convergence is the time from the last fault to agreement on the
	// highest live node, nil when it never came; Bound is the SLE2 bound
	// it must meet.
	Convergence *time.Duration
	Bound       time.Duration
}

// Check derives a run's checks from its leadership tenures. A run violates
// safety when two nodes lead at once, or share an epoch, outside every
// disruption and its grace period; it violates liveness when it does not
// converge on the highest live node within the bound.
func Check(in CheckInput) Checks {
	c := Checks{LeadersPerEpoch: []EpochLeaders{}, SplitBrain: []SplitBrain{}}
	excused := func(start, end time.Duration) bool {
		// [start, end) must lie in the union of the grace-extended
		// disruptions; walk them in order, extending the covered prefix.
		ds := slices.Clone(in.Disruptions)
		slices.SortFunc(ds, func(a, b Disruption) int { return cmp.Compare(a.Start, b.Start) })
		covered := start
		for _, d := range ds {
			if d.Start > covered {
				break
			}
			covered = max(covered, d.End+in.Grace)
			if covered >= end {
				return true
			}
		}
		return covered >= end
	}

	byEpoch := map[uint64][]Tenure{}
	for _, t := range in.Tenures {
		byEpoch[t.Epoch] = append(byEpoch[t.Epoch], t)
	}
	epochs := make([]uint64, 0, len(byEpoch))
	for e := range byEpoch {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	for _, e := range epochs {
		var leaders []string
		for _, t := range byEpoch[e] {
			if !slices.Contains(leaders, t.Node) {
				leaders = append(leaders, t.Node)
			}
		}
		slices.Sort(leaders)
		c.LeadersPerEpoch = append(c.LeadersPerEpoch, EpochLeaders{Epoch: e, Leaders: leaders})
		if len(leaders) < 2 {
			continue
		}
		// Shared epochs come from a partition or lost messages hiding one
		// leader from the other; the later tenure began inside one.
		var first Tenure
		for i, t := range byEpoch[e] {
			if i == 0 || t.Start < first.Start {
				first = t
			}
		}
		for _, t := range byEpoch[e] {
			if t.Node != first.Node && !excused(t.Start, t.Start+1) {
				c.Violations = append(c.Violations, Violation{Property: "safety",
					Detail: fmt.Sprintf("epoch %d led by %s at %s and by %s at %s with the network connected",
						e, first.Node, fmtOffset(first.Start), t.Node, fmtOffset(t.Start))})
				break
			}
		}
	}

	// Sweep the tenure boundaries for spans with two or more leaders.
	type edge struct {
		at    time.Duration
		node  string
		delta int
	}
	var edges []edge
	for _, t := range in.Tenures {
		if t.End > t.Start {
			edges = append(edges, edge{t.Start, t.Node, +1}, edge{t.End, t.Node, -1})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return a.delta - b.delta // a handover at one instant is not two leaders
	})
	leading := map[string]int{}
	var open *SplitBrain
	var openStart time.Duration
	for _, e := range edges {
		leading[e.node] += e.delta
		if leading[e.node] == 0 {
			delete(leading, e.node)
		}
		switch {
		case len(leading) >= 2 && open == nil:
			open = &SplitBrain{StartNS: int64(e.at)}
			openStart = e.at
			fallthrough
		case len(leading) >= 2:
			for n := range leading {
				if !slices.Contains(open.Leaders, n) {
					open.Leaders = append(open.Leaders, n)
				}
			}
		case open != nil:
			open.EndNS = int64(e.at)
			slices.Sort(open.Leaders)
			open.Connected = !excused(openStart, e.at)
			c.SplitBrain = append(c.SplitBrain, *open)
			if open.Connected {
				c.Violations = append(c.Violations, Violation{Property: "safety",
					Detail: fmt.Sprintf("%s led at once for %s from %s with the network connected",
						strings.Join(open.Leaders, " and "), time.Duration(open.EndNS-open.StartNS), fmtOffset(openStart))})
			}
			open = nil
		}
	}

	c.BoundNS = int64(in.Bound)
	if in.Convergence != nil {
		ns := int64(*in.Convergence)
		c.ConvergenceNS = &ns
	}
	switch {
	case in.Convergence == nil:
		c.Violations = append(c.Violations, Violation{Property: "liveness",
			Detail: "the live nodes never agreed on the highest of them after the last fault"})
	case in.Bound > 0 && *in.Convergence > in.Bound:
		c.Violations = append(c.Violations, Violation{Property: "liveness",
			Detail: fmt.Sprintf("the live nodes agreed on the highest of them %s after the last fault, beyond the SLE2 bound of %s",
				*in.Convergence, in.Bound)})
	}
	return c
}

// Failure returns the failure kind and reason the checks give a run, or
// "", "" when they pass: the first violation, safety before liveness.
func (c Checks) Failure() (kind, reason string) {
	for _, prop := range []string{"safety", "liveness"} {
		for _, v := range c.Violations {
			if v.Property == prop {
				kind := FailSafety
				if prop == "liveness" {
					kind = FailLiveness
				}
				return kind, v.Detail
			}
		}
	}
	return "", ""
}

// fmtOffset prints a time relative to the measured fault.
func fmtOffset(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
