package bully

import (
	"slices"
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
	*election.Core

	proposal election.Ballot    // election.StatusHalting: the ballot being proposed
	pending  map[uuid.UUID]bool // election.StatusHalting: lower members yet to HALT_ACK
	skip     uuid.UUID          // a suspected leader left out of this election's ELECTIONs
	reason   wire.Reason        // why the current or last election started; sent in its frames

	// election.StatusElecting: the members this election asks, highest
	// first (askHigher); ask[:asked] have been sent ELECTION, refused of
	// them were refused.
	ask     []uuid.UUID
	asked   int
	refused int
	// firstWave is how many of ask the first wave takes.
	firstWave int
}

// NewElector returns an Elector that starts an election at once (Reason
// boot), or, with cfg.HoldBoot, held (election.StatusHeld) until Campaign.
// restored is the State a previous incarnation persisted, or nil on first
// boot; a first boot also announces the node with JOIN.
//
// Cold start: of the two options in the design notes, every node starts as a
// non-coordinator and elects, because starting as coordinators would have
// every node Normal with itself as leader, breaking SLE1 the moment two nodes
// boot. The election timeout plays the role of the boot wait.
func NewElector(cfg election.Config, restored *election.State, now time.Duration) (*Elector, error) {
	m := &Elector{}
	core, err := election.NewCore(cfg, restored)
	if err != nil {
		return nil, err
	}
	m.Core = core
	if cfg.HoldBoot {
		// Held: no timer until an election draws it in or Campaign
		// releases it.
		m.Deadline = never
		return m, nil
	}
	m.startElection(now, wire.ReasonBoot)
	return m, nil
}

// never is a Deadline that does not come.
const never = time.Duration(1<<63 - 1)

// Refused tells the Elector that a message it sent to peer was refused:
// nobody listened at the peer's address (TCP answered the connection with a
// reset), so the peer's process was not running. A HALT of the current
// proposal so refused counts the peer as failed at once, as the end of
// ElectionTimeout would: it neither acknowledged nor rejected this ballot,
// and when it starts again it elects on its own. An ELECTION of the current
// election so refused may bring its next wave forward (electionRefused).
// Anything else is ignored; silence, as in a partition, still takes the
// timeout.
func (m *Elector) Refused(now time.Duration, peer uuid.UUID, t wire.Type, epoch uint64) {
	if t == wire.TypeElection {
		m.electionRefused(now, peer)
		return
	}
	if m.Left || t != wire.TypeHalt || m.CurrentStatus != election.StatusHalting || epoch != m.proposal.Epoch || !m.pending[peer] {
		return
	}
	delete(m.pending, peer)
	if len(m.pending) == 0 {
		m.win(now)
	}
}

// Campaign starts an election now, as the failure detector would: for
// ReasonLeaderFailed the current leader is left out of the ELECTIONs. It does
// nothing while this node is already electing or halting.
func (m *Elector) Campaign(now time.Duration, reason wire.Reason) {
	if m.Left || m.CurrentStatus == election.StatusElecting || m.CurrentStatus == election.StatusHalting {
		return
	}
	m.startElection(now, reason)
}

