//go:build linux

package bench

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/topologies/fault"
)

// A run's tenures come from two sources that must agree: the capture
// (checkSource.tenures: the frames by which a node claims to lead) and the
// nodes' event logs (logTenures: the records of what each node believed).
// Both are first derived as spans on the wall clock, each running to its
// natural end (a step-down, the node's next lead, or the end of what the
// source knows), then cut by the faults the same way (cutSpans), clipped to
// the capture and put on the measured fault's time line (spanTenures).

// span is one node's lead of one epoch on the wall clock.
type span struct {
	node       string
	epoch      uint64
	start, end time.Time
}

// forever ends a span whose source does not say when it ended.
var forever = time.Unix(1<<62, 0)

// cutSpans applies the faults to spans: a crash or a leave ends a node's
// leads there (its process is gone; a lead the capture saw begin while it
// went is dropped whole), and a pause suspends them until the
// node is resumed (a stopped process leads nobody; one resumed still
// believes what it believed, until it hears otherwise). Other faults leave
// what a node believes alone: a partitioned, isolated or cut-off leader
// (a cut leaves it some links, and the nodes it still reaches may follow
// it) still leads whoever follows it, and the disruptions excuse that; a
// clock fault changes when its timers fire, not what it believes.
func cutSpans(spans []span, faults []fault.Fault) []span {
	var out []span
	for _, sp := range spans {
		pieces := []span{sp}
		var paused time.Time
		for _, f := range faults {
			if !slices.Contains(f.Nodes, sp.node) {
				continue
			}
			switch f.Kind {
			case fault.Crash, fault.Leave:
				from := f.Time
				if !paused.IsZero() {
					from = paused // it led nobody since
				}
				// A lead begun before the process was gone is the ended
				// process's, even one begun after the fault's Time: a
				// claim it sent just before the kill can reach the switch
				// after the lab began the fault. Only a restart, after
				// that, makes a later process.
				if gone(f).After(sp.start) {
					pieces = removeSpan(pieces, from, forever)
				}
				paused = time.Time{}
			case fault.Pause:
				if paused.IsZero() {
					paused = f.Time
				}
			case fault.Resume:
				if !paused.IsZero() {
					pieces = removeSpan(pieces, paused, f.Time)
					paused = time.Time{}
				}
			}
		}
		if !paused.IsZero() {
			pieces = removeSpan(pieces, paused, forever)
		}
		out = append(out, pieces...)
	}
	return out
}

// gone is when f's change was known to be in force: for a crash or a
// leave, when the process was gone.
func gone(f fault.Fault) time.Time {
	if f.InForce.IsZero() {
		return f.Time
	}
	return f.InForce
}

// removeSpan removes [from, to) from pieces, keeping what lasts.
func removeSpan(pieces []span, from, to time.Time) []span {
	var out []span
	for _, p := range pieces {
		if !p.end.After(from) || !p.start.Before(to) {
			out = append(out, p)
			continue
		}
		if p.start.Before(from) {
			q := p
			q.end = from
			out = append(out, q)
		}
		if p.end.After(to) {
			q := p
			q.start = to
			out = append(out, q)
		}
	}
	return out
}

