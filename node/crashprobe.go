package node

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Probes of one peer are paced: the first at once (or after the Machine's
// ProbeDelay), each later one of a burst crashProbeMinGap after the one before, doubling up to
// crashProbeInterval, so that a peer ending connections in a loop costs its
// followers at most one probe per interval once the burst is over; an end
// reported meanwhile is probed in its turn, never dropped. A burst ends
// when no probe ran for crashProbeInterval.
//
// The short first gaps are for a dying process: its kernel closes its
// sockets one by one, and on a loaded host it was descheduled for 31 ms
// between a connection's FIN and its listener's close, so a probe sent on
// the FIN connected (TCPTransport.ProbePeer then waits for the reset).
const (
	crashProbeMinGap   = 5 * time.Millisecond
	crashProbeInterval = 100 * time.Millisecond
)

// crashProbes confirms, for the Run goroutine, that a peer which ended a
// connection is gone: at most one probe in flight per peer, at most one per
// crashProbeInterval, and the peers whose probe was refused sent on
// refused.
type crashProbes struct {
	prober  CrashProber
	ctx     context.Context
	refused chan uuid.UUID
	// watched reports, from any goroutine, whether a peer still needs
	// evidence: a delayed probe is skipped once the node left its leader.
	watched func(uuid.UUID) bool
	wg      sync.WaitGroup

	mu    sync.Mutex
	peers map[uuid.UUID]*peerProbe
}

type peerProbe struct {
	running bool          // a goroutine probes the peer
	again   bool          // an end was reported while it ran
	last    time.Time     // when the last probe began
	gap     time.Duration // from last to the next probe
}

func newCrashProbes(ctx context.Context, p CrashProber, watched func(uuid.UUID) bool) *crashProbes {
	return &crashProbes{prober: p, ctx: ctx, refused: make(chan uuid.UUID, 16), watched: watched, peers: make(map[uuid.UUID]*peerProbe)}
}

// request probes peer, at once or after delay if this starts a burst,
// else once its gap has passed.
func (c *crashProbes) request(peer uuid.UUID, delay time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pp := c.peers[peer]
	if pp == nil {
		pp = &peerProbe{}
		c.peers[peer] = pp
	}
	if pp.running {
		pp.again = true
		return
	}
	if time.Since(pp.last) >= crashProbeInterval {
		// A new burst.
		pp.last, pp.gap = time.Now(), delay
	}
	pp.running = true
	c.wg.Go(func() { c.run(peer, pp) })
}

func (c *crashProbes) run(peer uuid.UUID, pp *peerProbe) {
	for {
		c.mu.Lock()
		wait := time.Until(pp.last.Add(pp.gap))
		c.mu.Unlock()
		if wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-c.ctx.Done():
				timer.Stop()
				c.done(pp)
				return
			}
		}
		c.mu.Lock()
		pp.last, pp.again = time.Now(), false
		pp.gap = min(max(2*pp.gap, crashProbeMinGap), crashProbeInterval)
		c.mu.Unlock()
		if !c.watched(peer) {
			c.done(pp)
			return
		}
		result := c.prober.ProbePeer(c.ctx, peer, 0)
		if result == ProbeRefused {
			select {
			case c.refused <- peer:
			default: // the Node has evidence waiting already
			}
		}
		c.mu.Lock()
		if !pp.again || result == ProbeRefused || c.ctx.Err() != nil {
			pp.running, pp.again = false, false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

func (c *crashProbes) done(pp *peerProbe) {
	c.mu.Lock()
	pp.running, pp.again = false, false
	c.mu.Unlock()
}
