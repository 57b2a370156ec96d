package wire

import (
	"fmt"

	"github.com/google/uuid"
)

// Version is the only frame version this package writes and accepts.
const Version = 1

// Type says what an election message means. The values are part of the wire
// format and never change meaning.
type Type uint8

const (
	// TypeElection asks every higher node whether it is alive (Bully "election").
	TypeElection Type = 1
	// TypeAnswer replies to an ELECTION from a lower node: "I am alive and take over".
	TypeAnswer Type = 2
	// TypeHalt is sent by a candidate to every lower node before it claims
	// victory; a node that accepts it leaves Normal and promises the candidate's
	// ballot (epoch, sender).
	TypeHalt Type = 3
	// TypeHaltAck accepts a HALT; its epoch is the candidate's proposed epoch.
	TypeHaltAck Type = 4
	// TypeReject refuses a HALT or COORDINATOR whose ballot is below the one the
	// sender has promised; the epoch and the payload (16-byte node ID) name that
	// higher ballot so the candidate can catch up.
	TypeReject Type = 5
	// TypeCoordinator announces the sender as leader of the epoch it carries (Bully "victory").
	TypeCoordinator Type = 6
	// TypeHeartbeat is the leader's keep-alive, carrying its epoch.
	TypeHeartbeat Type = 7
	// TypeJoin announces a node to the cluster; the payload is its address.
	TypeJoin Type = 8
	// TypeLeave announces that the sender leaves the cluster for good.
	TypeLeave Type = 9
	// TypeMembers carries the sender's full membership list (see AppendMembers).
	TypeMembers Type = 10
	// TypeHello opens an authenticated connection: the dialer proves it
	// holds the cluster key and binds the connection to its ID (see Sealer).
	// It is part of the transport, like TCP's handshake, not of the election.
	TypeHello Type = 11
	// TypeRingElection is the ring election's travelling ballot: it goes to
	// the sender's clockwise successor and carries the run's initiator and
	// the best candidate so far (AppendRingElection); Epoch is the epoch the
	// run proposes.
	TypeRingElection Type = 12
	// TypeElected announces, around the ring, the leader that the run of
	// Epoch elected; the payload is its ID (AppendID).
	TypeElected Type = 13

	typeLimit = 14
)

// Types lists every message type in wire order, for tables and counters.
var Types = []Type{
	TypeElection, TypeAnswer, TypeHalt, TypeHaltAck, TypeReject,
	TypeCoordinator, TypeHeartbeat, TypeJoin, TypeLeave, TypeMembers, TypeHello,
	TypeRingElection, TypeElected,
}

var typeNames = [typeLimit]string{
	TypeElection:     "ELECTION",
	TypeAnswer:       "ANSWER",
	TypeHalt:         "HALT",
	TypeHaltAck:      "HALT_ACK",
	TypeReject:       "REJECT",
	TypeCoordinator:  "COORDINATOR",
	TypeHeartbeat:    "HEARTBEAT",
	TypeJoin:         "JOIN",
	TypeLeave:        "LEAVE",
	TypeMembers:      "MEMBERS",
	TypeHello:        "HELLO",
	TypeRingElection: "RING_ELECTION",
	TypeElected:      "ELECTED",
}

// Valid reports whether t is a type this version defines.
func (t Type) Valid() bool { return t > 0 && t < typeLimit }

// HasReason reports whether frames of type t carry a Reason in their flags.
func (t Type) HasReason() bool {
	return t == TypeElection || t == TypeHalt || t == TypeCoordinator ||
		t == TypeRingElection || t == TypeElected
}

// The election algorithms whose messages the types carry (Type.Algorithm).
const (
	AlgorithmBully = "bully"
	AlgorithmRing  = "ring"
)

// Algorithm names the election algorithm that sends frames of type t:
// AlgorithmBully for ELECTION through COORDINATOR, AlgorithmRing for
// RING_ELECTION and ELECTED, and "" for the types every algorithm shares
// (HEARTBEAT, membership, HELLO) or an unknown one. A node refuses the
// other algorithm's frames: a cluster does not mix algorithms.
func (t Type) Algorithm() string {
	switch {
	case t >= TypeElection && t <= TypeCoordinator:
		return AlgorithmBully
	case t == TypeRingElection || t == TypeElected:
		return AlgorithmRing
	}
	return ""
}

func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("TYPE(%d)", uint8(t))
}

// ParseType maps a name printed by Type.String back to its Type.
func ParseType(s string) (Type, bool) {
	for _, t := range Types {
		if typeNames[t] == s {
			return t, true
		}
	}
	return 0, false
}

// Reason says why an election started. ELECTION, HALT and COORDINATOR frames
// carry it in the flags byte so that a capture alone tells what triggered an
// election.
type Reason uint8

const (
	ReasonNone         Reason = 0
	ReasonBoot         Reason = 1 // cold start, or restart after a crash
	ReasonLeaderFailed Reason = 2 // failure detector: no heartbeat within the failure timeout
	ReasonBullied      Reason = 3 // an ELECTION or HALT arrived from a lower node
	ReasonLowerLeader  Reason = 4 // heard a COORDINATOR or HEARTBEAT from a lower node
	ReasonWaitTimeout  Reason = 5 // answered or halted, but no COORDINATOR came in time
	ReasonLeaderLeft   Reason = 6 // the leader sent LEAVE
	ReasonOutvoted     Reason = 7 // a REJECT named a lower node with a higher epoch
	ReasonManual       Reason = 8 // asked for by an operator or a test
	// ReasonLeaderCrashed: a connection from or to the leader ended and
	// its host then refused a connection: the leader's process is gone.
	ReasonLeaderCrashed Reason = 9
	reasonLimit         Reason = 10

	// reasonMask selects the reason in the flags byte.
	reasonMask = 0x0f
)

// FlagWantMembers, in a JOIN, asks a node that did not know the joiner to
// reply with MEMBERS. The joiner sets it on the JOINs to the peers it was
// configured with, not on those to members it learned of later.
const FlagWantMembers uint8 = 0x10

// FlagAuth says that a TagLen-byte authentication tag follows the payload
// (see Sealer). Frames of an authenticated connection carry it, its HELLO
// included.
const FlagAuth uint8 = 0x20

var reasonNames = [reasonLimit]string{
	ReasonNone:          "none",
	ReasonBoot:          "boot",
	ReasonLeaderFailed:  "leader-failed",
	ReasonBullied:       "bullied",
	ReasonLowerLeader:   "lower-leader",
	ReasonWaitTimeout:   "wait-timeout",
	ReasonLeaderLeft:    "leader-left",
	ReasonOutvoted:      "outvoted",
	ReasonManual:        "manual",
	ReasonLeaderCrashed: "leader-crashed",
}

func (r Reason) String() string {
	if r < reasonLimit {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Message is one decoded frame. Payload and Tag alias the buffer it was
// decoded from; copy them to keep them past the next read.
type Message struct {
	Type    Type
	Flags   uint8
	Epoch   uint64
	From    uuid.UUID
	Payload []byte
	// Tag is the authentication tag of a frame with FlagAuth, TagLen
	// bytes; nil otherwise. Sealer computes it and Verifier checks it.
	Tag []byte
}

// Reason returns the election reason carried in the flags byte.
func (m *Message) Reason() Reason { return Reason(m.Flags & reasonMask) }

// Member is one entry of a membership list: a node ID and the address its
// peers dial.
type Member struct {
	ID   uuid.UUID
	Addr string
}
