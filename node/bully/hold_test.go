package bully

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// TestHoldBoot: a node started held sends nothing and starts no election
// however long it waits, follows a leader that halts it or announces
// itself, and elects as a booting node does once Campaign releases it.
func TestHoldBoot(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(11, 12)), 4)
	peers := electiontest.Members(ids)
	held := func(t *testing.T) *Elector {
		t.Helper()
		c := electiontest.Config()
		c.ID, c.Addr, c.Peers, c.HoldBoot = ids[1], "n1", peers, true
		m, err := NewElector(c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, now := range []time.Duration{0, time.Hour} {
			m.Tick(now)
			if out := m.Drain(); len(out.Messages) != 0 || m.Status() != election.StatusHeld {
				t.Fatalf("held, at %v: %s with %d messages, want held with none", now, m.Status(), len(out.Messages))
			}
		}
		return m
	}
	sent := func(m *Elector) map[wire.Type][]uuid.UUID {
		to := make(map[wire.Type][]uuid.UUID)
		for _, e := range m.Drain().Messages {
			to[e.Msg.Type] = append(to[e.Msg.Type], e.To)
		}
		return to
	}
	top := ids[3]

	t.Run("halted then coordinator", func(t *testing.T) {
		m := held(t)
		m.Step(time.Second, &wire.Message{Type: wire.TypeHalt, Epoch: 1, From: top})
		if got := sent(m); m.Status() != election.StatusWaiting || len(got[wire.TypeHaltAck]) != 1 || got[wire.TypeHaltAck][0] != top {
			t.Fatalf("after HALT: %s, sent %v; want waiting with a HALT_ACK to the top", m.Status(), got)
		}
		m.Step(time.Second, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: top})
		if l, e := m.Leader(); m.Status() != election.StatusNormal || l != top || e != 1 {
			t.Fatalf("after COORDINATOR: %s under %v at %d, want normal under the top at 1", m.Status(), l, e)
		}
	})
	t.Run("coordinator", func(t *testing.T) {
		m := held(t)
		m.Step(time.Second, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: top})
		if l, _ := m.Leader(); m.Status() != election.StatusNormal || l != top {
			t.Fatalf("after COORDINATOR: %s under %v, want normal under the top", m.Status(), l)
		}
		if got := sent(m); len(got) != 0 {
			t.Fatalf("following sent %v", got)
		}
	})
	// The COORDINATOR lost (dropped from the leader's queue), the leader's
	// HEARTBEAT stands for it; one from a lower node, or one the promise
	// outranks, is ignored, not rejected.
	t.Run("halted then heartbeat", func(t *testing.T) {
		m := held(t)
		m.Step(time.Second, &wire.Message{Type: wire.TypeHalt, Epoch: 2, From: top})
		sent(m)
		m.Step(time.Second, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: ids[2]})
		m.Step(time.Second, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 2, From: ids[0]})
		if got := sent(m); m.Status() != election.StatusWaiting || len(got) != 0 {
			t.Fatalf("after an outranked and a lower HEARTBEAT: %s, sent %v; want waiting, silent", m.Status(), got)
		}
		m.Step(2*time.Second, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 2, From: top})
		if l, e := m.Leader(); m.Status() != election.StatusNormal || l != top || e != 2 {
			t.Fatalf("after the top's HEARTBEAT: %s under %v at %d, want normal under the top at 2", m.Status(), l, e)
		}
		if got := sent(m); len(got) != 0 {
			t.Fatalf("following sent %v", got)
		}
	})
	t.Run("heartbeat", func(t *testing.T) {
		m := held(t)
		m.Step(time.Second, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: top})
		if l, _ := m.Leader(); m.Status() != election.StatusNormal || l != top {
			t.Fatalf("after HEARTBEAT: %s under %v, want normal under the top", m.Status(), l)
		}
	})
	t.Run("released", func(t *testing.T) {
		m := held(t)
		m.Campaign(time.Second, wire.ReasonBoot)
		got := sent(m)
		if m.Status() != election.StatusElecting || !slices.Equal(got[wire.TypeElection], []uuid.UUID{top}) || len(got) != 1 {
			t.Fatalf("released: %s, sent %v; want electing with an ELECTION to the top", m.Status(), got)
		}
		m.Tick(time.Second + m.Config.DetectionStagger)
		if got := sent(m); !slices.Equal(got[wire.TypeElection], []uuid.UUID{ids[2]}) || len(got) != 1 {
			t.Fatalf("a stagger step unanswered: sent %v; want an ELECTION to the other one above", got)
		}
	})
}

// StandbyPeers names whom a follower would send to first were its leader
// to fail: the highest follower every member below it (its HALT round),
// each other follower the highest one (its HALT_ACK); nobody else names
// anyone.
func TestStandbyPeers(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(21, 22)), 5)
	peers := electiontest.Members(ids)
	top := ids[4]
	following := func(t *testing.T, self int) *Elector {
		t.Helper()
		c := electiontest.Config()
		c.ID, c.Addr, c.Peers = ids[self], "n", peers
		m, err := NewElector(c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if self != 4 {
			if m.StandbyPeers() != nil {
				t.Fatalf("n%d names peers before it follows anyone", self)
			}
			m.Step(time.Second, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: top})
		}
		return m
	}
	for self, want := range map[int][]uuid.UUID{
		3: ids[:3],
		2: {ids[3]},
		0: {ids[3]},
	} {
		m := following(t, self)
		if l, _ := m.Leader(); m.Status() != election.StatusNormal || l != top {
			t.Fatalf("n%d: %s under %v, want normal under the top", self, m.Status(), l)
		}
		if got := m.StandbyPeers(); !slices.Equal(got, want) {
			t.Errorf("n%d names %v, want %v", self, got, want)
		}
	}
	m := following(t, 4)
	m.Campaign(0, wire.ReasonManual)
	m.Tick(time.Hour)
	if !m.IsLeader() || m.StandbyPeers() != nil {
		t.Errorf("the leader (leading: %v) names %v, want nobody", m.IsLeader(), m.StandbyPeers())
	}
}
