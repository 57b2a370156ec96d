package node

import (
	"sync/atomic"

	"github.com/bullylab/bullylab/wire"
)

// DropReason says why a transport dropped a frame instead of writing it.
type DropReason uint8

const (
	// DropQueueFull: the peer's send queue was full.
	DropQueueFull DropReason = iota
	// DropUnreachable: a dial to the peer failed, or the peer was backing
	// off after one; the frames queued at that moment are dropped with it.
	DropUnreachable
	// DropExpired: the frame waited in the queue longer than the frame TTL.
	DropExpired
	// DropWriteError: the write to the socket failed or timed out. Part of
	// the frame may have reached the wire; a capture shows it truncated.
	DropWriteError
	// DropUnknownPeer: no address is known for the destination.
	DropUnknownPeer
	// DropClosed: the transport was closed, or the peer removed, with the
	// frame still queued.
	DropClosed
	// DropElectionEnded: an ELECTION still queued when the election that
	// sent it ended (ElectionRetractor).
	DropElectionEnded
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	DropQueueFull:     "queue_full",
	DropUnreachable:   "unreachable",
	DropExpired:       "expired",
	DropWriteError:    "write_error",
	DropUnknownPeer:   "unknown_peer",
	DropClosed:        "closed",
	DropElectionEnded: "election_ended",
}

func (r DropReason) String() string {
	if r < numDropReasons {
		return dropReasonNames[r]
	}
	return "unknown"
}

// Counters counts frames by wire type. They are exact, not sampled: the
// testbed compares them frame by frame with a packet capture, so a transport
// counts a frame as sent only once the socket accepted all of its bytes,
// and as received once it was decoded off the socket. Every frame handed to
// Send ends up in exactly one of Sent and Dropped. Safe for concurrent use.
type Counters struct {
	sent, received, dropped [256]atomic.Uint64
	byReason                [numDropReasons]atomic.Uint64
	rxErrors                atomic.Uint64
	rejected                atomic.Uint64
	peerIssues              [numPeerIssues]atomic.Uint64
}

func (c *Counters) countSent(t wire.Type)     { c.sent[t].Add(1) }
func (c *Counters) countReceived(t wire.Type) { c.received[t].Add(1) }
func (c *Counters) countDropped(t wire.Type, r DropReason) {
	c.dropped[t].Add(1)
	c.byReason[r].Add(1)
}

// Sent returns how many frames of type t were written to a socket.
func (c *Counters) Sent(t wire.Type) uint64 { return c.sent[t].Load() }

// Received returns how many frames of type t were read off a socket.
func (c *Counters) Received(t wire.Type) uint64 { return c.received[t].Load() }

// Dropped returns how many frames of type t were given up on.
func (c *Counters) Dropped(t wire.Type) uint64 { return c.dropped[t].Load() }

// DroppedFor returns how many frames were dropped for reason r.
func (c *Counters) DroppedFor(r DropReason) uint64 {
	if r >= numDropReasons {
		return 0
	}
	return c.byReason[r].Load()
}

// CounterSnapshot is a copy of Counters keyed by names, as served in the
// control socket's /status. Every defined wire type and drop reason has a
// key, zero or not, so that tools can rely on the keys being there; a frame
// of a type this build does not know shows up as "TYPE(n)".
type CounterSnapshot struct {
	Sent     map[string]uint64 `json:"sent"`
	Received map[string]uint64 `json:"received"`
	Dropped  map[string]uint64 `json:"dropped"`
	// DroppedBy splits Dropped by DropReason name.
	DroppedBy map[string]uint64 `json:"dropped_by_reason"`
	// RxErrors counts inbound connections closed on a framing error
	// (bad start byte, version, checksum, oversized frame).
	RxErrors uint64 `json:"rx_errors"`
	// Rejected counts received frames not handed to the Machine because
	// their payload was malformed.
	Rejected uint64 `json:"rejected"`
	// PeerIssues counts what peers did wrong, by PeerIssue name; every
	// name is present.
	PeerIssues map[string]uint64 `json:"peer_issues"`
}

// Issues returns how many times peers did what issue names.
func (c *Counters) Issues(issue PeerIssue) uint64 {
	if issue >= numPeerIssues {
		return 0
	}
	return c.peerIssues[issue].Load()
}

// Snapshot copies the counters. Each counter is read atomically, but not all
// of them at one instant.
func (c *Counters) Snapshot() CounterSnapshot {
	s := CounterSnapshot{
		Sent:       make(map[string]uint64, len(wire.Types)),
		Received:   make(map[string]uint64, len(wire.Types)),
		Dropped:    make(map[string]uint64, len(wire.Types)),
		DroppedBy:  make(map[string]uint64, numDropReasons),
		RxErrors:   c.rxErrors.Load(),
		Rejected:   c.rejected.Load(),
		PeerIssues: make(map[string]uint64, numPeerIssues),
	}
	for i := range numPeerIssues {
		s.PeerIssues[i.String()] = c.peerIssues[i].Load()
	}
	for i := range c.sent {
		t := wire.Type(i)
		sent, recv, drop := c.sent[i].Load(), c.received[i].Load(), c.dropped[i].Load()
		if t.Valid() || sent+recv+drop > 0 {
			s.Sent[t.String()] = sent
			s.Received[t.String()] = recv
			s.Dropped[t.String()] = drop
		}
	}
	for r := range numDropReasons {
		s.DroppedBy[r.String()] = c.byReason[r].Load()
	}
	return s
}

// Total sums a by-type map of a CounterSnapshot.
func Total(byType map[string]uint64) uint64 {
	var n uint64
	for _, v := range byType {
		n += v
	}
	return n
}
