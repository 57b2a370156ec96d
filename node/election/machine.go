package election

import (
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Standby is implemented by a Machine that can name, while it follows a
// leader, the peers it would send to first if that leader failed now: the
// runtime connects to them ahead of time (node.Warmer). It changes nothing
// the Machine sends, only how long its first frames take.
type Standby interface {
	StandbyPeers() []uuid.UUID
}

// Machine is an election algorithm as a deterministic state machine. It owns
// no goroutine, socket or clock: the runtime feeds it received messages
// (Step), time (Tick), refused sends (Refused), crashed peers (PeerCrashed) and operator requests
// (Campaign, Leave), and drains what it wants persisted, sent and logged
// (Drain). Every method takes the caller's monotonic clock reading; a
// Machine only compares these readings, so any origin works.
type Machine interface {
	// ID returns the node's ID.
	ID() uuid.UUID
	// Status returns where the node stands in its election.
	Status() Status
	// Leader returns the leader the node last accepted and its epoch,
	// significant only while Status is StatusNormal.
	Leader() (uuid.UUID, uint64)
	// Epoch returns the highest epoch the node has seen.
	Epoch() uint64
	// IsLeader reports whether the node is a Normal leader.
	IsLeader() bool
	// Members returns every known member, the node included, in ID order:
	// a slice the Machine shares and replaces on change, never modifies.
	Members() []wire.Member
	// State returns what the node persists; its Members is Members'.
	State() State
	// NextDeadline returns the clock reading at which Tick next has work.
	NextDeadline() time.Duration

	// Step processes one received message; the caller may reuse msg and
	// its payload once Step returns.
	Step(now time.Duration, msg *wire.Message)
	// Tick fires whatever timer is due at now.
	Tick(now time.Duration)
	// Refused tells the Machine that a message of type t at epoch it sent
	// to peer was refused: nobody listened at the peer's address, so the
	// peer's process was not running.
	Refused(now time.Duration, peer uuid.UUID, t wire.Type, epoch uint64)
	// PeerCrashed tells the Machine that peer's process is gone while its
	// host lives: a connection from or to it ended by the peer and its
	// host then refused a connection, or refused a frame. The Machine acts
	// on it only for a peer it watches (a follower's leader); a pause or a
	// partition gives no such evidence and still takes the failure
	// timeout.
	PeerCrashed(now time.Duration, peer uuid.UUID)
	// ProbeDelay is how long the runtime may wait before it looks for
	// evidence that peer crashed once peer ended a connection: none for
	// the highest follower, its stagger below peer for the others.
	ProbeDelay(peer uuid.UUID) time.Duration
	// Campaign starts an election now for reason, unless one is under way.
	Campaign(now time.Duration, reason wire.Reason)
	// Leave announces that the node leaves the cluster for good; the
	// Machine ignores all input afterwards.
	Leave(now time.Duration)
	// Drain returns and clears what the Machine produced since the last
	// Drain.
	Drain() Output
}
