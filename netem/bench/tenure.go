package bench

import (
	"cmp"
	"slices"
	"time"

	"github.com/bullylab/bullylab/netem/fault"
)

// A run's tenures are first derived as spans on the wall clock, each
// running to its natural end (a step-down, the node's next lead, or the
// end of what the source knows), then cut by the faults (cutSpans),
// clipped to the capture and put on the measured fault's time line
// (spanTenures).

// span is one node's lead of one epoch on the wall clock.
type span struct {
	node       string
	epoch      uint64
	start, end time.Time
}

// forever ends a span whose source does not say when it ended.
var forever = time.Unix(1<<62, 0)

// cutSpans applies the faults to spans: a crash or a leave ends a node's
// leads there (its process is gone), and a pause suspends them until the
// node is resumed (a stopped process leads nobody; one resumed still
// believes what it believed, until it hears otherwise). Other faults leave
// what a node believes alone: a partitioned or isolated leader still
// leads its side, and the disruptions excuse that.
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
				if from.After(sp.start) { // not a lead of a later process
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
