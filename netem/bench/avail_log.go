//go:build linux

package bench

import (
	"slices"
	"time"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies/fault"
)

// logBeliefs are the nodes' beliefs by their event logs, by node name:
// none when a process starts, its leader from an election_won or a
// leader_changed, none again once its status leaves normal or it stops,
// and the leader it last had again when its status returns to normal
// without either: a node that re-follows the leader it had (an election
// that ended with the same COORDINATOR) logs no leader_changed.
// Logs name leaders by ID; each log's own records say its node's ID. ok is
// false when a log could not be read.
func logBeliefs(logs []nodeLog) (map[string][]belief, bool) {
	nameOf := map[string]string{}
	for _, nl := range logs {
		if nl.err != nil {
			return nil, false
		}
		for _, e := range nl.entries {
			if e.Node != "" {
				nameOf[e.Node] = nl.node
				break
			}
		}
	}
	out := map[string][]belief{}
	for _, nl := range logs {
		var bs []belief
		for _, inc := range incarnations(nl.entries) {
			origin := incarnationOrigin(inc)
			bs = append(bs, belief{at: origin})
			var known belief // the leader this process last had
			for _, e := range inc {
				t := origin.Add(time.Duration(e.MonoNS))
				switch e.Event {
				case string(election.EventElectionWon), string(election.EventLeaderChanged):
					leader, ok := nameOf[e.Leader]
					if !ok {
						leader = e.Leader // no log of it: it never runs by the faults' account either
					}
					known = belief{at: t, leader: leader, epoch: e.Epoch}
					bs = append(bs, known)
				case string(election.EventStatus):
					switch {
					case e.To != election.StatusNormal.String():
						bs = append(bs, belief{at: t})
					case bs[len(bs)-1].leader == "" && known.leader != "":
						// A leader_changed at this instant, if any, follows.
						bs = append(bs, belief{at: t, leader: known.leader, epoch: known.epoch})
					}
				case "node_stopped":
					bs = append(bs, belief{at: t})
				}
			}
		}
		// Records are written in order, but a process's clock starts
		// before its first record: keep them sorted for beliefAt.
		slices.SortStableFunc(bs, func(a, b belief) int { return a.at.Compare(b.at) })
		out[nl.node] = bs
	}
	return out, true
}

// addAvailability judges the run's availability from the nodes' event
// logs and the faults, into r, and draws it as lanes under seq when the
// run's election is drawn. measured is the measured fault, nil when the
// run failed before it was known. A run whose logs were not read, or
// could not be, or which disrupted nothing, is left without.
func (ru *runner) addAvailability(r *results.Run, seq *report.Sequence, measured *fault.Fault) {
	if ru.logs == nil {
		return
	}
	beliefs, ok := logBeliefs(ru.logs)
	if !ok {
		return
	}
	end := ru.ended
	start, holdEnd, ok := disruptionOf(ru.faults.faults, end)
	if !ok || !end.After(start) {
		return
	}
	origin := start
	if measured != nil {
		origin = measured.Time
	}
	in := availabilityInput{nodes: ru.names, beliefs: beliefs, net: newConnectivity(slices.Concat(ru.settleFaults, ru.faults.faults)),
		start: start, end: end, holdEnd: holdEnd, origin: origin}
	a := availabilityOf(in)
	if holdEnd.IsZero() && r.TimeToLeaderFrom != "" {
		// Nothing held: the verdict is the measured election's.
		c := int64(origin.Add(time.Duration(r.TimeToLeaderNS)).Sub(start))
		a.rec.Verdict, a.rec.ConvergedNS = results.VerdictConverged, &c
	}
	un, changes := int64(a.unavailable), a.changes
	r.UnavailableNS, r.LeaderChanges, r.Availability = &un, &changes, &a.rec
	if seq == nil {
		return
	}
	lanes := &report.LeaderLanes{Nodes: ru.names, Spans: a.lanes, Origin: origin, From: start, To: end,
		Marks: []report.LaneMark{{Time: start, Text: "disruption"}}}
	if !holdEnd.IsZero() && holdEnd.Before(end) {
		lanes.Marks = append(lanes.Marks, report.LaneMark{Time: holdEnd, Text: "heal"})
	}
	seq.Lanes = lanes
}