// spanTenures clips spans to [from, to] and gives them as Tenures relative
// to origin, by start; spans left with nothing are dropped.
func spanTenures(spans []span, from, to, origin time.Time) []Tenure {
	out := []Tenure{}
	for _, sp := range spans {
		start, end := maxTime(sp.start, from), minTime(sp.end, to)
		if !end.After(start) {
			continue
		}
		out = append(out, Tenure{Node: sp.node, Epoch: sp.epoch, Start: start.Sub(origin), End: end.Sub(origin)})
	}
	slices.SortStableFunc(out, func(a, b Tenure) int { return cmp.Compare(a.Start, b.Start) })
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tenureRecords gives ts as TenureRecords, each naming its successor: of
// the tenures with the smallest epoch above its own, the first to start.
func tenureRecords(ts []Tenure) []results.TenureRecord {
	if len(ts) == 0 {
		return nil
	}
	out := make([]results.TenureRecord, len(ts))
	for i, t := range ts {
		out[i] = results.TenureRecord{Node: t.Node, Epoch: t.Epoch, StartNS: int64(t.Start), EndNS: int64(t.End)}
		var next *Tenure
		for j := range ts {
			u := &ts[j]
			if u.Epoch <= t.Epoch {
				continue
			}
			if next == nil || u.Epoch < next.Epoch || u.Epoch == next.Epoch && u.Start < next.Start {
				next = u
			}
		}
		if next != nil {
			out[i].NextLeader, out[i].NextEpoch = next.Node, next.Epoch
		}
	}
	return out
}

// tenureDisagreements holds what the frames and the logs say each node
// led to each other and describes, one line each, where they differ:
//
//   - a lead one source shows and the other does not: no lead of the
//     node in the other overlaps it or comes within slack of it;
//   - a lead of one epoch by the log and another by the frames: a lead
//     of the node in the other overlaps it or comes within slack, but
//     none of that epoch does;
//   - a lead both show whose start or end differ by more than slack,
//     unless the two times lie within a disruption or its grace (excused
//     says whether [a, b) does): a node's frames then wait behind
//     unacknowledged ones for TCP's retransmission timer.
//
// A lead no longer than slack in one source alone is none of these: the
// time from a node's decision (its log) to its frame (the wire) can hold
// a whole lead, as when a node is killed right after it won.
func tenureDisagreements(wire, log []Tenure, slack time.Duration, excused func(a, b time.Duration) bool) []string {
	var nodes []string
	for _, t := range slices.Concat(wire, log) {
		if !slices.Contains(nodes, t.Node) {
			nodes = append(nodes, t.Node)
		}
	}
	slices.Sort(nodes)
	var out []string
	for _, n := range nodes {
		ws, ls := tenuresOf(wire, n), tenuresOf(log, n)
		seen := map[[2]uint64]bool{} // epoch pairs (log, frames) reported
		for _, side := range []struct {
			ts, other []Tenure
			fromLog   bool
		}{{ls, ws, true}, {ws, ls, false}} {
			for _, t := range side.ts {
				if d, ok := matchTenure(t, side.other, side.fromLog, slack, seen); ok {
					out = append(out, d)
				}
			}
		}
		for _, l := range ls {
			w, ok := onlyMatch(l, ws, slack)
			if !ok {
				continue
			}
			if back, ok := onlyMatch(w, ls, slack); !ok || back != l {
				continue
			}
			for _, b := range []struct {
				what   string
				lt, wt time.Duration
			}{{"began", l.Start, w.Start}, {"ended", l.End, w.End}} {
				lo, hi := min(b.lt, b.wt), max(b.lt, b.wt)
				if hi-lo > slack && !excused(lo, hi) {
					out = append(out, fmt.Sprintf("%s's lead of epoch %d %s at %s by its log but at %s by its frames",
						n, l.Epoch, b.what, fmtOffset(b.lt), fmtOffset(b.wt)))
				}
			}
		}
	}
	return out
}

// tenuresOf is n's tenures in ts.
func tenuresOf(ts []Tenure, n string) []Tenure {
	var out []Tenure
	for _, t := range ts {
		if t.Node == n {
			out = append(out, t)
		}
	}
	return out
}

// near reports whether a and b overlap or come within slack of each other.
func near(a, b Tenure, slack time.Duration) bool {
	return a.Start < b.End+slack && b.Start < a.End+slack
}

// matchTenure finds t's counterpart among other, the same node's tenures
// by the other source, and describes the disagreement when it has none:
// no lead near it, or only leads of other epochs (reported once per pair
// of epochs, seen).
func matchTenure(t Tenure, other []Tenure, fromLog bool, slack time.Duration, seen map[[2]uint64]bool) (string, bool) {
	var best *Tenure // the other-epoch lead overlapping t the most
	for i := range other {
		u := &other[i]
		if !near(t, *u, slack) {
			continue
		}
		if u.Epoch == t.Epoch {
			return "", false
		}
		if best == nil || overlap(t, *u) > overlap(t, *best) {
			best = u
		}
	}
	when := fmt.Sprintf("from %s to %s", fmtOffset(t.Start), fmtOffset(t.End))
	switch {
	case best != nil:
		pair := [2]uint64{t.Epoch, best.Epoch}
		if !fromLog {
			pair = [2]uint64{best.Epoch, t.Epoch}
		}
		if seen[pair] {
			return "", false
		}
		seen[pair] = true
		return fmt.Sprintf("%s led epoch %d by its log but epoch %d by its frames %s", t.Node, pair[0], pair[1], when), true
	case t.End-t.Start <= slack:
		return "", false
	case fromLog:
		return fmt.Sprintf("%s led epoch %d by its log %s, but its frames claim no lead then", t.Node, t.Epoch, when), true
	}
	return fmt.Sprintf("%s led epoch %d by its frames %s, but its log has it lead no epoch then", t.Node, t.Epoch, when), true
}

// onlyMatch is t's one counterpart of its epoch among other, if it has
// exactly one.
func onlyMatch(t Tenure, other []Tenure, slack time.Duration) (Tenure, bool) {
	var m Tenure
	n := 0
	for _, u := range other {
		if u.Epoch == t.Epoch && near(t, u, slack) {
			m = u
			n++
		}
	}
	return m, n == 1
}

// overlap is how long a and b overlap, negative when they do not.
func overlap(a, b Tenure) time.Duration {
	return min(a.End, b.End) - max(a.Start, b.Start)
}
