package bench

import (
	"maps"
	"slices"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/fault"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// judge runs the safety and liveness checks and decides the run: the
// checks' failure first, then the counters', then no measured election in
// the capture.
func (ru *runner) judge(m *measurement) (Run, *runDetail) {
	topo := ru.opts.Topology
	bound := sle2Bound(topo, messageDelay(ru.faults.owd, ru.backend))
	var agreed *lab.Leader
	if ag, ok := ru.tgt.lastAgreement(); ok {
		agreed = &ag
	}
	faults := slices.Concat(ru.settleFaults, ru.faults.faults)
	in := checkInput(m.rep, topo, faults, ru.faults.lastInForce, agreed, m.fault.Time, ru.ended, bound)
	ru.addLogTenures(&in, m.rep, faults, m.fault.Time)
	if m.lossyAtEnd {
		// SLE2 bounds the time from the network being synchronous again;
		// with loss still in force it is not (a lost SYN alone costs a
		// second), so the run must converge, within its wait_leader
		// timeout, but no bound applies.
		in.Bound = 0
	}
	r := ru.r
	r.Checks = Check(in)
	switch kind, reason := r.Checks.Failure(); {
	case kind != "":
		r.FailureKind, r.Failure = kind, reason
	case !r.Counters.OK:
		r.FailureKind, r.Failure = FailCounters, r.Counters.Mismatches[0]
	case m.el == nil:
		r.FailureKind, r.Failure = FailLiveness, "the capture holds no election after the measured fault"
	default:
		r.OK = true
	}
	d := &runDetail{}
	if m.el != nil {
		d.seq = sequenceOf(m.rep, m.el, ru.names, ru.faults.faults, m.fault.Time)
	}
	return r, d
}

// checkInput derives tenures and disruptions from the capture and the
// faults, times relative to the measured fault at origin; end is when the
// scenario ended, lastInForce when its last fault was in force, agreed
// the last agreement a wait_leader saw (nil when none did), and bound the
// SLE2 bound.
func checkInput(rep *capture.Report, topo *topologies.Topology, faults []fault.Fault, lastInForce time.Time, agreed *lab.Leader, origin, end time.Time, bound time.Duration) CheckInput {
	s := newCheckSource(rep, topo, faults, origin, end)
	in := CheckInput{Grace: bound, Bound: bound}
	in.Tenures = s.tenures()
	in.Disruptions = s.disruptions()
	in.Convergence = s.convergence(lastInForce, agreed)
	return in
}

// checkSource is what checkInput derives from.
type checkSource struct {
	rep         *capture.Report
	names       []string // the topology's nodes, lowest ID first
	faults      []fault.Fault
	origin, end time.Time
	// timelines are the timelines of rep's elections, by number; an
	// election whose timeline the report cannot give has none.
	timelines map[int]*capture.Timeline
}

func newCheckSource(rep *capture.Report, topo *topologies.Topology, faults []fault.Fault, origin, end time.Time) *checkSource {
	s := &checkSource{rep: rep, faults: faults, origin: origin, end: end,
		names: make([]string, len(topo.Nodes)), timelines: map[int]*capture.Timeline{}}
	for i, n := range topo.Nodes {
		s.names[i] = n.Name
	}
	for i := range rep.Elections {
		if tl, err := rep.ElectionTimeline(rep.Elections[i].N); err == nil {
			s.timelines[rep.Elections[i].N] = tl
		}
	}
	return s
}

// rel is t relative to the measured fault.
func (s *checkSource) rel(t time.Time) time.Duration { return t.Sub(s.origin) }

// tenures are the leads the frames claim (wireSpans), cut by the faults
// as the logs' are (cutSpans), within the capture until the scenario's
// end.
func (s *checkSource) tenures() []Tenure {
	return spanTenures(cutSpans(s.wireSpans(), s.faults), s.rep.Start, s.end, s.origin)
}

// wireSpans are the leads the frames claim, one per claim in the capture
// (a node's first COORDINATOR or HEARTBEAT of an epoch), from the claim:
// the wire shows a lead no earlier, and a node elected where its frames
// could not reach the wire (a partition's other side, an isolation) may
// have led a while before. The capture's first claim is the stable
// leader's, which led from the capture's start, unless it is a fresh win
// (a COORDINATOR after its own HALTs of the epoch). A lead ends at the
// node's first step-down after its start, or its next claim.
func (s *checkSource) wireSpans() []span {
	steps := s.stepDowns()
	var out []span
	last := map[string]int{} // node -> index in out of its last lead
	for i, c := range s.rep.Claims {
		if prev, ok := last[c.Node]; ok {
			out[prev].end = minTime(out[prev].end, c.Time)
		}
		start := c.Time
		if i == 0 && !s.halted(c.Node, c.Epoch, c.Time) {
			start = s.rep.Start
		}
		out = append(out, span{node: c.Node, epoch: c.Epoch, start: start, end: steps.stop(c.Node, c.Epoch, start, forever)})
		last[c.Node] = len(out) - 1
	}
	return out
}

// halted reports whether node sent a HALT of epoch before t, in the
// elections' timelines.
func (s *checkSource) halted(node string, epoch uint64, t time.Time) bool {
	for _, tl := range s.timelines {
		for _, en := range tl.Entries {
			if en.Type == wire.TypeHalt.String() && en.From == node && en.Epoch == epoch && en.Time.Before(t) {
				return true
			}
		}
	}
	return false
}

// stepDowns are the step-downs of each node on the wire: a leader that
// sends ELECTION or HALT_ACK has left Normal, one that proposes a later
// epoch with HALT no longer leads its own, and one sent a COORDINATOR of a
// later epoch by a higher node follows it.
type stepDowns map[string][]stepDown

type stepDown struct {
	at    time.Time
	epoch uint64 // for HALT and COORDINATOR: the epoch; 0 otherwise
}

// stepDowns finds the step-downs in the elections' timelines.
func (s *checkSource) stepDowns() stepDowns {
	rank := map[string]int{}
	for i, n := range s.names {
		rank[n] = i
	}
	steps := stepDowns{}
	for i := range s.rep.Elections {
		tl := s.timelines[s.rep.Elections[i].N]
		if tl == nil {
			continue
		}
		for _, en := range tl.Entries {
			switch en.Type {
			case wire.TypeElection.String(), wire.TypeHaltAck.String():
				steps[en.From] = append(steps[en.From], stepDown{at: en.Time})
			case wire.TypeHalt.String():
				steps[en.From] = append(steps[en.From], stepDown{at: en.Time, epoch: en.Epoch})
			case wire.TypeCoordinator.String():
				if rf, ok := rank[en.From]; ok && rf > rank[en.To] {
					steps[en.To] = append(steps[en.To], stepDown{at: en.Time, epoch: en.Epoch})
				}
			}
		}
	}
	return steps
}

// stop is when n, leading epoch since from, stepped down: its first
// step-down after from that ends a lead of that epoch, end when none came
// before it.
func (steps stepDowns) stop(n string, epoch uint64, from, end time.Time) time.Time {
	stop := end
	for _, sd := range steps[n] {
		if sd.at.After(from) && sd.at.Before(stop) && (sd.epoch == 0 || sd.epoch > epoch) {
			stop = sd.at
		}
	}
	return stop
}

// disruptions are the partitions and isolations until healed, the
// impairments until cleared, and each node's pause until it is resumed
// (or killed): what a paused node sends comes later than any timeout, and
// once resumed it leads, if it led, until it hears the new leader, as a
// healed partition's leader does. Those never healed, cleared or resumed
// last to the end.
func (s *checkSource) disruptions() []Disruption {
	var out []Disruption
	open := map[string]time.Time{}
	begin := func(k string, t time.Time) {
		if _, ok := open[k]; !ok {
			open[k] = t
		}
	}
	finish := func(k string, t time.Time) {
		if start, ok := open[k]; ok {
			out = append(out, Disruption{Start: s.rel(start), End: s.rel(t), What: k})
			delete(open, k)
		}
	}
	for _, f := range s.faults {
		switch f.Kind {
		case fault.Partition, fault.Isolate:
			begin(string(f.Kind), f.Time)
		case fault.Delay, fault.Loss:
			begin("impair", f.Time)
		case fault.Heal:
			finish(string(fault.Partition), f.Time)
			finish(string(fault.Isolate), f.Time)
		case fault.Unisolate:
			finish(string(fault.Isolate), f.Time)
		case fault.Clear:
			finish("impair", f.Time)
		case fault.Pause:
			for _, n := range f.Nodes {
				begin("pause "+n, f.Time)
			}
		case fault.Resume, fault.Crash, fault.Leave:
			for _, n := range f.Nodes {
				finish("pause "+n, f.Time)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(open)) {
		finish(k, s.end)
	}
	return out
}

// convergence is the time from the last fault being in force (a restart
// of every node takes until the last one listens) to the last agreement,
// when that agreement came after it and is on the highest node it
// covered; nil otherwise, or when the run had no fault.
func (s *checkSource) convergence(lastInForce time.Time, agreed *lab.Leader) *time.Duration {
	if len(s.faults) == 0 || agreed == nil || !agreed.At.After(lastInForce) || len(agreed.Nodes) == 0 {
		return nil
	}
	if agreed.Node != highestOf(agreed.Nodes, s.names) {
		return nil
	}
	// The lab saw the agreement at its poll, which on a loaded host can
	// come long after it; the nodes' states last changed at the last
	// election message on the wire before it (or, with none, the poll is
	// all there is).
	at := agreed.At
	if m := s.lastMessage(lastInForce, agreed.At); !m.IsZero() {
		at = m
	}
	c := at.Sub(lastInForce)
	return &c
}

// lastMessage is the time of the last election message on the wire after
// from and not after to; zero when there is none.
func (s *checkSource) lastMessage(from, to time.Time) time.Time {
	var last time.Time
	for _, tl := range s.timelines {
		for _, en := range tl.Entries {
			if en.Time.After(from) && !en.Time.After(to) && en.Time.After(last) {
				last = en.Time
			}
		}
	}
	return last
}

// highestOf is the highest of nodes in the order of names (ID order); a
// node names lacks ranks with its first.
func highestOf(nodes, names []string) string {
	rank := map[string]int{}
	for i, n := range names {
		rank[n] = i
	}
	highest := ""
	for _, n := range nodes {
		if highest == "" || rank[n] > rank[highest] {
			highest = n
		}
	}
	return highest
}

// sequenceOf draws election el of rep.
func sequenceOf(rep *capture.Report, el *capture.Election, names []string, faults []fault.Fault, origin time.Time) *Sequence {
	tl, err := rep.ElectionTimeline(el.N)
	if err != nil {
		return nil
	}
	seq := &Sequence{Nodes: names, Origin: origin}
	for _, en := range tl.Entries {
		seq.Messages = append(seq.Messages, SequenceMessage{Time: en.Time, From: en.From, To: en.To, Type: en.Type, Epoch: en.Epoch})
	}
	for _, f := range faults {
		if f.Time.Before(origin.Add(-time.Second)) || f.Time.After(el.End) {
			continue
		}
		seq.Faults = append(seq.Faults, FaultMark{Time: f.Time, Text: string(f.Kind), Nodes: f.Nodes})
	}
	return seq
}
