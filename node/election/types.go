package election

import (
	"bytes"
	"fmt"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Status is where a node stands in its election. Only in StatusNormal is its
// leader significant (SLE1 speaks of Normal nodes only).
type Status uint8

const (
	// StatusElecting: sent ELECTION to the higher nodes, waiting for an
	// ANSWER; in the ring, taking part in a run, waiting for its ELECTED.
	StatusElecting Status = iota + 1
	// StatusHalting: nobody higher answered; sent HALT to the lower nodes and
	// waiting for their HALT_ACKs before claiming victory.
	StatusHalting
	// StatusWaiting: answered by a higher node or halted by a candidate;
	// waiting for its COORDINATOR.
	StatusWaiting
	// StatusNormal: following a leader, or leading.
	StatusNormal
)

// StatusHeld is a node started with Config.HoldBoot that no election has
// drawn in yet: the zero Status, which a node not held leaves at once for
// its boot election. It is not among Statuses: a held node has no
// election state to count.
const StatusHeld Status = 0

func (s Status) String() string {
	switch s {
	case StatusElecting:
		return "electing"
	case StatusHalting:
		return "halting"
	case StatusWaiting:
		return "waiting"
	case StatusNormal:
		return "normal"
	case StatusHeld:
		return "held"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Statuses lists every Status, for gauges that export one series each.
func Statuses() []Status {
	return []Status{StatusElecting, StatusHalting, StatusWaiting, StatusNormal}
}

// Less orders node IDs as unsigned 128-bit big-endian numbers: the priority
// of every election. The highest ID wins.
func Less(a, b uuid.UUID) bool { return bytes.Compare(a[:], b[:]) < 0 }

// Ballot is a candidate's claim: the epoch it proposes and its own ID.
// Ballots are ordered by epoch, then by ID.
type Ballot struct {
	Epoch uint64    `json:"epoch"`
	ID    uuid.UUID `json:"id"`
}

// Less reports whether b orders before o.
func (b Ballot) Less(o Ballot) bool {
	if b.Epoch != o.Epoch {
		return b.Epoch < o.Epoch
	}
	return Less(b.ID, o.ID)
}

// State is what a node persists. The runtime must write it to stable storage
// before it sends the messages of the same Output: a HALT_ACK promises a
// ballot, and a restarted node must not forget it.
type State struct {
	// Epoch is the highest epoch this node has seen; it never goes backwards.
	Epoch uint64 `json:"epoch"`
	// Promise is the highest ballot this node accepted (Bully: HALT or
	// COORDINATOR; the ring: the run it forwarded last, ID its initiator,
	// or its leader's ballot once it follows one).
	Promise Ballot `json:"promise"`
	// Leader and LeaderEpoch are the last leader this node accepted.
	Leader      uuid.UUID `json:"leader"`
	LeaderEpoch uint64    `json:"leader_epoch"`
	// Members is every known member, this node included, sorted by ID.
	Members []wire.Member `json:"members"`
	// Left records that this node sent LEAVE: the others forgot it, so when
	// it starts again it must JOIN like a new node.
	Left bool `json:"left,omitempty"`
}

// Envelope is a message a Machine wants sent to one peer.
type Envelope struct {
	To  uuid.UUID
	Msg wire.Message
}

// EventKind names an observable change of a Machine.
type EventKind string

const (
	EventStatus          EventKind = "status"           // Status moved from From to To
	EventElectionStarted EventKind = "election_started" // Reason says why
	EventElectionWon     EventKind = "election_won"     // this node leads Epoch
	EventLeaderChanged   EventKind = "leader_changed"   // Leader at Epoch accepted
	EventMemberJoined    EventKind = "member_joined"    // Peer joined
	EventMemberLeft      EventKind = "member_left"      // Peer left
	// EventRefused: a message from Peer was ignored for Cause (Detail says
	// how); the runtime counts and logs it as peer_refused.
	EventRefused EventKind = "refused"
)

// Event is one observable change, stamped with the Machine's clock.
type Event struct {
	At     time.Duration
	Kind   EventKind
	From   Status      // EventStatus
	To     Status      // EventStatus
	Reason wire.Reason // EventElectionStarted
	Leader uuid.UUID   // EventElectionWon, EventLeaderChanged
	Epoch  uint64      // EventElectionWon, EventLeaderChanged
	Peer   wire.Member // EventMemberJoined, EventMemberLeft, EventRefused
	// By is the member whose message caused a membership change: the
	// joiner or leaver itself, or the seed whose MEMBERS listed the joiner.
	By     uuid.UUID    // EventMemberJoined, EventMemberLeft
	Cause  RefusalCause // EventRefused
	Detail string       // EventRefused
}

// RefusalCause says why a Machine ignored a peer's message (EventRefused).
type RefusalCause uint8

const (
	// CauseEpochWindow: the message's epoch is more than EpochWindow ahead
	// of the node's, or beyond MaxEpoch.
	CauseEpochWindow RefusalCause = iota + 1
	// CauseMembership: a JOIN or MEMBERS that would break the membership
	// rules (an unsolicited MEMBERS, a list over Config.MaxMembers, a JOIN
	// from an unknown ID without authentication).
	CauseMembership
	// CauseAlgorithm: a frame of another election algorithm than the one
	// this node runs (wire.Type.Algorithm); a cluster does not mix them.
	CauseAlgorithm
	// CauseMalformed: a payload that does not parse, or names nobody.
	CauseMalformed
)

// Output is what a Machine produced since the last Drain. Persist State (when
// non-nil) first, then send Messages; Events are for logs and metrics.
type Output struct {
	State    *State
	Messages []Envelope
	Events   []Event
}
