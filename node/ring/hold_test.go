package ring

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
)

// TestRingHoldBoot: a held ring node sends nothing until a run reaches
// it, forwards the run and follows its ELECTED as any node does, takes a
// leader's HEARTBEAT for the ELECTED it missed, and starts its own run
// once Campaign releases it.
func TestRingHoldBoot(t *testing.T) {
	held := func(t *testing.T) *ringOf {
		t.Helper()
		r := newRing(t, 1, nil)
		r.cfg.HoldBoot = true
		m, err := NewElector(r.cfg, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.m = m
		for _, now := range []time.Duration{0, time.Hour} {
			r.m.Tick(now)
			r.expect("")
			if r.m.Status() != election.StatusHeld {
				t.Fatalf("held, at %v: %s", now, r.m.Status())
			}
		}
		r.now = time.Hour
		return r
	}
	t.Run("top's run", func(t *testing.T) {
		r := held(t)
		r.run(0, 1, 3, 3)
		r.expect("RING_ELECTION e1 n3 n3 -> n2")
		r.elected(0, 1, 3)
		r.expect("ELECTED e1 n3 -> n2")
		if l, _ := r.m.Leader(); r.m.Status() != election.StatusNormal || l != r.ids[3] {
			t.Fatalf("after ELECTED: %s under %s", r.m.Status(), r.name(l))
		}
	})
	t.Run("heartbeat", func(t *testing.T) {
		r := held(t)
		r.m.Step(r.now, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: r.ids[3]})
		if l, _ := r.m.Leader(); r.m.Status() != election.StatusNormal || l != r.ids[3] {
			t.Fatalf("after HEARTBEAT: %s under %s", r.m.Status(), r.name(l))
		}
	})
	t.Run("released", func(t *testing.T) {
		r := held(t)
		r.m.Campaign(r.now, wire.ReasonBoot)
		r.expect("RING_ELECTION e1 n1 n1 -> n2")
	})
}
