package bully

import (
	"fmt"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Elector is the Bully algorithm as an election.Machine. It owns no
// goroutine, socket or clock: the caller feeds it messages (Step) and time
// (Tick), and drains what it wants sent, persisted and logged (Drain).
// Every method takes the caller's monotonic clock reading; the Elector only
// compares these readings, so any origin works.
type Elector struct {
	cfg election.Config
	id  uuid.UUID

	roster *election.Roster
	out    *election.Outbox

	status      election.Status
	epoch       uint64 // highest epoch seen
	promise     election.Ballot
	leader      uuid.UUID
	leaderEpoch uint64

	proposal election.Ballot    // election.StatusHalting: the ballot being proposed
	pending  map[uuid.UUID]bool // election.StatusHalting: lower members yet to HALT_ACK
	skip     uuid.UUID          // a suspected leader left out of this election's ELECTIONs
	reason   wire.Reason        // why the current or last election started; sent in its frames
	deadline time.Duration      // when the current status times out, or the next heartbeat is due
	heard    time.Duration      // election.StatusNormal follower: when the leader last showed it is alive
	left     bool               // Leave was called: the machine is inert
	// bootstrapping: a first start that has not yet followed or won a
	// leader; it takes any epoch up to election.MaxEpoch (see election.EpochWindow).
	bootstrapping bool
	dirty         bool        // persisted fields changed since the last Drain
	scratch       []uuid.UUID // reused by higher
}

// NewElector returns an Elector that starts an election at once (Reason boot).
// restored is the State a previous incarnation persisted, or nil on first
// boot; a first boot also announces the node with JOIN.
//
// Cold start: of the two options in the design notes, every node starts as a
// non-coordinator and elects, because starting as coordinators would have
// every node Normal with itself as leader, breaking SLE1 the moment two nodes
// boot. The election timeout plays the role of the boot wait.
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
	}
	m.roster = election.NewRoster(cfg, restored, m.out)
	m.roster.OnChange = func() {
		m.dirty = true
		m.rearmOnRankChange()
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
	m.startElection(now, wire.ReasonBoot)
	return m, nil
}

// ID returns the node's ID.
func (m *Elector) ID() uuid.UUID { return m.id }

// Status returns the node's current status.
func (m *Elector) Status() election.Status { return m.status }

// Leader returns the leader this node last accepted and its epoch. It is
// significant only while Status is election.StatusNormal.
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

