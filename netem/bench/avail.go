package bench

import (
	"slices"
	"time"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/topologies/fault"
)

// A run's availability is judged on what each node believed (its event
// log: the leader it followed, or none) against what the faults let it
// reach (connectivity). A node has a leader at an instant when it runs,
// follows some node, and that node runs, leads (follows itself) and is
// connected to it both ways; a node leading has itself. The cluster is
// settled when every running node has a leader and every two running
// nodes that traffic can join, both ways and through others if need be,
// have the same one: one leader per side of a partition will do, but a
// cut that leaves the network in one piece (chained, bridge) needs one
// leader for all. It is whole when, besides, they all have the same one.

// belief is what a node believed from at on: the leader it followed, ""
// for none, and its epoch.
type belief struct {
	at     time.Time
	leader string
	epoch  uint64
}

// availabilityInput is what availabilityOf judges.
type availabilityInput struct {
	nodes   []string            // every node, lowest ID first
	beliefs map[string][]belief // by node, in time order
	net     *connectivity
	// start is the measured disruption's start, end the run's; holdEnd
	// is the end of the hold window (the heal, or end) when the
	// disruption cut links, zero otherwise.
	start, end, holdEnd time.Time
	origin              time.Time // the measured fault: results' time zero
	// pieceCache holds pieces by network state; availabilityOf makes it.
	pieceCache map[*netState]map[string]int
}

// availability is what availabilityOf found.
type availability struct {
	unavailable time.Duration
	changes     int
	rec         results.Availability
	lanes       []report.LeaderSpan
}

// disruptionOf is the measured disruption of a run's faults (its
// scenario's, not settle's): the first that changed the network or the
// processes. holdEnd is when a disruption that cut links ended: the first
// heal after it (for an isolation, an unisolate too), else end; zero for
// one that cut none. ok is false when no fault disrupted anything.
func disruptionOf(faults []fault.Fault, end time.Time) (start, holdEnd time.Time, ok bool) {
	i := slices.IndexFunc(faults, func(f fault.Fault) bool { return f.Kind != fault.Campaign && f.Kind != fault.Clock })
	if i < 0 {
		return time.Time{}, time.Time{}, false
	}
	d := faults[i]
	switch d.Kind {
	case fault.Partition, fault.Isolate, fault.Cut:
	default:
		return d.Time, time.Time{}, true
	}
	for _, f := range faults[i+1:] {
		if f.Kind == fault.Heal || d.Kind == fault.Isolate && f.Kind == fault.Unisolate {
			return d.Time, f.Time, true
		}
	}
	return d.Time, end, true
}

// segment is an interval over which neither beliefs nor the network
// change, judged.
type segment struct {
	from, to time.Time
	believed map[string]belief // running nodes' beliefs
	has      map[string]bool   // running nodes that have a leader
	leading  []string          // running nodes that lead
	settled  bool
	whole    bool
	dual     bool // two leading nodes connected both ways
}

