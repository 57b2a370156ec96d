//go:build linux

package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// judge runs the safety and liveness checks and decides the run: the
// checks' failure first, then the counters', then no measured election in
// the capture.
func (ru *runner) judge(m *measurement) (results.Run, *runDetail) {
	topo := ru.opts.Topology
	faults := slices.Concat(ru.settleFaults, ru.faults.faults)
	bound := healStretched(clockStretched(sle2Bound(topo, messageDelay(ru.faults.owd, ru.backend)), faults), ru.faults.faults)
	var agreed *lab.Leader
	if ag, ok := ru.tgt.lastAgreement(); ok {
		agreed = &ag
	}
	in := checkInput(m.rep, topo, faults, ru.faults.lastInForce, agreed, m.fault.Time, ru.ended, bound)
	in.Tenures = clipTenures(in.Tenures, ru.tenuresFrom(m.rep).Sub(m.fault.Time))
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
	r.LaterLeaderChanges = laterLeaderChanges(&r, faults, m.fault.Time)
	if m.rep != nil {
		r.FaultChecks = m.rep.FaultChecks
	}
	switch kind, reason := r.Checks.Failure(); {
	case kind != "":
		r.FailureKind, r.Failure = kind, reason
	case !r.Counters.OK:
		r.FailureKind, r.Failure = results.FailCounters, r.Counters.Mismatches[0]
	case results.FaultFailure(r.FaultChecks) != "":
		r.FailureKind, r.Failure = results.FailFault, results.FaultFailure(r.FaultChecks)
		if late := latestDelayer(ru.lab.DelayerStats()); late != "" {
			r.Failure += "; " + late
		}
	case m.el == nil:
		r.FailureKind, r.Failure = results.FailLiveness, "the capture holds no election after the measured fault"
	default:
		r.OK = true
	}
	d := &runDetail{}
	if m.el != nil {
		d.seq = sequenceOf(m.rep, m.el, ru.names, ru.faults.faults, m.fault.Time)
		if markLeaders(d.seq, r, m.el, m.fault.Time, in.Tenures, ru.faults.faults) {
			// The diagram now runs past the election: so do its faults
			// (the heal of the partition it was held by).
			d.seq.Faults = faultMarks(ru.faults.faults, ru.names, m.fault.Time.Add(-time.Second), sequenceEnd(d.seq, m.el.End))
		}
	}
	ru.addAvailability(&r, d.seq, m.fault)
	return r, d
}

// latestDelayer names the node whose NFQUEUE delayer released packets
// latest, with its lateness, "" when none released a delayed packet: next
// to a failed delay check it tells how much of the error the delayer
// itself added on this host (netem.DelayerStats).
func latestDelayer(stats map[string]netem.DelayerStats) string {
	worst := ""
	for _, name := range slices.Sorted(maps.Keys(stats)) {
		if s := stats[name]; s.LateCount > 0 && (worst == "" || s.LateMax > stats[worst].LateMax) {
			worst = name
		}
	}
	if worst == "" {
		return ""
	}
	return worst + "'s " + stats[worst].LateText()
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

// halted reports whether node sent a HALT of epoch before t, or on the
// ring a RING_ELECTION of it (a run it took part in), in the elections'
// timelines.
func (s *checkSource) halted(node string, epoch uint64, t time.Time) bool {
	for _, tl := range s.timelines {
		for _, en := range tl.Entries {
			if (en.Type == wire.TypeHalt.String() || en.Type == wire.TypeRingElection.String()) && en.From == node && en.Epoch == epoch && en.Time.Before(t) {
				return true
			}
		}
	}
	return false
}

// stepDowns are the step-downs of each node on the wire: a leader that
// sends ELECTION or HALT_ACK has left Normal, one that proposes a later
// epoch with HALT no longer leads its own, and one sent a COORDINATOR of a
// later epoch by a higher node follows it. On the ring, one that sends a
// RING_ELECTION of a later epoch is in that run, and one sent an ELECTED
// of a later epoch follows the leader it names.
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
			case wire.TypeHalt.String(), wire.TypeRingElection.String():
				steps[en.From] = append(steps[en.From], stepDown{at: en.Time, epoch: en.Epoch})
			case wire.TypeElected.String():
				steps[en.To] = append(steps[en.To], stepDown{at: en.Time, epoch: en.Epoch})
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

// disruptions are the partitions, cuts and isolations until healed (in
// either mode: a reset severs as a drop does, only sooner), the
// impairments until cleared, each node's pause until it is resumed (or
// killed): what a paused node sends comes later than any timeout, and
// once resumed it leads, if it led, until it hears the new leader, as a
// healed partition's leader does; and each node's clock offset until put
// back (clockDisruptions). A cut is a partition's equal here: a node cut
// from the leader may elect another, and both lead until the heal lets
// them hear each other, even though the network never fell apart. Those
// never healed, cleared, resumed or put back last to the end.
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
		case fault.Partition, fault.Isolate, fault.Cut:
			begin(string(f.Kind), f.Time)
		case fault.Delay, fault.Loss:
			begin("impair", f.Time)
		case fault.Heal:
			finish(string(fault.Partition), f.Time)
			finish(string(fault.Cut), f.Time)
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
	return append(out, s.clockDisruptions()...)
}

