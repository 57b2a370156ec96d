package election

import (
	"fmt"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Core is the state every algorithm's Machine keeps the same way: its
// Config, Roster and Outbox, its status, epoch, promise and leader, whether
// it must persist, and the HEARTBEAT failure detector's deadline. An
// algorithm embeds a *Core, which gives it the Machine's accessors and
// State, Drain and Leave, and writes the fields from its own Step, Tick and
// Campaign.
type Core struct {
	Config Config
	Self   uuid.UUID
	Roster *Roster
	Out    *Outbox

	CurrentStatus Status
	HighestEpoch  uint64 // highest epoch seen
	// Promise is the highest ballot this node took part in; what it means
	// beyond that is the algorithm's.
	Promise     Ballot
	LeaderID    uuid.UUID
	LeaderEpoch uint64

	Deadline time.Duration // when Tick next has work
	Heard    time.Duration // StatusNormal follower: when the leader last showed it is alive
	Left     bool          // Leave was called: the Machine is inert
	// Bootstrapping: a first start that has not yet followed or won a
	// leader; it takes any epoch up to MaxEpoch (see EpochWindow).
	Bootstrapping bool
	Dirty         bool // persisted fields changed since the last Drain

	// crashed is the leader PeerCrashed last showed gone, at crashedAt;
	// it counts while nothing newer (Heard) showed it alive.
	crashed   uuid.UUID
	crashedAt time.Duration
}

// NewCore checks cfg and restored, builds the Roster and Outbox, resumes
// the epoch, promise and leader restored persisted (nil on first boot),
// and announces the node with JOIN when cfg.Join says so or it had left.
func NewCore(cfg Config, restored *State) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckRestored(restored); err != nil {
		return nil, err
	}
	c := &Core{
		Config:        cfg,
		Self:          cfg.ID,
		Out:           NewOutbox(cfg.ID),
		Bootstrapping: restored == nil,
	}
	c.Roster = NewRoster(cfg, restored, c.Out)
	c.Roster.OnChange = func() {
		c.Dirty = true
		// A member joining or leaving between a follower and its leader
		// changes the follower's rank, so its failure deadline moves.
		if c.CurrentStatus == StatusNormal && c.LeaderID != c.Self && c.LeaderID != uuid.Nil {
			c.ArmFailureDetector()
		}
	}
	if restored != nil {
		c.HighestEpoch = restored.Epoch
		c.Promise = restored.Promise
		c.LeaderID = restored.Leader
		c.LeaderEpoch = restored.LeaderEpoch
	}
	c.Dirty = true
	if cfg.Join || (restored != nil && restored.Left) {
		c.Roster.Join(c.HighestEpoch)
	}
	return c, nil
}

// ID returns the node's ID.
func (c *Core) ID() uuid.UUID { return c.Self }

// Status returns where the node stands in its election.
func (c *Core) Status() Status { return c.CurrentStatus }

// Leader returns the leader this node last accepted and its epoch. It is
// significant only while Status is StatusNormal.
func (c *Core) Leader() (uuid.UUID, uint64) { return c.LeaderID, c.LeaderEpoch }

// Epoch returns the highest epoch this node has seen.
func (c *Core) Epoch() uint64 { return c.HighestEpoch }

// IsLeader reports whether this node is a Normal leader.
func (c *Core) IsLeader() bool { return c.CurrentStatus == StatusNormal && c.LeaderID == c.Self }

// Members returns every known member, self included, in ID order.
func (c *Core) Members() []wire.Member { return c.Roster.Members() }

// Sent returns how many messages of type t the Machine has emitted.
func (c *Core) Sent(t wire.Type) uint64 { return c.Out.Sent(t) }

// NextDeadline returns the clock reading at which Tick next has work to do.
func (c *Core) NextDeadline() time.Duration { return c.Deadline }

// State returns what the node persists; Members is shared (Members).
func (c *Core) State() State {
	return State{
		Epoch:       c.HighestEpoch,
		Promise:     c.Promise,
		Leader:      c.LeaderID,
		LeaderEpoch: c.LeaderEpoch,
		Members:     c.Members(),
		Left:        c.Left,
	}
}

// Drain returns and clears what the Machine produced since the last Drain.
func (c *Core) Drain() Output {
	var st *State
	if c.Dirty {
		s := c.State()
		st = &s
		c.Dirty = false
	}
	return c.Out.Take(st)
}

// Leave announces with LEAVE that this node leaves the cluster for good.
// The Machine ignores all input afterwards.
func (c *Core) Leave(now time.Duration) {
	if c.Left {
		return
	}
	for _, id := range c.Roster.Others() {
		c.Out.Send(id, wire.TypeLeave, 0, c.HighestEpoch, nil)
	}
	c.Left = true
	c.Dirty = true
	c.Deadline = 1<<63 - 1
}