// availabilityOf judges the beliefs from in.start to in.end.
func availabilityOf(in availabilityInput) availability {
	in.pieceCache = map[*netState]map[string]int{}
	segs := in.segments()
	var out availability
	rec := &out.rec
	rec.DisruptionNS = int64(in.start.Sub(in.origin))
	rec.LeaderlessNS = map[string]int64{}
	for _, n := range in.nodes {
		rec.LeaderlessNS[n] = 0
	}
	var leaders []string
	for _, s := range segs {
		d := s.to.Sub(s.from)
		for n := range s.believed {
			if !s.has[n] {
				rec.LeaderlessNS[n] += int64(d)
			}
		}
		if s.dual {
			rec.DualLeaderNS += int64(d)
		}
		for _, l := range s.leading {
			if !slices.Contains(leaders, l) {
				leaders = append(leaders, l)
			}
		}
	}
	rec.Leaders = inNodeOrder(leaders, in.nodes)

	// Unavailable until the last stretch of whole segments holding the
	// same beliefs to the end.
	from, ok := settledSince(segs, in.end, func(s segment) bool { return s.whole })
	out.unavailable = in.end.Sub(in.start)
	if ok {
		out.unavailable = from.Sub(in.start)
	}

	windowEnd := in.end
	if !in.holdEnd.IsZero() {
		windowEnd = in.holdEnd
		rec.HoldNS = int64(in.holdEnd.Sub(in.start))
	}
	tenures := in.tenureStarts()
	inWindow := 0
	flapFrom := windowEnd.Add(-windowEnd.Sub(in.start) / 4)
	flapping := false
	for _, t := range tenures {
		if !t.Before(in.start) && !t.After(in.end) {
			out.changes++
		}
		if !t.Before(in.start) && t.Before(windowEnd) {
			inWindow++
			flapping = flapping || !t.Before(flapFrom)
		}
	}
	if w := windowEnd.Sub(in.start); w > 0 {
		rec.LeaderChangesPerS = float64(inWindow) / w.Seconds()
	}
	switch from, ok := settledSince(segs, windowEnd, func(s segment) bool { return s.settled }); {
	case ok:
		rec.Verdict = results.VerdictConverged
		c := int64(from.Sub(in.start))
		rec.ConvergedNS = &c
	case flapping && inWindow >= 2:
		rec.Verdict = results.VerdictFlapping
	default:
		rec.Verdict = results.VerdictStuck
	}
	out.lanes = in.lanes(segs)
	return out
}

// settledSince is the start of the last stretch of segments ending at end
// that all satisfy ok and hold the same beliefs; false when the segment
// just before end does not satisfy ok.
func settledSince(segs []segment, end time.Time, ok func(segment) bool) (time.Time, bool) {
	last := -1
	for i, s := range segs {
		if s.from.Before(end) {
			last = i
		}
	}
	if last < 0 || !ok(segs[last]) {
		return time.Time{}, false
	}
	first := last
	for first > 0 && ok(segs[first-1]) && sameBeliefs(segs[first-1].believed, segs[last].believed) {
		first--
	}
	return segs[first].from, true
}

func sameBeliefs(a, b map[string]belief) bool {
	if len(a) != len(b) {
		return false
	}
	for n, x := range a {
		if y, ok := b[n]; !ok || x.leader != y.leader || x.epoch != y.epoch {
			return false
		}
	}
	return true
}

// segments cuts [start, end) at every change of a belief or of the
// network and judges each piece.
func (in availabilityInput) segments() []segment {
	cuts := []time.Time{in.start, in.end}
	if !in.holdEnd.IsZero() {
		cuts = append(cuts, in.holdEnd)
	}
	cuts = append(cuts, in.net.changes()...)
	for _, bs := range in.beliefs {
		for _, b := range bs {
			cuts = append(cuts, b.at)
		}
	}
	slices.SortFunc(cuts, func(a, b time.Time) int { return a.Compare(b) })
	cuts = slices.CompactFunc(cuts, time.Time.Equal)
	var segs []segment
	for i := 0; i+1 < len(cuts); i++ {
		from, to := cuts[i], cuts[i+1]
		if from.Before(in.start) || !to.After(from) || to.After(in.end) {
			continue
		}
		segs = append(segs, in.judge(from, to))
	}
	return segs
}

