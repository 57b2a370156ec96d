package node

import (
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// virtualHost is a host clock a test moves by hand.
type virtualHost struct {
	mu  sync.Mutex
	now time.Time
}

func (v *virtualHost) read() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

func (v *virtualHost) advance(d time.Duration) {
	v.mu.Lock()
	v.now = v.now.Add(d)
	v.mu.Unlock()
}

func TestClockSkew(t *testing.T) {
	host := &virtualHost{now: time.Unix(1_800_000_000, 0)}
	c := newClockOn(host.read)
	if got := c.Now(); !got.Equal(host.read()) {
		t.Fatalf("unskewed clock reads %v, host %v", got, host.read())
	}
	host.advance(time.Second)
	if got := c.mono(); got != time.Second {
		t.Fatalf("unskewed monotonic clock %v after 1s", got)
	}

	// +90s, gaining 10% from now on.
	if err := c.Set(fault.ClockSkew{Offset: 90 * time.Second, RatePPM: 100_000}); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Now(), host.read().Add(90*time.Second); !got.Equal(want) {
		t.Errorf("wall clock at the fault %v, want %v", got, want)
	}
	if got := c.mono(); got != time.Second {
		t.Errorf("the offset moved the monotonic clock to %v, want it left at 1s", got)
	}
	host.advance(10 * time.Second)
	if got, want := c.Now(), host.read().Add(91*time.Second); !got.Equal(want) {
		t.Errorf("wall clock 10s after the fault %v, want %v (offset + 10%% of 10s)", got, want)
	}
	if got := c.mono(); got != 12*time.Second {
		t.Errorf("monotonic clock %v, want 12s (1s, then 10s at +10%%)", got)
	}
	if got := c.Skew(); got != (fault.ClockSkew{Offset: 91 * time.Second, RatePPM: 100_000}) {
		t.Errorf("skew in force %+v, want offset 91s at 100000 ppm", got)
	}
	if got := c.hostDuration(1100 * time.Millisecond); got != time.Second {
		t.Errorf("1.1s on the node's clock lasts %v of the host's, want 1s", got)
	}

	// A new skew: the offset is from the host's clock, and the monotonic
	// clock goes on from where it was, at the new rate.
	if err := c.Set(fault.ClockSkew{Offset: -time.Minute, RatePPM: -100_000}); err != nil {
		t.Fatal(err)
	}
	host.advance(10 * time.Second)
	if got, want := c.Now(), host.read().Add(-61*time.Second); !got.Equal(want) {
		t.Errorf("wall clock %v, want %v", got, want)
	}
	if got := c.mono(); got != 21*time.Second {
		t.Errorf("monotonic clock %v, want 21s (12s, then 10s at -10%%)", got)
	}

	if err := c.Set(fault.ClockSkew{}); err != nil {
		t.Fatal(err)
	}
	host.advance(time.Second)
	if got := c.Now(); !got.Equal(host.read()) || c.Skew() != (fault.ClockSkew{}) {
		t.Errorf("cleared clock reads %v (skew %+v), host %v", got, c.Skew(), host.read())
	}
	if err := c.Set(fault.ClockSkew{RatePPM: 2e6}); err == nil || !strings.Contains(err.Error(), "ppm") {
		t.Errorf("a rate of 2e6 ppm: %v, want refused", err)
	}
}

// TestTCPHelloStampedWithSkewedClock has a node whose clock is 6 minutes
// ahead dial a peer allowing 5 minutes: the peer refuses its HELLO, and
// says by how much it is off; 90 seconds ahead passes.
func TestTCPHelloStampedWithSkewedClock(t *testing.T) {
	key := testClusterKey(t)
	log := &syncBuffer{}
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, Log: NewEventLog(log, LogJSON, uuid.New())})

	ahead := NewClock()
	if err := ahead.Set(fault.ClockSkew{Offset: 6 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, Clock: ahead})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: a.id})
	waitIssue(t, b, IssueReplay, 1, 5*time.Second)
	var detail string
	// The issue is counted before it is logged.
	for deadline := time.Now().Add(5 * time.Second); detail == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for _, r := range log.records(t) {
			if r.Event == "peer_refused" {
				detail = r.Error
			}
		}
	}
	// 6 minutes less the time the HELLO took from stamp to check.
	if !regexp.MustCompile(`(6m0s|5m59\.\d+s) ahead of this node's clock`).MatchString(detail) {
		t.Errorf("peer_refused says %q, want the 6 minutes it is ahead", detail)
	}

	near := NewClock()
	if err := near.Set(fault.ClockSkew{Offset: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, Clock: near})
	c.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	c.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 2, From: c.id})
	if m := recvN(t, b, 1, 5*time.Second)[0]; m.From != c.id || m.Epoch != 2 {
		t.Errorf("received %v, want the HEARTBEAT of the node 90s ahead", m)
	}
	if n := b.counters.Issues(IssueReplay); n != 1 {
		t.Errorf("%d HELLOs refused, want only the one 6 minutes ahead", n)
	}
}

