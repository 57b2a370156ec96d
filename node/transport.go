package node

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Transport carries frames between nodes, in the manner of hashicorp/raft's
// transports: the Node hands it messages and never waits for a peer.
//
// Every message given to Send ends in exactly one of the Counters' Sent or
// Dropped for its type; there are no retries, so no frame reaches a peer
// twice.
type Transport interface {
	// Send queues msg for the peer to and returns at once. A message that
	// cannot be delivered (unknown or unreachable peer, full queue) is
	// dropped and counted. Send copies what it needs from msg.
	Send(to uuid.UUID, msg *wire.Message)
	// Recv returns the channel on which received messages arrive. Their
	// payloads are owned by the receiver.
	Recv() <-chan wire.Message
	// SetPeers makes members the set of peers Send can reach: new ones are
	// added, changed addresses take effect on the next connection, and peers
	// not listed are removed with their queued frames dropped. An entry with
	// the transport's own ID is ignored.
	SetPeers(members []wire.Member)
	// Counters returns the transport's frame counters.
	Counters() *Counters
	// LocalAddr returns the address the transport receives on.
	LocalAddr() string
	// Flush waits up to timeout for every queued frame to be written or
	// dropped, and reports whether all were.
	Flush(timeout time.Duration) bool
	// Close stops the transport; queued frames are dropped (DropClosed).
	Close() error
}

// ElectionRetractor is implemented by transports that can take back the
// ELECTIONs still queued, not yet written. The Node calls it when its
// Machine leaves StatusElecting: the election has its ANSWER, or ended
// otherwise, and sends no further messages for it (the design notes' rule
// 3), which holds on the wire only if the frames it queued earlier do not
// go out after. A Bully election asks in waves, and behind a partition the
// last waves wait for dials, many of them still queued when an ANSWER
// comes (node/bully, "askWave").
type ElectionRetractor interface {
	RetractElections()
}

// RefusalReporter is implemented by transports that learn when a peer
// refused a frame because nobody listened at its address (a TCP reset to
// the connection attempt): its process was not running. The Node hands
// each Refusal to Machine.Refused. The channel may drop reports when full;
// a refusal not reported only takes the election timeout to count.
type RefusalReporter interface {
	Refusals() <-chan Refusal
}

// Refusal is a frame a peer refused, or that could not reach it.
type Refusal struct {
	Peer  uuid.UUID
	Type  wire.Type
	Epoch uint64
	Cause RefusalCause
}

// RefusalCause says how a frame failed to reach its peer.
type RefusalCause uint8

const (
	// RefusalRefused: the peer's host answered the connection attempt
	// with a reset; its process was not running (Machine.Refused).
	RefusalRefused RefusalCause = iota
	// RefusalUnreachable: the connection attempt timed out (a partition,
	// a host down), or the transport was backing off from the peer after
	// a failed one and dropped the frame unsent. Reported only for the
	// election algorithms' own frames (wire.Type.Algorithm), and only to a
	// Machine that asks for it (UnreachableReporter).
	RefusalUnreachable
)

// offerUnreachable reports a frame of type t dropped as unreachable, if it
// is one an algorithm may want back (see RefusalUnreachable).
func offerUnreachable(q chan<- Refusal, peer uuid.UUID, t wire.Type, epoch uint64) {
	if t.Algorithm() != "" {
		offerRefusal(q, Refusal{Peer: peer, Type: t, Epoch: epoch, Cause: RefusalUnreachable})
	}
}

// offerRefusal queues r unless the queue is full: see RefusalReporter.
func offerRefusal(q chan<- Refusal, r Refusal) {
	select {
	case q <- r:
	default:
	}
}

// refusalQueueLen bounds the refusals waiting for the Node: a HALT round
// of a 250-node cluster whose other nodes are all down fits.
const refusalQueueLen = 1024

// ErrTransportClosed is returned by operations on a closed transport.
var ErrTransportClosed = errors.New("transport closed")

// InmemNetwork connects InmemTransports in one process, for tests of the
// runtime that need real goroutines and timers but no sockets. Delivery is
// in order per sender, instantaneous, and dropped (DropUnreachable) when
// the destination is closed, disconnected, or not on the network.
type InmemNetwork struct {
	mu    sync.Mutex
	nodes map[uuid.UUID]*InmemTransport
	cut   map[[2]uuid.UUID]bool
}

// NewInmemNetwork returns an empty network.
func NewInmemNetwork() *InmemNetwork {
	return &InmemNetwork{nodes: make(map[uuid.UUID]*InmemTransport), cut: make(map[[2]uuid.UUID]bool)}
}

// NewTransport attaches a transport for node id with address addr,
// replacing any earlier transport of the same ID (a restarted node).
func (n *InmemNetwork) NewTransport(id uuid.UUID, addr string) *InmemTransport {
	t := &InmemTransport{
		net:     n,
		id:      id,
		addr:    addr,
		in:      make(chan wire.Message, 1024),
		refused: make(chan Refusal, refusalQueueLen),
		peers:   make(map[uuid.UUID]bool),
	}
	n.mu.Lock()
	n.nodes[id] = t
	n.mu.Unlock()
	return t
}