// judge is the segment [from, to), judged at from.
func (in availabilityInput) judge(from, to time.Time) segment {
	s := segment{from: from, to: to, believed: map[string]belief{}, has: map[string]bool{}}
	for _, n := range in.nodes {
		if in.net.runs(n, from) {
			s.believed[n] = in.beliefAt(n, from)
		}
	}
	for _, n := range in.nodes {
		if b, ok := s.believed[n]; ok && b.leader == n {
			s.leading = append(s.leading, n)
		}
	}
	s.settled = len(s.believed) > 0
	var common string
	s.whole = true
	piece := in.pieces(from)
	pieceLeader := map[int]string{}
	for _, n := range in.nodes {
		b, ok := s.believed[n]
		if !ok {
			continue
		}
		l := b.leader
		s.has[n] = l != "" && slices.Contains(s.leading, l) && in.net.connected(n, l, from)
		s.settled = s.settled && s.has[n]
		if pl, ok := pieceLeader[piece[n]]; ok && pl != l {
			s.settled = false
		}
		pieceLeader[piece[n]] = l
		if common == "" {
			common = l
		}
		s.whole = s.whole && l == common
	}
	s.whole = s.whole && s.settled
	for i, a := range s.leading {
		for _, b := range s.leading[i+1:] {
			s.dual = s.dual || in.net.connected(a, b, from)
		}
	}
	return s
}

// pieces numbers the connected pieces of the nodes running at t, where
// two nodes are joined when traffic passes between them both ways. They
// change only with the network, so each state's are found once.
func (in availabilityInput) pieces(t time.Time) map[string]int {
	state := in.net.at(t)
	if p, ok := in.pieceCache[state]; ok {
		return p
	}
	piece := map[string]int{}
	next := 0
	for _, n := range in.nodes {
		if state.stopped[n] {
			continue
		}
		if _, seen := piece[n]; seen {
			continue
		}
		piece[n] = next
		if state.cutsNothing() {
			continue // one piece: next stays 0
		}
		stack := []string{n}
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, b := range in.nodes {
				if state.stopped[b] {
					continue
				}
				if _, seen := piece[b]; !seen && in.net.connected(a, b, t) {
					piece[b] = next
					stack = append(stack, b)
				}
			}
		}
		next++
	}
	in.pieceCache[state] = piece
	return piece
}

// beliefAt is what n believed at t: none before its first record.
func (in availabilityInput) beliefAt(n string, t time.Time) belief {
	bs := in.beliefs[n]
	i := len(bs)
	for i > 0 && bs[i-1].at.After(t) {
		i--
	}
	if i == 0 {
		return belief{}
	}
	return bs[i-1]
}

// tenureStarts are when each tenure, a (leader, epoch) pair, began: the
// first time its leader believed it led that epoch.
func (in availabilityInput) tenureStarts() []time.Time {
	type tenure struct {
		node  string
		epoch uint64
	}
	first := map[tenure]time.Time{}
	for _, n := range in.nodes {
		for _, b := range in.beliefs[n] {
			k := tenure{n, b.epoch}
			if t, ok := first[k]; b.leader == n && (!ok || b.at.Before(t)) {
				first[k] = b.at
			}
		}
	}
	out := make([]time.Time, 0, len(first))
	for _, t := range first {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// lanes are the segments as each node's believed leader, consecutive
// pieces alike merged; a node not running or following nobody has none.
func (in availabilityInput) lanes(segs []segment) []report.LeaderSpan {
	var out []report.LeaderSpan
	open := map[string]int{} // node -> index in out of its last span
	for _, s := range segs {
		for _, n := range in.nodes {
			b, ok := s.believed[n]
			if !ok || b.leader == "" {
				continue
			}
			sp := report.LeaderSpan{Node: n, Leader: b.leader, Epoch: b.epoch, Start: s.from, End: s.to, Unreachable: !s.has[n]}
			if i, ok := open[n]; ok && out[i].End.Equal(s.from) && out[i].Leader == sp.Leader && out[i].Epoch == sp.Epoch && out[i].Unreachable == sp.Unreachable {
				out[i].End = s.to
				continue
			}
			out = append(out, sp)
			open[n] = len(out) - 1
		}
	}
	return out
}

// inNodeOrder is ns sorted as nodes lists them.
func inNodeOrder(ns, nodes []string) []string {
	out := slices.Clone(ns)
	slices.SortFunc(out, func(a, b string) int { return slices.Index(nodes, a) - slices.Index(nodes, b) })
	return out
}