// TestControlSetClock skews a running node's clock through its control
// socket: its status and metrics report the skew, a bad one is refused,
// and a zero one clears it.
func TestControlSetClock(t *testing.T) {
	h := startHosted(t, 1)[0]
	ctx := t.Context()
	skew := fault.ClockSkew{Offset: 90 * time.Second, RatePPM: 500}
	if err := h.ctl.SetClock(ctx, skew); err != nil {
		t.Fatal(err)
	}
	st, err := h.ctl.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The drift since is 500 ppm of the time the status took.
	if st.Clock == nil || st.Clock.RatePPM != 500 || st.Clock.Offset < 90*time.Second || st.Clock.Offset > 90*time.Second+time.Millisecond {
		t.Errorf("status clock %+v, want offset 90s at 500 ppm", st.Clock)
	}
	var e expoWriter
	writeNodeMetrics(&e, h.r.Node())
	if out := string(e.b); !strings.Contains(out, "bullylab_clock_offset_seconds 90.") || !strings.Contains(out, "bullylab_clock_rate_ppm 500\n") {
		t.Errorf("metrics do not report the skew:\n%s", out)
	}
	if err := h.ctl.SetClock(ctx, fault.ClockSkew{RatePPM: 1e6}); err == nil || !strings.Contains(err.Error(), "clock rate") {
		t.Errorf("a rate of 1e6 ppm: %v, want refused naming the rate", err)
	}
	if err := h.ctl.SetClock(ctx, fault.ClockSkew{}); err != nil {
		t.Fatal(err)
	}
	if st, err := h.ctl.Status(ctx); err != nil || st.Clock != nil {
		t.Errorf("status clock %+v (%v) after clearing, want none", st.Clock, err)
	}
}

// TestNodeTimersAtClockRate has a node's Machine read a clock gaining 10%:
// its clock runs 1.1 s a host second, and the host waits 1/1.1 of the
// time the Machine has until its next deadline.
func TestNodeTimersAtClockRate(t *testing.T) {
	host := &virtualHost{now: time.Unix(1_800_000_000, 0)}
	clock := newClockOn(host.read)
	cfg := fastConfig()
	cfg.ID, cfg.Addr = uuid.New(), "inmem-0"
	cfg.Peers = []wire.Member{{ID: cfg.ID, Addr: cfg.Addr}}
	n, err := New(Options{Config: cfg, Transport: NewInmemNetwork().NewTransport(cfg.ID, cfg.Addr), Store: &memStore{}, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := clock.Set(fault.ClockSkew{Offset: time.Hour, RatePPM: 100_000}); err != nil {
		t.Fatal(err)
	}
	host.advance(time.Second)
	if got := n.now(); got != 1100*time.Millisecond {
		t.Errorf("the Machine's clock reads %v a host second after New, want 1.1s (the offset does not move it)", got)
	}
	// The Machine's first deadline is its boot election's, at 0: a
	// campaign now sets one ahead.
	n.m.Campaign(n.now(), wire.ReasonManual)
	left := n.m.NextDeadline() - n.now()
	if left <= 0 {
		t.Fatalf("the Machine's next deadline %v is not after its clock's %v: nothing to wait for", n.m.NextDeadline(), n.now())
	}
	if got, want := n.untilDeadline(), time.Duration(math.Round(float64(left)/1.1)); got != want {
		t.Errorf("the host waits %v for the Machine's %v, want %v", got, left, want)
	}
}