// clockDisruptions are the spans in which a clock fault may keep a node
// from its peers. A node's HELLOs carry its wall clock, and a peer refuses
// one too far from its own (node.TCPConfig.MaxClockSkew) or not newer
// than the last it accepted from that node: an offset can cut a node off
// while it lasts, and a clock set back (a negative offset, or a positive
// one removed) has its reconnections refused until it reads past what it
// read before, as long again as the jump back. So each node's span runs
// from a clock fault giving it an offset until one puts it back, extended
// by any jump back, or to the end. A rate alone moves the clock smoothly
// and severs nothing; sle2Bound's caller stretches the bound for it.
func (s *checkSource) clockDisruptions() []Disruption {
	var out []Disruption
	type skewed struct {
		start  time.Time
		offset time.Duration
		// refused is until when a jump back may have reconnections
		// refused.
		refused time.Time
	}
	open := map[string]skewed{}
	finish := func(n string, end time.Time) {
		end = maxTime(end, open[n].refused)
		out = append(out, Disruption{Start: s.rel(open[n].start), End: s.rel(end), What: "clock " + n})
		delete(open, n)
	}
	for _, f := range s.faults {
		if f.Kind != fault.Clock || f.Clock == nil {
			continue
		}
		for _, n := range f.Nodes {
			sk, was := open[n]
			if !was {
				if f.Clock.Offset == 0 {
					continue
				}
				sk.start = f.Time
			}
			if back := sk.offset - f.Clock.Offset; back > 0 {
				sk.refused = maxTime(sk.refused, f.Time.Add(back))
			}
			sk.offset = f.Clock.Offset
			open[n] = sk
			if f.Clock.Offset == 0 {
				finish(n, f.Time)
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(open)) {
		finish(n, s.end)
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

// sequenceOf draws election el of rep, with the faults from a second
// before origin to the diagram's end (the election's, or a retransmission
// that delivered one of its messages later) and those before whose span
// reaches into that time.
func sequenceOf(rep *capture.Report, el *capture.Election, names []string, faults []fault.Fault, origin time.Time) *report.Sequence {
	tl, err := rep.ElectionTimeline(el.N)
	if err != nil {
		return nil
	}
	seq := &report.Sequence{Nodes: names, Origin: origin}
	acksSeen := false
	for _, en := range tl.Entries {
		acksSeen = acksSeen || en.Acked != nil
	}
	for _, en := range tl.Entries {
		seq.Messages = append(seq.Messages, sequenceMessages(en.MessageRef, acksSeen)...)
	}
	seq.Faults = faultMarks(faults, names, origin.Add(-time.Second), sequenceEnd(seq, el.End))
	return seq
}

// sequenceEnd is the last instant seq draws, end at least: its messages'
// receipts and its leader marks.
func sequenceEnd(seq *report.Sequence, end time.Time) time.Time {
	for _, m := range seq.Messages {
		if m.RecvTime.After(end) {
			end = m.RecvTime
		}
	}
	if seq.Settled != nil && seq.Settled.Time.After(end) {
		end = seq.Settled.Time
	}
	for _, c := range seq.LeaderChanges {
		if c.Time.After(end) {
			end = c.Time
		}
	}
	return end
}

// markLeaders marks on seq where the run's leader settled, at the end of
// its time to leader (from the election's trigger when the capture
// measured it, else from the measured fault at origin), and each tenure
// the capture shows beginning after that with another leader or epoch:
// a leader change after settling. A change that begins at or after the
// next fault of faults is marked as that fault's (a heal handing the lead
// back), as the run's count of later changes leaves it out. tenures are
// relative to origin; a tenure a fault split into pieces is marked once,
// at its first. It reports whether it marked anything.
func markLeaders(seq *report.Sequence, r results.Run, el *capture.Election, origin time.Time, tenures []Tenure, faults []fault.Fault) bool {
	if seq == nil || r.TimeToLeaderFrom == "" || r.Leader == "" {
		return false
	}
	from := origin
	if r.TimeToLeaderFrom == results.TimeFromCapture && el != nil {
		from = el.Trigger.Time
	}
	at := from.Add(time.Duration(r.TimeToLeaderNS))
	seq.Settled = &report.LeaderMark{Time: at, Leader: r.Leader, Epoch: r.Epoch}
	next := nextFaultAfter(faults, origin)
	seen := map[Tenure]bool{}
	for _, t := range tenures {
		start := origin.Add(t.Start)
		k := Tenure{Node: t.Node, Epoch: t.Epoch}
		if !start.After(at) || t.Node == r.Leader && t.Epoch == r.Epoch || seen[k] {
			continue
		}
		seen[k] = true
		mark := report.LeaderMark{Time: start, Leader: t.Node, Epoch: t.Epoch}
		if next != nil && !start.Before(next.Time) {
			mark.AfterFault = string(next.Kind)
		}
		seq.LeaderChanges = append(seq.LeaderChanges, mark)
	}
	return true
}

// sequenceMessage draws ref from its send to its receipt. The capture
// timestamps a frame as it enters the switch from the sender's port,
// after any delay the sender's egress adds; the receiver's kernel has it
// microseconds later unless the receiver's input drops it, which its
// acknowledgement rules out. Without the send time (no TCP timestamps)
// the frame is drawn at the capture's time, and is taken as dropped only
// when the analysis saw acknowledgements at all.
func sequenceMessage(ref capture.MessageRef, acksSeen bool) report.SequenceMessage {
	m := report.SequenceMessage{Time: ref.Time, From: ref.From, To: ref.To, Type: ref.Type, Epoch: ref.Epoch}
	if ref.Sent != nil {
		// A clock error cannot make it arrive before it left.
		m.Time = earliest(*ref.Sent, ref.Time)
	} else {
		m.SendUnknown = true
	}
	switch {
	case ref.Acked != nil:
		m.RecvTime = ref.Time
	case ref.Sent != nil || acksSeen:
		m.RecvTime = ref.Time
		m.Dropped = true
	}
	return m
}

// sequenceMessages draws ref as sequenceMessage does, unless its first
// copy on the wire was lost: then each copy is drawn, from its own send,
// a lost one to a drop mark where it was lost (at the receiver's input,
// when it was on the switch) and the retransmission that delivered it
// to its real receipt. A copy whose fate the capture does not know is
// drawn as received when the frame was acknowledged and as dropped when
// not.
func sequenceMessages(ref capture.MessageRef, acksSeen bool) []report.SequenceMessage {
	trs := ref.Transmissions
	if len(trs) == 0 || trs[0].Outcome != capture.OutcomeLost {
		return []report.SequenceMessage{sequenceMessage(ref, acksSeen)}
	}
	var out []report.SequenceMessage
	var firstSent time.Time
	for i, tr := range trs {
		m := report.SequenceMessage{Time: tr.Time, RecvTime: tr.Time, From: ref.From, To: ref.To, Type: ref.Type, Epoch: ref.Epoch, Copy: i}
		if tr.Sent != nil {
			m.Time = earliest(*tr.Sent, tr.Time)
		} else {
			m.SendUnknown = true
		}
		if i == 0 {
			firstSent = m.Time
		} else {
			m.FirstSent = firstSent
		}
		switch {
		case tr.Outcome == capture.OutcomeLost:
			m.Dropped, m.Resent, m.CutDrop = true, i+1 < len(trs), tr.Cut
		case tr.Outcome == capture.OutcomeUndecided && ref.Acked == nil:
			m.Dropped = true
		}
		out = append(out, m)
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// faultMarks are the marks of the faults from from to to, and of those
// before from that begin a span still open at from: a partition healed
// later, a node crashed and not yet restarted.
func faultMarks(faults []fault.Fault, names []string, from, to time.Time) []report.FaultMark {
	var all []report.FaultMark
	for _, f := range faults {
		if !f.Time.After(to) {
			all = append(all, report.FaultMark{Kind: string(f.Kind), Time: f.Time, Text: faultText(f, names), Nodes: f.Nodes, Groups: f.Groups,
				Links: f.Links, Skewed: f.Clock != nil && *f.Clock != (fault.ClockSkew{})})
		}
	}
	reaching := map[int]bool{}
	for _, s := range report.FaultSpans(all) {
		if s.End.IsZero() || !s.End.Before(from) {
			reaching[s.Opener] = true
		}
	}
	var marks []report.FaultMark
	for i, m := range all {
		if !m.Time.Before(from) || reaching[i] {
			marks = append(marks, m)
		}
	}
	return marks
}

// faultText is a fault as the diagram labels it: its kind, the nodes it
// struck (a partition's sides, a cut's pairs), what it impairs, a clock's
// skew and a reset's mode.
func faultText(f fault.Fault, names []string) string {
	s := string(f.Kind)
	if len(f.Links) > 0 {
		s += " " + linkList(f.Links, f.OneWay)
	} else if len(f.Groups) > 0 {
		sides := make([]string, len(f.Groups))
		for i, g := range f.Groups {
			sides[i] = nodeList(g, names)
		}
		sep := " | "
		if f.OneWay {
			sep = " ↛ "
		}
		s += " " + strings.Join(sides, sep)
	} else if len(f.Nodes) > 0 {
		s += " " + nodeList(f.Nodes, names)
	}
	if len(f.Peers) > 0 {
		s += " to " + nodeList(f.Peers, names)
	}
	if f.Impair != nil && !f.Impair.IsZero() {
		s += " (" + f.Impair.String() + ")"
	}
	if f.Clock != nil {
		if *f.Clock == (fault.ClockSkew{}) {
			s += " (back on the host's clock)"
		} else {
			s += " (" + f.Clock.String() + ")"
		}
	}
	if f.Mode == fault.ModeReset {
		s += " (reset)"
	}
	return s
}

// linkList names a cut's pairs briefly: up to four, or the first two and
// the count.
func linkList(links [][2]string, oneWay bool) string {
	sep := "-"
	if oneWay {
		sep = "↛"
	}
	var parts []string
	for i, l := range links {
		if i == 2 && len(links) > 4 {
			parts = append(parts, fmt.Sprintf("… (%d pairs)", len(links)))
			break
		}
		parts = append(parts, l[0]+sep+l[1])
	}
	return strings.Join(parts, ",")
}

// nodeList names nodes briefly: all of them, up to four by name, or the
// first and last of more with their count.
func nodeList(nodes, names []string) string {
	switch {
	case len(nodes) > 1 && len(nodes) == len(names) && sameSet(nodes, names):
		return fmt.Sprintf("all %d nodes", len(nodes))
	case len(nodes) <= 4:
		return strings.Join(nodes, ",")
	}
	return fmt.Sprintf("%s,%s…%s (%d)", nodes[0], nodes[1], nodes[len(nodes)-1], len(nodes))
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