// Cut drops every message from a to b until Heal.
func (n *InmemNetwork) Cut(a, b uuid.UUID) {
	n.mu.Lock()
	n.cut[[2]uuid.UUID{a, b}] = true
	n.mu.Unlock()
}

// Heal undoes Cut(a, b).
func (n *InmemNetwork) Heal(a, b uuid.UUID) {
	n.mu.Lock()
	delete(n.cut, [2]uuid.UUID{a, b})
	n.mu.Unlock()
}

// InmemTransport is a Transport on an InmemNetwork.
type InmemTransport struct {
	net      *InmemNetwork
	id       uuid.UUID
	addr     string
	in       chan wire.Message
	refused  chan Refusal
	counters Counters

	// Guarded by net.mu, so that a send and the receiver's Close are ordered.
	peers  map[uuid.UUID]bool
	closed bool
}

var (
	_ Transport       = (*InmemTransport)(nil)
	_ RefusalReporter = (*InmemTransport)(nil)
)

// Send implements Transport.
func (t *InmemTransport) Send(to uuid.UUID, msg *wire.Message) {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closed {
		t.counters.countDropped(msg.Type, DropClosed)
		return
	}
	if !t.peers[to] {
		t.counters.countDropped(msg.Type, DropUnknownPeer)
		return
	}
	dst := n.nodes[to]
	cut := n.cut[[2]uuid.UUID{t.id, to}]
	if dst == nil || dst.closed || cut {
		t.counters.countDropped(msg.Type, DropUnreachable)
		if !cut {
			// A stopped node, like a process that is not running, refuses;
			// a cut link is silent.
			offerRefusal(t.refused, Refusal{Peer: to, Type: msg.Type, Epoch: msg.Epoch})
		}
		return
	}
	m := *msg
	m.Payload = slices.Clone(msg.Payload)
	select {
	case dst.in <- m:
		t.counters.countSent(m.Type)
		dst.counters.countReceived(m.Type)
	default:
		t.counters.countDropped(m.Type, DropQueueFull)
	}
}

// Recv implements Transport.
func (t *InmemTransport) Recv() <-chan wire.Message { return t.in }

// Refusals implements RefusalReporter: frames to a node not on the network
// or closed.
func (t *InmemTransport) Refusals() <-chan Refusal { return t.refused }

// SetPeers implements Transport.
func (t *InmemTransport) SetPeers(members []wire.Member) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	clear(t.peers)
	for _, m := range members {
		if m.ID != t.id {
			t.peers[m.ID] = true
		}
	}
}

// Counters implements Transport.
func (t *InmemTransport) Counters() *Counters { return &t.counters }

// LocalAddr implements Transport.
func (t *InmemTransport) LocalAddr() string { return t.addr }

// Flush implements Transport; delivery is synchronous, so there is nothing
// to wait for.
func (t *InmemTransport) Flush(time.Duration) bool { return true }

// Close detaches the transport: later sends to it are dropped as
// unreachable, as if its process had died.
func (t *InmemTransport) Close() error {
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	t.closed = true
	if n.nodes[t.id] == t {
		delete(n.nodes, t.id)
	}
	return nil
}

// CrashProber is implemented by transports that can tell a crashed peer
// process from a silent one: its host closes the process's connections
// (FIN or reset) and refuses new ones. The Node confirms each reported end
// with a probe before it counts it (Machine.PeerCrashed): a peer may end a
// connection for other reasons, and a network fault may reset one.
type CrashProber interface {
	// PeerClosed returns the channel on which a peer's ID arrives when it
	// ended a connection to or from this node: an end of file or a reset
	// read from it, not this node closing it nor a frame it refused. The
	// channel may drop reports when full.
	PeerClosed() <-chan uuid.UUID
	// ProbePeer connects once to the address peer is listed at (not the
	// address a connection came from), within timeout (0: the
	// transport's own bound on a connection attempt), and closes the
	// connection at once, before any byte; ctx ends it early. A crashed
	// process's host refuses within one round trip; a probe that gets no
	// answer by then (a partition, a host down) proves nothing.
	ProbePeer(ctx context.Context, peer uuid.UUID, timeout time.Duration) ProbeResult
}

// ProbeResult is what a CrashProber's probe found.
type ProbeResult uint8

const (
	// ProbeNoAnswer: the connection attempt timed out or failed otherwise
	// (a partition, a host down, an unknown peer): no evidence either way.
	ProbeNoAnswer ProbeResult = iota
	// ProbeRefused: the peer's host answered with a reset; nobody listens
	// at the peer's address, so its process is gone.
	ProbeRefused
	// ProbeConnected: the peer's process accepts connections; it lives.
	ProbeConnected
)

func (r ProbeResult) String() string {
	switch r {
	case ProbeRefused:
		return "refused"
	case ProbeConnected:
		return "connected"
	}
	return "no answer"
}