// Refused tells the Elector that a message it sent to peer was refused:
// nobody listened at the peer's address (TCP answered the connection with a
// reset), so the peer's process was not running. A HALT of the current
// proposal so refused counts the peer as failed at once, as the end of
// ElectionTimeout would: it neither acknowledged nor rejected this ballot,
// and when it starts again it elects on its own. Anything else is ignored;
// silence, as in a partition, still takes the timeout.
func (m *Elector) Refused(now time.Duration, peer uuid.UUID, t wire.Type, epoch uint64) {
	if m.left || t != wire.TypeHalt || m.status != election.StatusHalting || epoch != m.proposal.Epoch || !m.pending[peer] {
		return
	}
	delete(m.pending, peer)
	if len(m.pending) == 0 {
		m.win(now)
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

// Campaign starts an election now, as the failure detector would: for
// ReasonLeaderFailed the current leader is left out of the ELECTIONs. It does
// nothing while this node is already electing or halting.
func (m *Elector) Campaign(now time.Duration, reason wire.Reason) {
	if m.left || m.status == election.StatusElecting || m.status == election.StatusHalting {
		return
	}
	m.startElection(now, reason)
}

// Leave announces with LEAVE that this node leaves the cluster for good. The
// Elector ignores all input afterwards.
func (m *Elector) Leave(now time.Duration) {
	if m.left {
		return
	}
	for _, id := range m.roster.Others() {
		m.send(id, wire.TypeLeave, 0, m.epoch, nil)
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
	switch m.status {
	case election.StatusElecting:
		// Nobody above answered within the election timeout: they are all
		// down, so this node is the highest alive and halts the ones below.
		m.startHalting(now, m.epoch+1)
	case election.StatusHalting:
		// Lower nodes that did not acknowledge in time count as failed.
		m.win(now)
	case election.StatusWaiting:
		m.startElection(now, wire.ReasonWaitTimeout)
	case election.StatusNormal:
		if m.leader == m.id {
			m.broadcast(wire.TypeHeartbeat, 0, m.leaderEpoch, nil)
			m.deadline = now + m.cfg.HeartbeatInterval
		} else {
			m.startElection(now, wire.ReasonLeaderFailed)
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
	if msg.Type.Algorithm() == wire.AlgorithmRing {
		m.out.Refuse(now, m.roster.Member(from), election.CauseAlgorithm,
			fmt.Sprintf("%s from %s: this node runs %s", msg.Type, from, wire.AlgorithmBully))
		return
	}
	if !m.roster.Admit(now, msg, m.epoch, m.bootstrapping) {
		return
	}
	if msg.Epoch > m.epoch && msg.Type != wire.TypeReject {
		m.epoch = msg.Epoch
		m.dirty = true
	}
	switch msg.Type {
	case wire.TypeElection:
		m.onElection(now, from)
	case wire.TypeAnswer:
		if m.status == election.StatusElecting && election.Less(m.id, from) {
			m.becomeWaiting(now, from)
		}
	case wire.TypeHalt:
		m.onHalt(now, election.Ballot{Epoch: msg.Epoch, ID: from}, msg.Reason())
	case wire.TypeHaltAck:
		if m.status == election.StatusHalting && msg.Epoch == m.proposal.Epoch && m.pending[from] {
			delete(m.pending, from)
			if len(m.pending) == 0 {
				m.win(now)
			}
		}
	case wire.TypeReject:
		id, err := wire.DecodeID(msg.Payload)
		if err != nil {
			return
		}
		m.onReject(now, election.Ballot{Epoch: msg.Epoch, ID: id})
	case wire.TypeCoordinator:
		m.onCoordinator(now, election.Ballot{Epoch: msg.Epoch, ID: from})
	case wire.TypeHeartbeat:
		m.onHeartbeat(now, from, msg.Epoch)
	case wire.TypeJoin:
		addr, err := wire.DecodeAddr(msg.Payload)
		if err != nil {
			return
		}
		if m.roster.OnJoin(now, wire.Member{ID: from, Addr: addr}, msg.Flags&wire.FlagWantMembers != 0, m.epoch) && m.IsLeader() {
			m.send(from, wire.TypeCoordinator, uint8(m.reason), m.leaderEpoch, nil)
		}
	case wire.TypeLeave:
		m.onLeave(now, from)
	case wire.TypeMembers:
		m.roster.OnMembers(now, from, msg.Payload, m.epoch)
	}
}

func (m *Elector) onElection(now time.Duration, from uuid.UUID) {
	if !election.Less(from, m.id) {
		return // ELECTION goes only to higher nodes; a higher sender is confused, not a threat
	}
	m.send(from, wire.TypeAnswer, 0, m.epoch, nil)
	if m.status != election.StatusNormal {
		// Already electing, halting or waiting for a higher node: the answer
		// is all the lower node needs.
		return
	}
	if m.leader == m.id {
		// A live leader re-asserts itself to the node that suspected it
		// instead of starting a new round: its epoch has not ended.
		m.send(from, wire.TypeCoordinator, uint8(m.reason), m.leaderEpoch, nil)
		return
	}
	m.startElection(now, wire.ReasonBullied)
}

func (m *Elector) onHalt(now time.Duration, b election.Ballot, reason wire.Reason) {
	if election.Less(b.ID, m.id) {
		// A lower node believes it is the highest alive: bully it.
		if m.status == election.StatusNormal || m.status == election.StatusWaiting {
			m.startElection(now, wire.ReasonBullied)
		}
		return
	}
	if m.promise.Less(b) && b.Epoch > m.leaderEpoch {
		m.promise = b
		m.dirty = true
		m.becomeWaiting(now, b.ID)
		m.send(b.ID, wire.TypeHaltAck, 0, b.Epoch, nil)
		return
	}
	m.reject(b.ID)
}

// onReject handles a REJECT naming ballot b that the sender promised.
func (m *Elector) onReject(now time.Duration, b election.Ballot) {
	switch {
	case m.status == election.StatusHalting:
		if b.Epoch < m.proposal.Epoch {
			return // answers an earlier proposal that the current one already beats
		}
		if b.Epoch > m.epoch {
			m.epoch = b.Epoch
			m.dirty = true
		}
		if election.Less(m.id, b.ID) && m.proposal.Less(b) {
			// A higher node holds a newer ballot. Competing with it would
			// bump epochs back and forth; ask it instead: an ANSWER means it
			// is alive and this node waits, silence means it is gone.
			m.startElection(now, wire.ReasonOutvoted)
			return
		}
		m.startHalting(now, m.epoch+1)
	case m.status == election.StatusNormal && m.leader == m.id:
		if b.Epoch > m.epoch {
			m.epoch = b.Epoch
			m.dirty = true
		}
		if (election.Ballot{Epoch: m.leaderEpoch, ID: m.id}).Less(b) {
			// Some node promised a newer ballot. If its owner is higher and
			// alive, the ELECTION finds it and this node waits; otherwise this
			// node takes the cluster back under a still newer epoch.
			m.startElection(now, wire.ReasonOutvoted)
		}
	default:
		if b.Epoch > m.epoch {
			m.epoch = b.Epoch
			m.dirty = true
		}
	}
}

func (m *Elector) onCoordinator(now time.Duration, b election.Ballot) {
	if election.Less(b.ID, m.id) {
		// "A node that hears COORDINATOR from a lower ID bullies it."
		if m.status == election.StatusNormal || m.status == election.StatusWaiting {
			m.startElection(now, wire.ReasonLowerLeader)
		}
		return
	}
	if b.Less(m.promise) || b.Epoch < m.leaderEpoch {
		m.reject(b.ID)
		return
	}
	m.follow(now, b)
}

func (m *Elector) onHeartbeat(now time.Duration, from uuid.UUID, epoch uint64) {
	if m.status != election.StatusNormal {
		return
	}
	switch {
	case from == m.leader && epoch == m.leaderEpoch && m.leader != m.id:
		m.heard = now
		m.armDetector()
	case m.leader == m.id && election.Less(from, m.id):
		// Two leaders (a healed partition): the higher one takes over under
		// a new epoch; the lower one waits to be halted.
		m.startElection(now, wire.ReasonLowerLeader)
	case m.leader == m.id:
		// Two leaders, and this is the lower one. Its own HEARTBEATs may
		// not reach the higher one (a transport backing off from it since
		// before it came up drops them for up to a second), so it does
		// not wait to be halted: the HEARTBEAT claims the higher node's
		// epoch as its COORDINATOR did, and is taken or rejected by the
		// same rule.
		m.onCoordinator(now, election.Ballot{Epoch: epoch, ID: from})
	}
}

func (m *Elector) onLeave(now time.Duration, from uuid.UUID) {
	m.roster.OnLeave(now, from)
	switch m.status {
	case election.StatusHalting:
		if m.pending[from] {
			delete(m.pending, from)
			if len(m.pending) == 0 {
				m.win(now)
			}
		}
	case election.StatusNormal:
		if m.leader == from {
			m.startElection(now, wire.ReasonLeaderLeft)
		}
	}
}

// startElection sends ELECTION to every higher member (but a suspected
// leader) and waits for an ANSWER; with nobody above, it halts at once.
func (m *Elector) startElection(now time.Duration, reason wire.Reason) {
	m.skip = uuid.Nil
	switch {
	case reason == wire.ReasonLeaderFailed || reason == wire.ReasonLeaderLeft:
		m.skip = m.leader
	case reason == wire.ReasonBullied && m.status == election.StatusNormal && m.leader != m.id &&
		now-m.heard > 2*m.cfg.HeartbeatInterval:
		// A lower node suspects the leader and this node has missed a
		// heartbeat too: asking the leader would likely cost a whole
		// ElectionTimeout waiting on a dead node.
		m.skip = m.leader
	}
	m.reason = reason
	m.emit(election.Event{At: now, Kind: election.EventElectionStarted, Reason: reason})
	higher := m.higher()
	if len(higher) == 0 {
		m.startHalting(now, max(m.epoch, m.promise.Epoch)+1)
		return
	}
	m.setStatus(now, election.StatusElecting)
	for _, id := range higher {
		m.send(id, wire.TypeElection, uint8(reason), m.epoch, nil)
	}
	m.deadline = now + m.cfg.ElectionTimeout
}

// startHalting proposes ballot (epoch, self) to every lower member.
func (m *Elector) startHalting(now time.Duration, epoch uint64) {
	epoch = max(epoch, m.epoch+1, m.promise.Epoch+1)
	m.epoch = epoch
	m.proposal = election.Ballot{Epoch: epoch, ID: m.id}
	m.promise = m.proposal
	m.dirty = true
	m.setStatus(now, election.StatusHalting)
	m.pending = make(map[uuid.UUID]bool)
	// Highest first: the nearer a lower node ranks, the sooner its
	// staggered detector fires, so the sooner it needs its HALT.
	ids := m.roster.IDs()
	for i := m.roster.Position(m.id) - 1; i >= 0; i-- {
		id := ids[i]
		m.pending[id] = true
		m.send(id, wire.TypeHalt, uint8(m.reason), epoch, nil)
	}
	m.deadline = now + m.cfg.ElectionTimeout
	if len(m.pending) == 0 {
		m.win(now)
	}
}

// win makes this node leader of its proposed epoch and tells everyone.
func (m *Elector) win(now time.Duration) {
	m.bootstrapping = false
	m.pending = nil
	m.leader = m.id
	m.leaderEpoch = m.proposal.Epoch
	m.dirty = true
	m.setStatus(now, election.StatusNormal)
	m.emit(election.Event{At: now, Kind: election.EventElectionWon, Leader: m.id, Epoch: m.leaderEpoch})
	m.emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: m.id, Epoch: m.leaderEpoch})
	m.broadcast(wire.TypeCoordinator, uint8(m.reason), m.leaderEpoch, nil)
	m.deadline = now + m.cfg.HeartbeatInterval
}

// follow accepts b's node as leader of b's epoch.
func (m *Elector) follow(now time.Duration, b election.Ballot) {
	m.bootstrapping = false
	changed := m.leader != b.ID || m.leaderEpoch != b.Epoch
	m.promise = b
	m.leader = b.ID
	m.leaderEpoch = b.Epoch
	if changed {
		m.dirty = true
	}
	m.pending = nil
	m.setStatus(now, election.StatusNormal)
	if changed {
		m.emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: b.ID, Epoch: b.Epoch})
	}
	m.heard = now
	m.armDetector()
}

// armDetector sets a Normal follower's failure deadline: FailureTimeout after
// its leader last showed it is alive, plus the stagger of its rank below the
// leader. Every follower hears the leader's HEARTBEATs at about the same
// time, so without the stagger all of them would detect a crash at once and
// each would elect: (N-1)(N-2)/2 ELECTIONs. Staggered, the highest survivor
// detects first and its HALTs reach the others before their deadlines.
func (m *Elector) armDetector() {
	m.deadline = m.heard + m.cfg.FailureTimeout + m.staggerBelow(m.leader)
}

// rearmOnRankChange moves a Normal follower's failure deadline after the
// membership changed, since a member joining or leaving between it and its
// leader changes its rank.
func (m *Elector) rearmOnRankChange() {
	if m.status == election.StatusNormal && m.leader != m.id && m.leader != uuid.Nil {
		m.armDetector()
	}
}

// becomeWaiting waits for a COORDINATOR after awaited answered or halted this
// node. Its timeout is staggered like the failure detector, by rank below
// awaited: if awaited dies, the nodes it halted would otherwise all time out
// together and elect at once.
func (m *Elector) becomeWaiting(now time.Duration, awaited uuid.UUID) {
	m.pending = nil
	m.setStatus(now, election.StatusWaiting)
	m.deadline = now + WaitFactor*m.cfg.ElectionTimeout + m.staggerBelow(awaited)
}

// staggerBelow is the extra detection delay for watching node above: the
// stagger of this node's rank below it (election.Roster.RankBelow).
func (m *Elector) staggerBelow(above uuid.UUID) time.Duration {
	return m.roster.StaggerBelow(above)
}

func (m *Elector) reject(to uuid.UUID) {
	m.send(to, wire.TypeReject, 0, m.promise.Epoch, wire.AppendID(nil, m.promise.ID))
}

func (m *Elector) setStatus(now time.Duration, s election.Status) {
	if m.status == s {
		return
	}
	m.emit(election.Event{At: now, Kind: election.EventStatus, From: m.status, To: s})
	m.status = s
}

func (m *Elector) emit(e election.Event) { m.out.Emit(e) }

func (m *Elector) send(to uuid.UUID, t wire.Type, flags uint8, epoch uint64, payload []byte) {
	m.out.Send(to, t, flags, epoch, payload)
}

func (m *Elector) broadcast(t wire.Type, flags uint8, epoch uint64, payload []byte) {
	for _, id := range m.roster.Others() {
		m.send(id, t, flags, epoch, payload)
	}
}

// higher returns the members above self, less a suspected leader.
func (m *Elector) higher() []uuid.UUID {
	m.scratch = m.scratch[:0]
	for _, id := range m.roster.IDs() {
		if election.Less(m.id, id) && id != m.skip {
			m.scratch = append(m.scratch, id)
		}
	}
	return m.scratch
}

var _ election.Machine = (*Elector)(nil)
