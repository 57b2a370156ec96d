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
	cfg    election.Config
	id     uuid.UUID
	roster *election.Roster
	out    *election.Outbox

	status election.Status // StatusElecting while taking part in a run, else StatusNormal
	epoch  uint64          // highest epoch seen
	// promise is the highest run this node started or forwarded (Epoch,
	// ID: its initiator), or (leader's epoch, leader) once it followed one:
	// runs below it are dropped, and ELECTED below its epoch too.
	promise     election.Ballot
	leader      uuid.UUID
	leaderEpoch uint64

	forwards int         // how often this node forwarded the run promise names
	skip     uuid.UUID   // a leader the failure detector suspects, left out of the ring
	reason   wire.Reason // why this node's current or last run started
	deadline time.Duration
	heard    time.Duration // Normal follower: when the leader last showed it is alive
	left     bool
	// bootstrapping: a first start that has not yet followed or won a
	// leader; it takes any epoch up to election.MaxEpoch.
	bootstrapping bool
	// sent is the last ring frame sent to each peer, resent past the peer
	// when the transport reports it refused or unreachable.
	sent  map[uuid.UUID]wire.Message
	dirty bool
}

// NewElector returns an Elector that starts a run at once (Reason boot).
// restored is the State a previous incarnation persisted, or nil on first
// boot; its Promise keeps a restarted node from forwarding a run below one
// it forwarded before.
func NewElector(cfg election.Config, restored *election.State, now time.Duration) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := election.CheckRestored(restored); err != nil {
		return nil, err
	}
	m := &Elector{
		cfg:           cfg,
		id:            cfg.ID,
		out:           election.NewOutbox(cfg.ID),
		bootstrapping: restored == nil,
		sent:          make(map[uuid.UUID]wire.Message),
	}
	m.roster = election.NewRoster(cfg, restored, m.out)
	m.roster.OnChange = func() {
		m.dirty = true
		if m.status == election.StatusNormal && m.leader != m.id && m.leader != uuid.Nil {
			m.armDetector()
		}
	}
	if restored != nil {
		m.epoch = restored.Epoch
		m.promise = restored.Promise
		m.leader = restored.Leader
		m.leaderEpoch = restored.LeaderEpoch
	}
	m.dirty = true
	if cfg.Join || (restored != nil && restored.Left) {
		m.roster.Join(m.epoch)
	}
	m.startRun(now, wire.ReasonBoot)
	return m, nil
}

// ID returns the node's ID.
func (m *Elector) ID() uuid.UUID { return m.id }

// Status returns StatusElecting while the node takes part in a run, and
// StatusNormal otherwise.
func (m *Elector) Status() election.Status { return m.status }

// Leader returns the leader this node last accepted and its epoch.
func (m *Elector) Leader() (uuid.UUID, uint64) { return m.leader, m.leaderEpoch }

// Epoch returns the highest epoch this node has seen.
func (m *Elector) Epoch() uint64 { return m.epoch }

// IsLeader reports whether this node is a Normal leader.
func (m *Elector) IsLeader() bool { return m.status == election.StatusNormal && m.leader == m.id }

// Members returns every known member, self included, in ID order.
func (m *Elector) Members() []wire.Member { return m.roster.Members() }

// Sent returns how many messages of type t the Elector has emitted.
func (m *Elector) Sent(t wire.Type) uint64 { return m.out.Sent(t) }

// NextDeadline returns the clock reading at which Tick next has work to do.
func (m *Elector) NextDeadline() time.Duration { return m.deadline }

// State returns a copy of what the node persists.
func (m *Elector) State() election.State {
	return election.State{
		Epoch:       m.epoch,
		Promise:     m.promise,
		Leader:      m.leader,
		LeaderEpoch: m.leaderEpoch,
		Members:     m.Members(),
		Left:        m.left,
	}
}