// ArmFailureDetector sets a Normal follower's failure deadline:
// FailureTimeout after its leader last showed it is alive (Heard), plus the
// stagger of its rank below the leader. Every follower hears the leader's
// HEARTBEATs at about the same time, so without the stagger all of them
// would detect a crash at once and each would elect. Staggered, the
// highest survivor detects first and its election reaches the others
// before their deadlines.
//
// Evidence that the leader's process is gone (PeerCrashed), newer than
// Heard, brings the deadline forward: the failure timeout only waits for a
// silence to prove what the evidence proves. The highest follower (rank 0)
// then elects at once; the others wait ElectionTimeout more than their
// stagger, the highest's HALT round. Unlike HEARTBEATs, which stopped long
// before anyone's deadline, the evidence reaches every follower at the
// moment of the crash, and all of them wake to it at once: on a loaded
// host the highest one's election then ran 75 ms late, the others' 50 ms
// steps passed before its HALTs reached them, and star16 ended in O(N^2)
// ELECTIONs and, its host starved, two leaders of one epoch.
func (c *Core) ArmFailureDetector() {
	stagger := c.Roster.StaggerBelow(c.LeaderID)
	c.Deadline = c.Heard + c.Config.FailureTimeout + stagger
	if c.leaderCrashed() {
		wait := stagger
		if c.Roster.RankBelow(c.LeaderID) > 0 {
			wait += c.Config.ElectionTimeout
		}
		c.Deadline = min(c.Deadline, c.crashedAt+wait)
	}
}

// PeerCrashed implements Machine.PeerCrashed for both algorithms: a Normal
// follower whose leader's process is gone elects without waiting for
// FailureTimeout, the highest survivor at once and the others after
// ElectionTimeout and their stagger (ArmFailureDetector), so that the
// highest still goes first and halts the rest; the election's frames carry
// ReasonLeaderCrashed (DetectionReason). Evidence about any other peer is
// ignored.
func (c *Core) PeerCrashed(now time.Duration, peer uuid.UUID) {
	if c.Left || c.CurrentStatus != StatusNormal || c.LeaderID == c.Self || peer != c.LeaderID || peer == uuid.Nil {
		return
	}
	if c.leaderCrashed() {
		return // already counted: a second report does not move the deadline
	}
	c.crashed, c.crashedAt = peer, now
	c.ArmFailureDetector()
}

// ProbeDelay implements Machine.ProbeDelay. A follower below the highest
// elects on the evidence only ElectionTimeout past its stagger, by which
// time the highest one's HALT has reached it, so its probe can wait out
// the stagger: star16's 14 lower followers probing at once, two connects
// each, kept the highest one's election off both cores for 5 ms.
func (c *Core) ProbeDelay(peer uuid.UUID) time.Duration { return c.Roster.StaggerBelow(peer) }

// leaderCrashed reports whether PeerCrashed showed the current leader gone
// since it was last heard from.
func (c *Core) leaderCrashed() bool {
	return c.crashed != uuid.Nil && c.crashed == c.LeaderID && c.crashedAt >= c.Heard
}

// DetectionReason is the reason of the election a Normal follower's
// failure detector starts at its deadline: ReasonLeaderCrashed when
// PeerCrashed brought it forward, ReasonLeaderFailed when the leader fell
// silent.
func (c *Core) DetectionReason() wire.Reason {
	if c.leaderCrashed() {
		return wire.ReasonLeaderCrashed
	}
	return wire.ReasonLeaderFailed
}

// SetStatus moves the node to status s, reporting the change as an event.
func (c *Core) SetStatus(now time.Duration, s Status) {
	if c.CurrentStatus == s {
		return
	}
	c.Out.Emit(Event{At: now, Kind: EventStatus, From: c.CurrentStatus, To: s})
	c.CurrentStatus = s
}

// Broadcast sends the same message to every other member.
func (c *Core) Broadcast(t wire.Type, flags uint8, epoch uint64, payload []byte) {
	for _, id := range c.Roster.Others() {
		c.Out.Send(id, t, flags, epoch, payload)
	}
}

// RefuseForeign reports, and refuses, a message of another algorithm than
// algorithm, the one this node runs (wire.Type.Algorithm): a cluster does
// not mix algorithms, so the frame is ignored and its sender named.
func (c *Core) RefuseForeign(now time.Duration, msg *wire.Message, algorithm string) bool {
	other := msg.Type.Algorithm()
	if other == "" || other == algorithm {
		return false
	}
	c.Out.Refuse(now, c.Roster.Member(msg.From), CauseAlgorithm,
		fmt.Sprintf("%s from %s: this node runs %s", msg.Type, msg.From, algorithm))
	return true
}
