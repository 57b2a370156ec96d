package ring

import (
	"fmt"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// maxForwards bounds how often a node forwards one run: a run passes a
// node at most twice when no candidate is lost, and once more for each
// candidate found down while it travels; past that it is looping (a node
// that never gets it, whatever the cause), and dropping it leaves the
// participants to their run timeout.
const maxForwards = 4

// RunTimeout is how long a node that forwarded a run waits for its ELECTED,
// or for a newer run, before it starts a run of its own, in a cluster of n
// members: (2n+1) x electionTimeout. A run and its ELECTED take at most 3n
// hops, one more for each member found down (a refused or unreachable send
// is resent to the next member), so 4n hops; a hop is one message delay d,
// and the timeouts assume d <= electionTimeout/2, as Bully's wait for an
// ANSWER does. The extra electionTimeout covers the wakeups of a loaded host.
func RunTimeout(n int, electionTimeout time.Duration) time.Duration {
	return time.Duration(2*max(n, 1)+1) * electionTimeout
}

// Elector is the ring election as an election.Machine. It owns no
// goroutine, socket or clock: the caller feeds it messages (Step) and time
// (Tick), and drains what it wants sent, persisted and logged (Drain).
type Elector struct {
	// Its Status is StatusElecting while the node takes part in a run,
	// else StatusNormal; its Promise is the highest run this node started
	// or forwarded (Epoch, ID: its initiator), or (leader's epoch, leader)
	// once it followed one: runs below it are dropped, and ELECTED below
	// its epoch too.
	*election.Core

	forwards int         // how often this node forwarded the run promise names
	skip     uuid.UUID   // a leader the failure detector suspects, left out of the ring
	reason   wire.Reason // why this node's current or last run started
	// sent is the last ring frame sent to each peer, resent past the peer
	// when the transport reports it refused or unreachable.
	sent map[uuid.UUID]wire.Message
}

// NewElector returns an Elector that starts a run at once (Reason boot),
// or, with cfg.HoldBoot, held (election.StatusHeld) until Campaign.
// restored is the State a previous incarnation persisted, or nil on first
// boot; its Promise keeps a restarted node from forwarding a run below one
// it forwarded before.
func NewElector(cfg election.Config, restored *election.State, now time.Duration) (*Elector, error) {
	m := &Elector{sent: make(map[uuid.UUID]wire.Message)}
	core, err := election.NewCore(cfg, restored)
	if err != nil {
		return nil, err
	}
	m.Core = core
	if cfg.HoldBoot {
		// Held: no timer until a run draws it in or Campaign releases it.
		m.Deadline = never
		return m, nil
	}
	m.startRun(now, wire.ReasonBoot)
	return m, nil
}

// never is a Deadline that does not come.
const never = time.Duration(1<<63 - 1)

// Campaign starts a run now, as the failure detector would: for
// ReasonLeaderFailed the current leader is left out of the ring. It does
// nothing while this node takes part in a run: a node calls at most one
// election at a time.
func (m *Elector) Campaign(now time.Duration, reason wire.Reason) {
	if m.Left || m.CurrentStatus == election.StatusElecting {
		return
	}
	m.startRun(now, reason)
}

// Tick fires whatever timer is due at now.
func (m *Elector) Tick(now time.Duration) {
	if m.Left || now < m.Deadline || m.CurrentStatus == election.StatusHeld {
		return
	}
	switch {
	case m.CurrentStatus == election.StatusElecting:
		// The run this node forwarded last was lost: its frame went to a
		// node that stopped, was paused or was cut off, or died at the loop
		// guard. Its own run, newer than any it has seen, replaces it.
		m.startRun(now, wire.ReasonWaitTimeout)
	case m.LeaderID == m.Self:
		m.Broadcast(wire.TypeHeartbeat, 0, m.LeaderEpoch, nil)
		m.Deadline = now + m.Config.HeartbeatInterval
	default:
		m.startRun(now, m.DetectionReason())
	}
}

// Refused tells the Elector that a message it sent to peer was refused:
// nobody listened at the peer's address. A ring frame is then resent to
// the member after peer (see the package doc); anything else is ignored.
func (m *Elector) Refused(now time.Duration, peer uuid.UUID, t wire.Type, epoch uint64) {
	m.Unreachable(now, peer, t, epoch)
}

// Unreachable tells the Elector that a message it sent to peer was dropped
// because the peer could not be reached (a dial that timed out, or a
// backoff after a failed one); it is handled as Refused is.
func (m *Elector) Unreachable(now time.Duration, peer uuid.UUID, t wire.Type, epoch uint64) {
	if m.Left {
		return
	}
	f, ok := m.sent[peer]
	if !ok || f.Type != t || f.Epoch != epoch {
		return
	}
	delete(m.sent, peer)
	m.passOver(now, peer, f)
}

// passOver resends ring frame f, which did not reach peer, to the member
// after peer, if it still means something.
func (m *Elector) passOver(now time.Duration, peer uuid.UUID, f wire.Message) {
	switch f.Type {
	case wire.TypeRingElection:
		initiator, candidate, err := wire.DecodeRingElection(f.Payload)
		if err != nil || m.CurrentStatus != election.StatusElecting || m.Promise != (election.Ballot{Epoch: f.Epoch, ID: initiator}) {
			return // a newer run or a leader replaced it
		}
		if candidate == peer {
			// The candidate is down: this node stands in, and wins when the
			// frame comes back. No node above it is alive on the run's way,
			// or it would have been the candidate.
			candidate = m.Self
		}
		to, ok := m.next(peer, candidate)
		if !ok {
			if candidate == m.Self {
				m.win(now, f.Epoch)
			}
			return
		}
		m.sendRing(to, wire.TypeRingElection, f.Flags, f.Epoch, wire.AppendRingElection(nil, initiator, candidate))
	case wire.TypeElected:
		leader, err := wire.DecodeID(f.Payload)
		if err != nil || leader == peer || m.CurrentStatus != election.StatusNormal || m.LeaderID != leader || m.LeaderEpoch != f.Epoch {
			return // the leader itself is down: its followers' detectors find it
		}
		if to, ok := m.next(peer, leader); ok {
			m.sendRing(to, wire.TypeElected, f.Flags, f.Epoch, f.Payload)
		}
	}
}

// Step processes one received message. msg and its payload may be reused
// by the caller once Step returns.
func (m *Elector) Step(now time.Duration, msg *wire.Message) {
	if m.Left || msg.From == m.Self {
		return
	}
	from := msg.From
	if m.RefuseForeign(now, msg, wire.AlgorithmRing) {
		return
	}
	// A malformed frame changes nothing, not even the epoch.
	var initiator, candidate, leader uuid.UUID
	var err error
	switch msg.Type {
	case wire.TypeRingElection:
		if initiator, candidate, err = wire.DecodeRingElection(msg.Payload); err == nil {
			err = idProblem(initiator, candidate)
		}
	case wire.TypeElected:
		if leader, err = wire.DecodeID(msg.Payload); err == nil {
			err = idProblem(leader)
		}
	}
	if err != nil {
		m.Out.Refuse(now, m.Roster.Member(from), election.CauseMalformed, fmt.Sprintf("%s: %v", msg.Type, err))
		return
	}
	if !m.Roster.Admit(now, msg, m.HighestEpoch, m.Bootstrapping) {
		return
	}
	if from == m.skip {
		m.skip = uuid.Nil // it is alive after all
	}
	if msg.Epoch > m.HighestEpoch {
		m.HighestEpoch = msg.Epoch
		m.Dirty = true
	}
	switch msg.Type {
	case wire.TypeRingElection:
		m.onRun(now, election.Ballot{Epoch: msg.Epoch, ID: initiator}, candidate, msg.Flags)
	case wire.TypeElected:
		m.onElected(now, election.Ballot{Epoch: msg.Epoch, ID: leader}, msg.Flags)
	case wire.TypeHeartbeat:
		m.onHeartbeat(now, from, msg.Epoch)
	case wire.TypeJoin:
		addr, err := wire.DecodeAddr(msg.Payload)
		if err != nil {
			return
		}
		if m.Roster.OnJoin(now, wire.Member{ID: from, Addr: addr}, msg.Flags&wire.FlagWantMembers != 0, m.HighestEpoch) && m.IsLeader() {
			m.Out.Send(from, wire.TypeElected, uint8(m.reason), m.LeaderEpoch, wire.AppendID(nil, m.Self))
		}
	case wire.TypeLeave:
		m.onLeave(now, from)
	case wire.TypeMembers:
		m.Roster.OnMembers(now, from, msg.Payload, m.HighestEpoch)
	}
}

// idProblem says why IDs from a payload cannot name nodes.
func idProblem(ids ...uuid.UUID) error {
	for _, id := range ids {
		if why := election.IDProblem(id); why != "" {
			return fmt.Errorf("%s %s", id, why)
		}
	}
	return nil
}

// onRun handles a RING_ELECTION of run carrying candidate.
func (m *Elector) onRun(now time.Duration, run election.Ballot, candidate uuid.UUID, flags uint8) {
	if run.Epoch <= m.LeaderEpoch {
		// The initiator missed the election of this node's leader (it was
		// down or cut off): tell it, rather than let it time out.
		if m.CurrentStatus == election.StatusNormal && m.LeaderID != uuid.Nil && run.ID != m.Self && m.Roster.Has(run.ID) {
			m.Out.Send(run.ID, wire.TypeElected, uint8(m.reason), m.LeaderEpoch, wire.AppendID(nil, m.LeaderID))
		}
		return
	}
	if run.Less(m.Promise) {
		return // beaten by a run this node forwarded: the multiple-initiator rule
	}
	if m.Promise.Less(run) {
		m.Promise = run
		m.forwards = 0
		m.Dirty = true
	}
	if candidate == m.Self {
		m.win(now, run.Epoch)
		return
	}
	if m.forwards >= maxForwards {
		return
	}
	if election.Less(candidate, m.Self) || !m.Roster.Has(candidate) {
		// A node outside this node's ring cannot be handed the frame, so it
		// counts as down, as a candidate found down does.
		candidate = m.Self
	}
	m.SetStatus(now, election.StatusElecting)
	m.Deadline = now + m.runTimeout()
	m.forward(now, run, candidate, flags)
}

// onElected handles ELECTED naming leader b.ID of epoch b.Epoch.
func (m *Elector) onElected(now time.Duration, b election.Ballot, flags uint8) {
	switch {
	case b.ID == m.Self:
		return // this node's announcement came round, or a stale one
	case !m.Roster.Has(b.ID):
		return
	case election.Less(b.ID, m.Self):
		// A lower leader: the run that elected it missed this node, which
		// is alive and higher, so it starts a run it will win, unless it
		// already takes part in a newer one.
		if m.CurrentStatus != election.StatusElecting || m.Promise.Epoch <= b.Epoch {
			m.startRun(now, wire.ReasonLowerLeader)
		}
		return
	case b.Epoch < m.Promise.Epoch || b.Epoch < m.LeaderEpoch || (b.Epoch == m.LeaderEpoch && election.Less(b.ID, m.LeaderID)):
		return // a newer run or leader replaced it
	case m.CurrentStatus == election.StatusNormal && m.LeaderID == b.ID && m.LeaderEpoch == b.Epoch:
		return // passed here already
	}
	m.follow(now, b)
	if to, ok := m.next(m.Self, b.ID); ok {
		m.sendRing(to, wire.TypeElected, flags, b.Epoch, wire.AppendID(nil, b.ID))
	}
}

func (m *Elector) onHeartbeat(now time.Duration, from uuid.UUID, epoch uint64) {
	if m.CurrentStatus != election.StatusNormal {
		if epoch >= m.Promise.Epoch && epoch >= m.LeaderEpoch {
			// A leader was elected at or after the run this node took part
			// in, and its ELECTED did not come: the run skipped this node
			// (a leader suspected by a node that has not heard from it
			// since it restarted) or lost the frame. The HEARTBEAT stands
			// for the ELECTED.
			m.onElected(now, election.Ballot{Epoch: epoch, ID: from}, uint8(wire.ReasonNone))
		}
		return
	}
	switch {
	case from == m.LeaderID && epoch == m.LeaderEpoch && m.LeaderID != m.Self:
		m.Heard = now
		m.ArmFailureDetector()
	case m.LeaderID == m.Self:
		// Two leaders (a healed partition). A run passes both and every
		// node that follows either, and the highest live node wins it. Both
		// start one: the other's HEARTBEATs may not be getting through (a
		// transport still backing off from a node that was down).
		reason := wire.ReasonLowerLeader
		if election.Less(m.Self, from) {
			reason = wire.ReasonOutvoted
		}
		m.startRun(now, reason)
	}
}

func (m *Elector) onLeave(now time.Duration, from uuid.UUID) {
	m.Roster.OnLeave(now, from)
	if f, ok := m.sent[from]; ok {
		delete(m.sent, from)
		m.passOver(now, from, f) // it may have left with the frame
	}
	if m.CurrentStatus == election.StatusNormal && m.LeaderID == from {
		m.startRun(now, wire.ReasonLeaderLeft)
	}
}

// startRun starts a run of this node under a new epoch, above every run it
// has forwarded, with itself as candidate.
func (m *Elector) startRun(now time.Duration, reason wire.Reason) {
	if reason == wire.ReasonLeaderFailed || reason == wire.ReasonLeaderCrashed || reason == wire.ReasonLeaderLeft {
		m.skip = m.LeaderID
	}
	m.reason = reason
	m.Out.Emit(election.Event{At: now, Kind: election.EventElectionStarted, Reason: reason})
	e := max(m.HighestEpoch, m.Promise.Epoch) + 1
	m.HighestEpoch = e
	m.Promise = election.Ballot{Epoch: e, ID: m.Self}
	m.forwards = 0
	m.Dirty = true
	m.SetStatus(now, election.StatusElecting)
	m.Deadline = now + m.runTimeout()
	m.forward(now, m.Promise, m.Self, uint8(reason))
}

// forward hands the run's frame to this node's successor, or wins when
// there is nobody else to hand it to.
func (m *Elector) forward(now time.Duration, run election.Ballot, candidate uuid.UUID, flags uint8) {
	to, ok := m.next(m.Self, candidate)
	if !ok {
		m.win(now, run.Epoch) // candidate is this node: it is alone
		return
	}
	m.forwards++
	m.sendRing(to, wire.TypeRingElection, flags, run.Epoch, wire.AppendRingElection(nil, run.ID, candidate))
}

// next returns the member clockwise after after (ascending ID, the
// highest wrapping to the lowest), leaving out the leader the failure
// detector suspects, but never target, the frame's candidate or leader. It
// reports false when that comes back round to this node.
func (m *Elector) next(after, target uuid.UUID) (uuid.UUID, bool) {
	ids := m.Roster.IDs()
	i := m.Roster.Position(after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	for range ids {
		id := ids[i%len(ids)]
		i++
		switch {
		case id == m.Self:
			return uuid.Nil, false
		case id == target || id != m.skip:
			return id, true
		}
	}
	return uuid.Nil, false
}

// win makes this node leader of epoch and sends ELECTED round the ring.
func (m *Elector) win(now time.Duration, epoch uint64) {
	m.Bootstrapping = false
	m.LeaderID = m.Self
	m.LeaderEpoch = epoch
	m.Promise = election.Ballot{Epoch: epoch, ID: m.Self}
	m.Dirty = true
	m.SetStatus(now, election.StatusNormal)
	m.Out.Emit(election.Event{At: now, Kind: election.EventElectionWon, Leader: m.Self, Epoch: epoch})
	m.Out.Emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: m.Self, Epoch: epoch})
	if to, ok := m.next(m.Self, m.Self); ok {
		m.sendRing(to, wire.TypeElected, uint8(m.reason), epoch, wire.AppendID(nil, m.Self))
	}
	m.skip = uuid.Nil
	m.Deadline = now + m.Config.HeartbeatInterval
}

// follow accepts b's node as leader of b's epoch.
func (m *Elector) follow(now time.Duration, b election.Ballot) {
	m.Bootstrapping = false
	changed := m.LeaderID != b.ID || m.LeaderEpoch != b.Epoch
	m.LeaderID = b.ID
	m.LeaderEpoch = b.Epoch
	if m.Promise.Less(b) {
		m.Promise = b
	}
	m.Dirty = true
	m.skip = uuid.Nil
	m.SetStatus(now, election.StatusNormal)
	if changed {
		m.Out.Emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: b.ID, Epoch: b.Epoch})
	}
	m.Heard = now
	m.ArmFailureDetector()
}

func (m *Elector) runTimeout() time.Duration {
	return RunTimeout(len(m.Roster.IDs()), m.Config.ElectionTimeout)
}

func (m *Elector) sendRing(to uuid.UUID, t wire.Type, flags uint8, epoch uint64, payload []byte) {
	m.sent[to] = wire.Message{Type: t, Flags: flags, Epoch: epoch, From: m.Self, Payload: payload}
	m.Out.Send(to, t, flags, epoch, payload)
}

var _ election.Machine = (*Elector)(nil)