// Drain returns and clears what the Elector produced since the last Drain.
func (m *Elector) Drain() election.Output {
	var st *election.State
	if m.dirty {
		s := m.State()
		st = &s
		m.dirty = false
	}
	return m.out.Take(st)
}

// Campaign starts a run now, as the failure detector would: for
// ReasonLeaderFailed the current leader is left out of the ring. It does
// nothing while this node takes part in a run: a node calls at most one
// election at a time.
func (m *Elector) Campaign(now time.Duration, reason wire.Reason) {
	if m.left || m.status == election.StatusElecting {
		return
	}
	m.startRun(now, reason)
}

// Leave announces with LEAVE that this node leaves the cluster for good. The
// Elector ignores all input afterwards.
func (m *Elector) Leave(now time.Duration) {
	if m.left {
		return
	}
	for _, id := range m.roster.Others() {
		m.out.Send(id, wire.TypeLeave, 0, m.epoch, nil)
	}
	m.left = true
	m.dirty = true
	m.deadline = 1<<63 - 1
}

// Tick fires whatever timer is due at now.
func (m *Elector) Tick(now time.Duration) {
	if m.left || now < m.deadline {
		return
	}
	switch {
	case m.status == election.StatusElecting:
		// The run this node forwarded last was lost: its frame went to a
		// node that stopped, was paused or was cut off, or died at the loop
		// guard. Its own run, newer than any it has seen, replaces it.
		m.startRun(now, wire.ReasonWaitTimeout)
	case m.leader == m.id:
		m.broadcast(wire.TypeHeartbeat, 0, m.leaderEpoch)
		m.deadline = now + m.cfg.HeartbeatInterval
	default:
		m.startRun(now, wire.ReasonLeaderFailed)
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
	if m.left {
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
		if err != nil || m.status != election.StatusElecting || m.promise != (election.Ballot{Epoch: f.Epoch, ID: initiator}) {
			return // a newer run or a leader replaced it
		}
		if candidate == peer {
			// The candidate is down: this node stands in, and wins when the
			// frame comes back. No node above it is alive on the run's way,
			// or it would have been the candidate.
			candidate = m.id
		}
		to, ok := m.next(peer, candidate)
		if !ok {
			if candidate == m.id {
				m.win(now, f.Epoch)
			}
			return
		}
		m.sendRing(to, wire.TypeRingElection, f.Flags, f.Epoch, wire.AppendRingElection(nil, initiator, candidate))
	case wire.TypeElected:
		leader, err := wire.DecodeID(f.Payload)
		if err != nil || leader == peer || m.status != election.StatusNormal || m.leader != leader || m.leaderEpoch != f.Epoch {
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
	if m.left || msg.From == m.id {
		return
	}
	from := msg.From
	if msg.Type.Algorithm() == wire.AlgorithmBully {
		m.out.Refuse(now, m.roster.Member(from), election.CauseAlgorithm,
			fmt.Sprintf("%s from %s: this node runs %s", msg.Type, from, wire.AlgorithmRing))
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
		m.out.Refuse(now, m.roster.Member(from), election.CauseMalformed, fmt.Sprintf("%s: %v", msg.Type, err))
		return
	}
	if !m.roster.Admit(now, msg, m.epoch, m.bootstrapping) {
		return
	}
	if from == m.skip {
		m.skip = uuid.Nil // it is alive after all
	}
	if msg.Epoch > m.epoch {
		m.epoch = msg.Epoch
		m.dirty = true
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
		if m.roster.OnJoin(now, wire.Member{ID: from, Addr: addr}, msg.Flags&wire.FlagWantMembers != 0, m.epoch) && m.IsLeader() {
			m.out.Send(from, wire.TypeElected, uint8(m.reason), m.leaderEpoch, wire.AppendID(nil, m.id))
		}
	case wire.TypeLeave:
		m.onLeave(now, from)
	case wire.TypeMembers:
		m.roster.OnMembers(now, from, msg.Payload, m.epoch)
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
	if run.Epoch <= m.leaderEpoch {
		// The initiator missed the election of this node's leader (it was
		// down or cut off): tell it, rather than let it time out.
		if m.status == election.StatusNormal && m.leader != uuid.Nil && run.ID != m.id && m.roster.Has(run.ID) {
			m.out.Send(run.ID, wire.TypeElected, uint8(m.reason), m.leaderEpoch, wire.AppendID(nil, m.leader))
		}
		return
	}
	if run.Less(m.promise) {
		return // beaten by a run this node forwarded: the multiple-initiator rule
	}
	if m.promise.Less(run) {
		m.promise = run
		m.forwards = 0
		m.dirty = true
	}
	if candidate == m.id {
		m.win(now, run.Epoch)
		return
	}
	if m.forwards >= maxForwards {
		return
	}
	if election.Less(candidate, m.id) || !m.roster.Has(candidate) {
		// A node outside this node's ring cannot be handed the frame, so it
		// counts as down, as a candidate found down does.
		candidate = m.id
	}
	m.setStatus(now, election.StatusElecting)
	m.deadline = now + m.runTimeout()
	m.forward(now, run, candidate, flags)
}

// onElected handles ELECTED naming leader b.ID of epoch b.Epoch.
func (m *Elector) onElected(now time.Duration, b election.Ballot, flags uint8) {
	switch {
	case b.ID == m.id:
		return // this node's announcement came round, or a stale one
	case !m.roster.Has(b.ID):
		return
	case election.Less(b.ID, m.id):
		// A lower leader: the run that elected it missed this node, which
		// is alive and higher, so it starts a run it will win, unless it
		// already takes part in a newer one.
		if m.status != election.StatusElecting || m.promise.Epoch <= b.Epoch {
			m.startRun(now, wire.ReasonLowerLeader)
		}
		return
	case b.Epoch < m.promise.Epoch || b.Epoch < m.leaderEpoch || (b.Epoch == m.leaderEpoch && election.Less(b.ID, m.leader)):
		return // a newer run or leader replaced it
	case m.status == election.StatusNormal && m.leader == b.ID && m.leaderEpoch == b.Epoch:
		return // passed here already
	}
	m.follow(now, b)
	if to, ok := m.next(m.id, b.ID); ok {
		m.sendRing(to, wire.TypeElected, flags, b.Epoch, wire.AppendID(nil, b.ID))
	}
}

func (m *Elector) onHeartbeat(now time.Duration, from uuid.UUID, epoch uint64) {
	if m.status != election.StatusNormal {
		if epoch >= m.promise.Epoch && epoch >= m.leaderEpoch {
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
	case from == m.leader && epoch == m.leaderEpoch && m.leader != m.id:
		m.heard = now
		m.armDetector()
	case m.leader == m.id:
		// Two leaders (a healed partition). A run passes both and every
		// node that follows either, and the highest live node wins it. Both
		// start one: the other's HEARTBEATs may not be getting through (a
		// transport still backing off from a node that was down).
		reason := wire.ReasonLowerLeader
		if election.Less(m.id, from) {
			reason = wire.ReasonOutvoted
		}
		m.startRun(now, reason)
	}
}

func (m *Elector) onLeave(now time.Duration, from uuid.UUID) {
	m.roster.OnLeave(now, from)
	if f, ok := m.sent[from]; ok {
		delete(m.sent, from)
		m.passOver(now, from, f) // it may have left with the frame
	}
	if m.status == election.StatusNormal && m.leader == from {
		m.startRun(now, wire.ReasonLeaderLeft)
	}
}

// startRun starts a run of this node under a new epoch, above every run it
// has forwarded, with itself as candidate.
func (m *Elector) startRun(now time.Duration, reason wire.Reason) {
	if reason == wire.ReasonLeaderFailed || reason == wire.ReasonLeaderLeft {
		m.skip = m.leader
	}
	m.reason = reason
	m.emit(election.Event{At: now, Kind: election.EventElectionStarted, Reason: reason})
	e := max(m.epoch, m.promise.Epoch) + 1
	m.epoch = e
	m.promise = election.Ballot{Epoch: e, ID: m.id}
	m.forwards = 0
	m.dirty = true
	m.setStatus(now, election.StatusElecting)
	m.deadline = now + m.runTimeout()
	m.forward(now, m.promise, m.id, uint8(reason))
}

// forward hands the run's frame to this node's successor, or wins when
// there is nobody else to hand it to.
func (m *Elector) forward(now time.Duration, run election.Ballot, candidate uuid.UUID, flags uint8) {
	to, ok := m.next(m.id, candidate)
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
	ids := m.roster.IDs()
	i := m.roster.Position(after)
	if i < len(ids) && ids[i] == after {
		i++
	}
	for range ids {
		id := ids[i%len(ids)]
		i++
		switch {
		case id == m.id:
			return uuid.Nil, false
		case id == target || id != m.skip:
			return id, true
		}
	}
	return uuid.Nil, false
}

// win makes this node leader of epoch and sends ELECTED round the ring.
func (m *Elector) win(now time.Duration, epoch uint64) {
	m.bootstrapping = false
	m.leader = m.id
	m.leaderEpoch = epoch
	m.promise = election.Ballot{Epoch: epoch, ID: m.id}
	m.dirty = true
	m.setStatus(now, election.StatusNormal)
	m.emit(election.Event{At: now, Kind: election.EventElectionWon, Leader: m.id, Epoch: epoch})
	m.emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: m.id, Epoch: epoch})
	if to, ok := m.next(m.id, m.id); ok {
		m.sendRing(to, wire.TypeElected, uint8(m.reason), epoch, wire.AppendID(nil, m.id))
	}
	m.skip = uuid.Nil
	m.deadline = now + m.cfg.HeartbeatInterval
}

// follow accepts b's node as leader of b's epoch.
func (m *Elector) follow(now time.Duration, b election.Ballot) {
	m.bootstrapping = false
	changed := m.leader != b.ID || m.leaderEpoch != b.Epoch
	m.leader = b.ID
	m.leaderEpoch = b.Epoch
	if m.promise.Less(b) {
		m.promise = b
	}
	m.dirty = true
	m.skip = uuid.Nil
	m.setStatus(now, election.StatusNormal)
	if changed {
		m.emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: b.ID, Epoch: b.Epoch})
	}
	m.heard = now
	m.armDetector()
}

// armDetector sets a Normal follower's failure deadline: FailureTimeout
// after its leader last showed it is alive, plus the stagger of its rank
// below the leader, as Bully's: the highest survivor of a leader crash
// detects first, and its run reaches the others before their deadlines.
func (m *Elector) armDetector() {
	m.deadline = m.heard + m.cfg.FailureTimeout + m.roster.StaggerBelow(m.leader)
}

func (m *Elector) runTimeout() time.Duration {
	return RunTimeout(len(m.roster.IDs()), m.cfg.ElectionTimeout)
}

func (m *Elector) setStatus(now time.Duration, s election.Status) {
	if m.status == s {
		return
	}
	m.emit(election.Event{At: now, Kind: election.EventStatus, From: m.status, To: s})
	m.status = s
}

func (m *Elector) emit(e election.Event) { m.out.Emit(e) }

func (m *Elector) sendRing(to uuid.UUID, t wire.Type, flags uint8, epoch uint64, payload []byte) {
	m.sent[to] = wire.Message{Type: t, Flags: flags, Epoch: epoch, From: m.id, Payload: payload}
	m.out.Send(to, t, flags, epoch, payload)
}

func (m *Elector) broadcast(t wire.Type, flags uint8, epoch uint64) {
	for _, id := range m.roster.Others() {
		m.out.Send(id, t, flags, epoch, nil)
	}
}

var _ election.Machine = (*Elector)(nil)
