package node

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// Clock is the clock a node reads: its host's, unless a fault.ClockSkew
// offsets and skews it. Linux has no per-namespace wall clock, so a
// testbed's nodes share their host's, and a clock fault is made here, in
// the node: every wall time the node tells peers (the HELLO it stamps) or
// checks against theirs (helloClock) is Clock.Now, and the Machine's
// timers run on Clock.mono, so that with a rate heartbeats and timeouts
// run fast or slow as on a drifting crystal. The offset touches only wall
// readings; the Machine's clock never jumps. The event log and the status
// keep the host's clock for their timestamps, so that records of many
// nodes stay comparable; the status reports the skew in force.
//
// Make one with NewClock; a nil *Clock reads the host's clock. Safe for
// concurrent use.
type Clock struct {
	// host reads the host's clock: time.Now, or a test's virtual clock.
	host   func() time.Time
	origin time.Time // host reading at the first use, the monotonic origin
	state  atomic.Pointer[clockState]
}

// clockState is a skew and when it was set.
type clockState struct {
	skew fault.ClockSkew
	// at is the host's elapsed time since origin when skew was set;
	// monoAt is the skewed clock's reading then.
	at, monoAt time.Duration
}

// NewClock returns a clock reading the host's.
func NewClock() *Clock { return newClockOn(time.Now) }

func newClockOn(host func() time.Time) *Clock {
	c := &Clock{host: host, origin: host()}
	c.state.Store(&clockState{})
	return c
}

// hostNow reads the host's clock and its elapsed time since origin.
func (c *Clock) hostNow() (time.Time, time.Duration) {
	now := c.host()
	return now, now.Sub(c.origin)
}

// Now returns the node's wall time: the host's, plus the offset set, plus
// the drift at the rate set since then.
func (c *Clock) Now() time.Time {
	if c == nil {
		return time.Now()
	}
	now, el := c.hostNow()
	st := c.state.Load()
	return now.Add(st.skew.Offset + drift(el-st.at, st.skew.RatePPM))
}

// mono returns the node's monotonic clock: the host's elapsed time since
// the clock was made, run at the rate of each skew in force since.
func (c *Clock) mono() time.Duration {
	_, el := c.hostNow()
	st := c.state.Load()
	return st.monoAt + el - st.at + drift(el-st.at, st.skew.RatePPM)
}

// hostDuration converts a span of the node's monotonic clock into the
// host time it takes at the rate in force, for the host's timers.
func (c *Clock) hostDuration(d time.Duration) time.Duration {
	r := c.state.Load().skew.RatePPM
	if r == 0 {
		return d
	}
	return time.Duration(math.Round(float64(d) / (1 + r/1e6)))
}

// drift is what a clock running at ratePPM gains over elapsed.
func drift(elapsed time.Duration, ratePPM float64) time.Duration {
	if ratePPM == 0 {
		return 0
	}
	return time.Duration(float64(elapsed) * ratePPM / 1e6)
}

// Set puts skew in force from now: the wall clock reads the host's plus
// skew.Offset now and drifts at skew.RatePPM from here; the monotonic clock
// goes on from its current reading at the new rate. A zero skew puts the
// clock back on the host's.
func (c *Clock) Set(skew fault.ClockSkew) error {
	if err := skew.Validate(); err != nil {
		return err
	}
	_, el := c.hostNow()
	for {
		old := c.state.Load()
		mono := old.monoAt + el - old.at + drift(el-old.at, old.skew.RatePPM)
		if c.state.CompareAndSwap(old, &clockState{skew: skew, at: el, monoAt: mono}) {
			return nil
		}
	}
}

// Skew returns the skew in force: the offset of the wall clock from the
// host's now (the offset set plus the drift since) and the rate.
func (c *Clock) Skew() fault.ClockSkew {
	if c == nil {
		return fault.ClockSkew{}
	}
	_, el := c.hostNow()
	st := c.state.Load()
	return fault.ClockSkew{Offset: st.skew.Offset + drift(el-st.at, st.skew.RatePPM), RatePPM: st.skew.RatePPM}
}