// Tick fires whatever timer is due at now.
func (m *Elector) Tick(now time.Duration) {
	if m.Left || now < m.Deadline || m.CurrentStatus == election.StatusHeld {
		return
	}
	switch m.CurrentStatus {
	case election.StatusElecting:
		if m.asked < len(m.ask) {
			m.askWave(now)
			return
		}
		// Nobody above answered within the election timeout: they are all
		// down, so this node is the highest alive and halts the ones below.
		m.startHalting(now, m.HighestEpoch+1)
	case election.StatusHalting:
		// Lower nodes that did not acknowledge in time count as failed.
		m.win(now)
	case election.StatusWaiting:
		m.startElection(now, wire.ReasonWaitTimeout)
	case election.StatusNormal:
		if m.LeaderID == m.Self {
			m.Broadcast(wire.TypeHeartbeat, 0, m.LeaderEpoch, nil)
			m.Deadline = now + m.Config.HeartbeatInterval
		} else {
			m.startElection(now, m.DetectionReason())
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
	if m.RefuseForeign(now, msg, wire.AlgorithmBully) {
		return
	}
	if !m.Roster.Admit(now, msg, m.HighestEpoch, m.Bootstrapping) {
		return
	}
	if msg.Epoch > m.HighestEpoch && msg.Type != wire.TypeReject {
		m.HighestEpoch = msg.Epoch
		m.Dirty = true
	}
	switch msg.Type {
	case wire.TypeElection:
		m.onElection(now, from)
	case wire.TypeAnswer:
		if m.CurrentStatus == election.StatusElecting && election.Less(m.Self, from) {
			m.becomeWaiting(now, from)
		}
	case wire.TypeHalt:
		m.onHalt(now, election.Ballot{Epoch: msg.Epoch, ID: from}, msg.Reason())
	case wire.TypeHaltAck:
		if m.CurrentStatus == election.StatusHalting && msg.Epoch == m.proposal.Epoch && m.pending[from] {
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
		if m.Roster.OnJoin(now, wire.Member{ID: from, Addr: addr}, msg.Flags&wire.FlagWantMembers != 0, m.HighestEpoch) && m.IsLeader() {
			m.send(from, wire.TypeCoordinator, uint8(m.reason), m.LeaderEpoch, nil)
		}
	case wire.TypeLeave:
		m.onLeave(now, from)
	case wire.TypeMembers:
		m.Roster.OnMembers(now, from, msg.Payload, m.HighestEpoch)
	}
}

func (m *Elector) onElection(now time.Duration, from uuid.UUID) {
	if !election.Less(from, m.Self) {
		return // ELECTION goes only to higher nodes; a higher sender is confused, not a threat
	}
	m.send(from, wire.TypeAnswer, 0, m.HighestEpoch, nil)
	if m.CurrentStatus != election.StatusNormal {
		// Already electing, halting or waiting for a higher node: the answer
		// is all the lower node needs.
		return
	}
	if m.LeaderID == m.Self {
		// A live leader re-asserts itself to the node that suspected it
		// instead of starting a new round: its epoch has not ended.
		m.send(from, wire.TypeCoordinator, uint8(m.reason), m.LeaderEpoch, nil)
		return
	}
	m.startElection(now, wire.ReasonBullied)
}

func (m *Elector) onHalt(now time.Duration, b election.Ballot, reason wire.Reason) {
	if election.Less(b.ID, m.Self) {
		// A lower node believes it is the highest alive: bully it.
		if m.CurrentStatus == election.StatusNormal || m.CurrentStatus == election.StatusWaiting {
			m.startElection(now, wire.ReasonBullied)
		}
		return
	}
	if m.Promise.Less(b) && b.Epoch > m.LeaderEpoch {
		m.Promise = b
		m.Dirty = true
		m.becomeWaiting(now, b.ID)
		m.send(b.ID, wire.TypeHaltAck, 0, b.Epoch, nil)
		return
	}
	m.reject(b.ID)
}

// onReject handles a REJECT naming ballot b that the sender promised.
func (m *Elector) onReject(now time.Duration, b election.Ballot) {
	switch {
	case m.CurrentStatus == election.StatusHalting:
		if b.Epoch < m.proposal.Epoch {
			return // answers an earlier proposal that the current one already beats
		}
		if b.Epoch > m.HighestEpoch {
			m.HighestEpoch = b.Epoch
			m.Dirty = true
		}
		if election.Less(m.Self, b.ID) && m.proposal.Less(b) {
			// A higher node holds a newer ballot. Competing with it would
			// bump epochs back and forth; ask it instead: an ANSWER means it
			// is alive and this node waits, silence means it is gone.
			m.startElection(now, wire.ReasonOutvoted)
			return
		}
		m.startHalting(now, m.HighestEpoch+1)
	case m.CurrentStatus == election.StatusNormal && m.LeaderID == m.Self:
		if b.Epoch > m.HighestEpoch {
			m.HighestEpoch = b.Epoch
			m.Dirty = true
		}
		if (election.Ballot{Epoch: m.LeaderEpoch, ID: m.Self}).Less(b) {
			// Some node promised a newer ballot. If its owner is higher and
			// alive, the ELECTION finds it and this node waits; otherwise this
			// node takes the cluster back under a still newer epoch.
			m.startElection(now, wire.ReasonOutvoted)
		}
	default:
		if b.Epoch > m.HighestEpoch {
			m.HighestEpoch = b.Epoch
			m.Dirty = true
		}
	}
}

func (m *Elector) onCoordinator(now time.Duration, b election.Ballot) {
	if election.Less(b.ID, m.Self) {
		// "A node that hears COORDINATOR from a lower ID bullies it."
		if m.CurrentStatus == election.StatusNormal || m.CurrentStatus == election.StatusWaiting {
			m.startElection(now, wire.ReasonLowerLeader)
		}
		return
	}
	if b.Less(m.Promise) || b.Epoch < m.LeaderEpoch {
		m.reject(b.ID)
		return
	}
	m.follow(now, b)
}

// onLeaderHeard follows the sender of a HEARTBEAT heard while waiting for
// a COORDINATOR (or held at boot) when its COORDINATOR would have been
// followed: a node sends HEARTBEAT only as the leader of that epoch. The
// COORDINATOR can be lost: 1000 nodes in one host process, on a loaded
// machine, had the leader's frames wait in their queues past their TTL,
// and the halted nodes that missed it elected WaitFactor x ElectionTimeout
// later, against a working leader, each asking every member above it. A
// HEARTBEAT the COORDINATOR would not have won is ignored, as before, not
// rejected: it is not a proposal.
func (m *Elector) onLeaderHeard(now time.Duration, b election.Ballot) {
	if election.Less(m.Self, b.ID) && !b.Less(m.Promise) && b.Epoch >= m.LeaderEpoch {
		m.follow(now, b)
	}
}

func (m *Elector) onHeartbeat(now time.Duration, from uuid.UUID, epoch uint64) {
	if m.CurrentStatus == election.StatusWaiting || m.CurrentStatus == election.StatusHeld {
		m.onLeaderHeard(now, election.Ballot{Epoch: epoch, ID: from})
		return
	}
	if m.CurrentStatus != election.StatusNormal {
		return
	}
	switch {
	case from == m.LeaderID && epoch == m.LeaderEpoch && m.LeaderID != m.Self:
		m.Heard = now
		m.ArmFailureDetector()
	case m.LeaderID == m.Self && election.Less(from, m.Self):
		// Two leaders (a healed partition): the higher one takes over under
		// a new epoch; the lower one waits to be halted.
		m.startElection(now, wire.ReasonLowerLeader)
	case m.LeaderID == m.Self:
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
	m.Roster.OnLeave(now, from)
	switch m.CurrentStatus {
	case election.StatusHalting:
		if m.pending[from] {
			delete(m.pending, from)
			if len(m.pending) == 0 {
				m.win(now)
			}
		}
	case election.StatusNormal:
		if m.LeaderID == from {
			m.startElection(now, wire.ReasonLeaderLeft)
		}
	}
}

// startElection sends ELECTION to every higher member (but a suspected
// leader) and waits for an ANSWER; with nobody above, it halts at once.
func (m *Elector) startElection(now time.Duration, reason wire.Reason) {
	m.skip = uuid.Nil
	silentLeader := false
	switch {
	case reason == wire.ReasonLeaderFailed || reason == wire.ReasonLeaderCrashed || reason == wire.ReasonLeaderLeft:
		m.skip = m.LeaderID
		silentLeader = reason == wire.ReasonLeaderFailed
	case reason == wire.ReasonBullied && m.CurrentStatus == election.StatusNormal && m.LeaderID != m.Self &&
		now-m.Heard > 2*m.Config.HeartbeatInterval:
		// A lower node suspects the leader and this node has missed a
		// heartbeat too: asking the leader would likely cost a whole
		// ElectionTimeout waiting on a dead node.
		m.skip = m.LeaderID
		silentLeader = true
	}
	m.reason = reason
	m.Out.Emit(election.Event{At: now, Kind: election.EventElectionStarted, Reason: reason})
	m.askHigher(silentLeader)
	if len(m.ask) == 0 {
		m.startHalting(now, max(m.HighestEpoch, m.Promise.Epoch)+1)
		return
	}
	m.SetStatus(now, election.StatusElecting)
	m.asked, m.refused = 0, 0
	m.askWave(now)
}

// askWave sends ELECTION to the next wave of the members above, highest
// first, each wave twice the last, one DetectionStagger apart (with 0, all
// of them at once), and waits ElectionTimeout after the last wave. One
// ANSWER is all an election needs (becomeWaiting ends the waves), and the
// members above are asked highest first because the highest live one is
// the one that will lead: after a leader crash the highest survivor has
// nobody above to ask but the dead, and so asks them all within
// AskSpread; a lower node, asking only after its stagger, is halted before
// it asks; a node booting or restarting into a cluster asks the leader
// first, which answers it with its COORDINATOR. When many elect at once
// (a partition cutting off the top, every survivor past the stagger's
// cap) each asks the cut-off members in a few waves and the highest
// survivor answers it in the next: about N ELECTIONs where asking every
// member above at once sent N^2/2, each a TCP connection, which on 1000
// nodes no host could carry.
func (m *Elector) askWave(now time.Duration) {
	n := len(m.ask) - m.asked
	if m.Config.DetectionStagger > 0 {
		// Waves of 1, 2, 4, ...: each as large as all before it, plus one;
		// the first takes the nearest member too when askHigher moved it
		// up.
		n = min(n, max(m.asked+1, m.firstWave))
	}
	for _, id := range m.ask[m.asked : m.asked+n] {
		m.send(id, wire.TypeElection, uint8(m.reason), m.HighestEpoch, nil)
	}
	m.asked += n
	if m.asked < len(m.ask) {
		m.Deadline = now + m.Config.DetectionStagger
		return
	}
	m.Deadline = now + m.Config.ElectionTimeout
}

// electionRefused counts a refused ELECTION of the current election: a
// member whose process is not running will not answer, so once every
// member asked so far has refused, waiting out the wave's step buys
// nothing and the next wave goes at once. The last wave still waits
// ElectionTimeout: refused or silent, the members above count as down
// only when it ends, as they did before the waves.
func (m *Elector) electionRefused(now time.Duration, peer uuid.UUID) {
	if m.Left || m.CurrentStatus != election.StatusElecting || !slices.Contains(m.ask[:m.asked], peer) {
		return
	}
	m.refused++
	if m.refused >= m.asked && m.asked < len(m.ask) {
		m.askWave(now)
	}
}

// startHalting proposes ballot (epoch, self) to every lower member.
func (m *Elector) startHalting(now time.Duration, epoch uint64) {
	epoch = max(epoch, m.HighestEpoch+1, m.Promise.Epoch+1)
	m.HighestEpoch = epoch
	m.proposal = election.Ballot{Epoch: epoch, ID: m.Self}
	m.Promise = m.proposal
	m.Dirty = true
	m.SetStatus(now, election.StatusHalting)
	m.pending = make(map[uuid.UUID]bool)
	// Highest first: the nearer a lower node ranks, the sooner its
	// staggered detector fires, so the sooner it needs its HALT.
	ids := m.Roster.IDs()
	for i := m.Roster.Position(m.Self) - 1; i >= 0; i-- {
		id := ids[i]
		m.pending[id] = true
		m.send(id, wire.TypeHalt, uint8(m.reason), epoch, nil)
	}
	m.Deadline = now + m.Config.ElectionTimeout
	if len(m.pending) == 0 {
		m.win(now)
	}
}

// win makes this node leader of its proposed epoch and tells everyone.
func (m *Elector) win(now time.Duration) {
	m.Bootstrapping = false
	m.pending = nil
	m.LeaderID = m.Self
	m.LeaderEpoch = m.proposal.Epoch
	m.Dirty = true
	m.SetStatus(now, election.StatusNormal)
	m.Out.Emit(election.Event{At: now, Kind: election.EventElectionWon, Leader: m.Self, Epoch: m.LeaderEpoch})
	m.Out.Emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: m.Self, Epoch: m.LeaderEpoch})
	m.Broadcast(wire.TypeCoordinator, uint8(m.reason), m.LeaderEpoch, nil)
	m.Deadline = now + m.Config.HeartbeatInterval
}

// follow accepts b's node as leader of b's epoch.
func (m *Elector) follow(now time.Duration, b election.Ballot) {
	m.Bootstrapping = false
	changed := m.LeaderID != b.ID || m.LeaderEpoch != b.Epoch
	m.Promise = b
	m.LeaderID = b.ID
	m.LeaderEpoch = b.Epoch
	if changed {
		m.Dirty = true
	}
	m.pending = nil
	m.SetStatus(now, election.StatusNormal)
	if changed {
		m.Out.Emit(election.Event{At: now, Kind: election.EventLeaderChanged, Leader: b.ID, Epoch: b.Epoch})
	}
	m.Heard = now
	m.ArmFailureDetector()
}

// becomeWaiting waits for a COORDINATOR after awaited answered or halted this
// node. Its timeout is staggered like the failure detector, by rank below
// awaited: if awaited dies, the nodes it halted would otherwise all time out
// together and elect at once.
func (m *Elector) becomeWaiting(now time.Duration, awaited uuid.UUID) {
	m.pending = nil
	m.SetStatus(now, election.StatusWaiting)
	m.Deadline = now + WaitFactor*m.Config.ElectionTimeout + m.askSpreadOf(awaited) + m.staggerBelow(awaited)
}

// askSpreadOf is how long awaited, answering this node, may still be
// asking the members above it before its own ElectionTimeout starts
// (AskSpread).
func (m *Elector) askSpreadOf(awaited uuid.UUID) time.Duration {
	above := len(m.Roster.IDs()) - m.Roster.Position(awaited) - 1
	return election.AskSpread(above, m.Config.DetectionStagger)
}

// staggerBelow is the extra detection delay for watching node above: the
// stagger of this node's rank below it (election.Roster.RankBelow).
func (m *Elector) staggerBelow(above uuid.UUID) time.Duration {
	return m.Roster.StaggerBelow(above)
}

func (m *Elector) reject(to uuid.UUID) {
	m.send(to, wire.TypeReject, 0, m.Promise.Epoch, wire.AppendID(nil, m.Promise.ID))
}

func (m *Elector) send(to uuid.UUID, t wire.Type, flags uint8, epoch uint64, payload []byte) {
	m.Out.Send(to, t, flags, epoch, payload)
}

// StandbyPeers implements election.Standby. When the leader fails, the
// highest follower (the member just below it) elects first and HALTs every
// member below it, and each of them answers it with a HALT_ACK; it names
// those members, and they name it. Nil unless a Normal follower below its
// leader.
func (m *Elector) StandbyPeers() []uuid.UUID {
	if m.Left || m.CurrentStatus != election.StatusNormal || m.LeaderID == m.Self || !election.Less(m.Self, m.LeaderID) {
		return nil
	}
	ids := m.Roster.IDs()
	self, leader := m.Roster.Position(m.Self), m.Roster.Position(m.LeaderID)
	if self == leader-1 {
		return ids[:self:self]
	}
	return ids[leader-1 : leader]
}

// askHigher sets ask to the members above self, less a suspected leader,
// highest first; for an election on a silent leader, from both ends in
// turn, highest and nearest, both in the first wave (see Nearest member
// first in the package doc).
func (m *Elector) askHigher(silentLeader bool) {
	m.ask = m.ask[:0]
	ids := m.Roster.IDs()
	nearest, highest := m.Roster.Position(m.Self), len(ids)-1
	if nearest < len(ids) && ids[nearest] == m.Self {
		nearest++
	}
	fromTop := true
	for nearest <= highest {
		var id uuid.UUID
		if fromTop {
			id, highest = ids[highest], highest-1
		} else {
			id, nearest = ids[nearest], nearest+1
		}
		if id != m.skip {
			m.ask = append(m.ask, id)
			fromTop = !fromTop || !silentLeader
		}
	}
	m.firstWave = 1
	if silentLeader {
		m.firstWave = 2
	}
}

var (
	_ election.Machine = (*Elector)(nil)
	_ election.Standby = (*Elector)(nil)
)
