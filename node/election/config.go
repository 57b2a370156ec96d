package election

import (
	"errors"
	"fmt"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Config holds what a Machine needs to know before it starts. Build one from
// DefaultConfig and check it with Validate. The timeouts are Bully's; an
// algorithm takes the ones it has a use for.
type Config struct {
	// ID is this node's identity: a version-4 UUID that never changes.
	ID uuid.UUID
	// Addr is the address peers dial to reach this node; it is announced in JOIN.
	Addr string
	// Peers are the other members known at start. An entry with ID equal to
	// the node's own is ignored, so every node can share one peers file.
	Peers []wire.Member

	// HeartbeatInterval is how often the leader sends HEARTBEAT to every member.
	HeartbeatInterval time.Duration
	// FailureTimeout is how long a follower waits without a heartbeat from its
	// leader before it starts an election.
	FailureTimeout time.Duration
	// Join announces the node with JOIN at start, for a node the others may
	// not list yet. A node restarted after it left always joins again.
	Join bool
	// HoldBoot starts the node without its boot election (StatusHeld): it
	// listens and handles every message as usual, so a leader's HALT or
	// COORDINATOR makes it a follower, but it starts no election until
	// the runtime releases it (Campaign). A lab that starts every node
	// held, then the highest alone, boots N nodes with about 3N election
	// frames instead of each booting node's ELECTION to every member above
	// it, most of them not up yet.
	HoldBoot bool

	// ElectionTimeout bounds each phase of a Bully election: waiting for an
	// ANSWER after ELECTION, and for HALT_ACKs after HALT. A node that was
	// answered or halted waits WaitFactor times as long for a COORDINATOR.
	// The ring's run timeout is (2N+1) of it for N members
	// (ring.RunTimeout).
	ElectionTimeout time.Duration

	// DetectionStagger delays a follower's failure detection by this much for
	// every member ranked between it and its leader, and a waiting node's
	// timeout likewise for every member between it and the node it waits
	// for; the delay is capped at ElectionTimeout (see StaggerDelay).
	// After a leader crash the highest survivor then detects first and HALTs
	// the others before their timers fire, instead of every survivor electing
	// at once. A Bully election's waves of ELECTIONs go this far apart
	// (AskSpread). 0 disables both. It changes timing and how many
	// ELECTIONs an answered node sends, never safety.
	DetectionStagger time.Duration

	// MaxMembers bounds the membership list, this node included: a JOIN or
	// MEMBERS that would take it past this is refused, so that no peer can
	// make a node remember, and dial, an unbounded number of addresses.
	// 0 means DefaultMaxMembers.
	MaxMembers int
	// Insecure says that peers' IDs are not proven (TCP without a cluster
	// key): a JOIN from an ID this node does not know is then refused, so
	// that whoever reaches the port cannot become a member. The cluster's
	// membership is then the peers file's.
	Insecure bool
}

// DefaultMaxMembers is DefaultConfig's MaxMembers: every node of the
// largest shipped topology four times over.
const DefaultMaxMembers = 1024

// EpochWindow is how far one message may move a node's epoch forward: a
// message whose epoch is more than EpochWindow above the highest the node
// has seen is ignored and reported (CauseEpochWindow). A healthy cluster
// moves its epoch by one or two per election, so only a node that slept
// through some 65,536 elections falls this far behind; it catches up by
// joining again (JOIN's MEMBERS reply sets its epoch), and a node that has
// followed no leader since its first start takes any epoch up to MaxEpoch.
// A member with a bug still needs 2^47 messages to drive epochs to
// MaxEpoch.
const EpochWindow = 1 << 16

// MaxEpoch is the highest epoch a node accepts or reaches. Messages above
// it are ignored, so that epoch+1 never overflows, whatever a peer sends.
const MaxEpoch = 1 << 63

// DefaultConfig returns timeouts suited to a LAN or a testbed on one host.
func DefaultConfig() Config {
	return Config{
		HeartbeatInterval: 100 * time.Millisecond,
		FailureTimeout:    500 * time.Millisecond,
		ElectionTimeout:   200 * time.Millisecond,
		// One step of the stagger must cover what separates the highest
		// survivor's detection from the next node's: the skew between the
		// two last HEARTBEATs (the leader writes N frames in a row, a few
		// ms), the survivor's timer wakeup, its HALT over a new TCP
		// connection (handshake plus one delay: three one-way delays, under
		// 1 ms on a LAN) and the next node's wakeup to read it. On a loaded
		// 2-core host with dozens of nodes each wakeup can wait ~20 ms for a
		// core, so 50 ms. The stagger costs nothing when the highest survivor
		// is alive (its rank is 0), so erring long is cheap; with the cap at
		// ElectionTimeout, four ranks get distinct deadlines.
		DetectionStagger: 50 * time.Millisecond,
		MaxMembers:       DefaultMaxMembers,
	}
}

// MemberLimit is MaxMembers with 0 taking the default.
func (c Config) MemberLimit() int {
	if c.MaxMembers == 0 {
		return DefaultMaxMembers
	}
	return c.MaxMembers
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid config")

func configError(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
}

// Validate checks c and returns an error naming the first bad field.
func (c Config) Validate() error {
	if why := IDProblem(c.ID); why != "" {
		return configError("ID", "%s is not a version-4 UUID: %s", c.ID, why)
	}
	if c.HeartbeatInterval <= 0 {
		return configError("HeartbeatInterval", "must be positive, got %v", c.HeartbeatInterval)
	}
	if c.FailureTimeout <= c.HeartbeatInterval {
		return configError("FailureTimeout", "%v must be longer than HeartbeatInterval %v", c.FailureTimeout, c.HeartbeatInterval)
	}
	if c.ElectionTimeout <= 0 {
		return configError("ElectionTimeout", "must be positive, got %v", c.ElectionTimeout)
	}
	if c.DetectionStagger < 0 {
		return configError("DetectionStagger", "must not be negative (0 disables it), got %v", c.DetectionStagger)
	}
	if err := wire.CheckAddr(c.Addr); err != nil {
		return configError("Addr", "%v", err)
	}
	if c.MaxMembers != 0 && (c.MaxMembers < 2 || c.MaxMembers > wire.MaxMembers) {
		return configError("MaxMembers", "must be between 2 and %d (0 for %d), got %d", wire.MaxMembers, DefaultMaxMembers, c.MaxMembers)
	}
	if max := c.MemberLimit(); len(c.Peers) >= max {
		return configError("Peers", "%d peers, at most %d (MaxMembers %d, this node included)", len(c.Peers), max-1, max)
	}
	seen := make(map[uuid.UUID]string, len(c.Peers))
	for i, p := range c.Peers {
		if why := IDProblem(p.ID); why != "" {
			return configError(fmt.Sprintf("Peers[%d].ID", i), "%s is not a version-4 UUID: %s", p.ID, why)
		}
		if prev, dup := seen[p.ID]; dup {
			return configError(fmt.Sprintf("Peers[%d].ID", i), "%s listed twice (%s and %s)", p.ID, prev, p.Addr)
		}
		seen[p.ID] = p.Addr
		if p.ID != c.ID && p.Addr == "" {
			return configError(fmt.Sprintf("Peers[%d].Addr", i), "peer %s has no address", p.ID)
		}
		if err := wire.CheckAddr(p.Addr); err != nil {
			return configError(fmt.Sprintf("Peers[%d].Addr", i), "peer %s: %v", p.ID, err)
		}
	}
	return nil
}

// IDProblem says why id is not a node ID, a version-4 UUID of the RFC 9562
// variant, or returns "". The variant matters too: with another variant the
// version nibble means nothing.
func IDProblem(id uuid.UUID) string {
	switch {
	case id == uuid.Nil:
		return "it is the nil UUID"
	case id.Version() != 4:
		return fmt.Sprintf("it is version %d", id.Version())
	case id.Variant() != uuid.RFC4122:
		return fmt.Sprintf("its variant is %s", id.Variant())
	}
	return ""
}
