package node

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// Warmer is implemented by transports that can connect to peers before
// there is anything to send them, so that an election's first frames do
// not wait for a TCP handshake and a HELLO: on star16 the highest
// follower's 14 connects and HELLOs, and each lower node's one back,
// were 8 of a leader crash's 34 ms to a new leader.
type Warmer interface {
	// Warm connects to each of peers that has no connection, after
	// waiting after, and again after twice as long (up to
	// maxWarmBackoff times after) while any of them has none: a peer
	// still booting refuses. Each call replaces the peers of the one
	// before; nil stops. A failed connect reports nothing and backs
	// nothing off: the first frame for that peer dials as it would have.
	// The peers are only connected to; Warm sends them no message.
	Warm(peers []uuid.UUID, after time.Duration)
}

var _ Warmer = (*TCPTransport)(nil)

// maxWarmBackoff caps the wait between a Warm's rounds at this many times
// its first: a standby peer that is down costs one connect attempt a few
// seconds.
const maxWarmBackoff = 8

// tcpWarmer schedules a TCPTransport's warm-up rounds.
type tcpWarmer struct {
	mu    sync.Mutex
	gen   uint64 // counts Warm calls; a round of an older one ends
	timer *time.Timer
}

// Warm implements Warmer. Only with a cluster key: its HELLO is the
// connection's first frame, and without one an accepted connection idle
// for HandshakeTimeout is closed.
func (t *TCPTransport) Warm(peers []uuid.UUID, after time.Duration) {
	if t.cfg.Key == nil {
		return
	}
	t.warmer.mu.Lock()
	defer t.warmer.mu.Unlock()
	t.warmer.gen++
	if t.warmer.timer != nil {
		t.warmer.timer.Stop()
		t.warmer.timer = nil
	}
	if len(peers) > 0 {
		t.scheduleWarm(t.warmer.gen, peers, after, after)
	}
}

// scheduleWarm runs a warm-up round of gen after wait; t.warmer.mu is held.
func (t *TCPTransport) scheduleWarm(gen uint64, peers []uuid.UUID, wait, first time.Duration) {
	t.warmer.timer = time.AfterFunc(wait, func() {
		cold := false
		for _, id := range peers {
			if !t.warm(id) {
				cold = true
			}
		}
		t.warmer.mu.Lock()
		defer t.warmer.mu.Unlock()
		if cold && gen == t.warmer.gen {
			t.scheduleWarm(gen, peers, min(2*wait, maxWarmBackoff*first), first)
		}
	})
}

// warm reports whether id is connected, or being connected by a writer
// with a frame to send; if not, it has a writer connect to it.
func (t *TCPTransport) warm(id uuid.UUID) bool {
	t.addPeer(id)
	t.mu.RLock()
	defer t.mu.RUnlock()
	p := t.peers[id]
	// A backoff is not in the way: it was from the peer's boot, as a
	// rule, and one connect is what a backoff lets through anyway.
	if t.closed || p == nil {
		return true
	}
	p.mu.Lock()
	// With no writer the connection is stop's, which needs t.mu.
	if p.writing || p.stopped || (p.conn != nil && !p.conn.dead.Load()) {
		p.mu.Unlock()
		return true
	}
	p.queue = append(p.queue, tcpFrame{warm: true, at: t.mono()})
	p.pending.Add(1)
	p.writing = true
	p.mu.Unlock()
	t.wg.Add(1)
	go p.run()
	return false
}
