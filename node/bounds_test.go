package node

import (
	"math"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// stableSim returns a simulated cluster of n nodes agreed on its highest.
func stableSim(t *testing.T, n int) *simNetwork {
	t.Helper()
	s := newSimNetwork(t, 11, n, electiontest.Config())
	s.maxDly = simMaxDelay
	for i := range n {
		s.start(i)
	}
	s.runUntil(time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("boot: leader n%d, %v", l, err)
	}
	return s
}

// inject hands msg to node i as if it came off the wire, and returns the
// refusals the node reported.
func (s *simNetwork) inject(i int, msg wire.Message) []election.Event {
	n := s.nodes[i]
	n.refused = nil
	n.m.Step(s.now, &msg)
	s.flush(n)
	return n.refused
}

// crashLeaderAndAgree crashes node leader and checks that the survivors
// agree on the highest of them within the SLE2 bound.
func crashLeaderAndAgree(t *testing.T, s *simNetwork, leader int) {
	t.Helper()
	s.crash(leader)
	s.runUntil(s.now+2*time.Second, nil)
	if l, err := s.agreement(); err != nil || l != leader-1 {
		t.Fatalf("after the leader crashed: leader n%d, %v", l, err)
	}
}

// injectAgainstEpochWindow has node 1 of s take msg, fails t unless msg is
// refused for its epoch exactly when refused is set, and reports an epoch
// that a refused message moved. It returns the refusals.
func injectAgainstEpochWindow(t *testing.T, s *simNetwork, msg wire.Message, refused bool) []election.Event {
	t.Helper()
	before := s.nodes[1].m.Epoch()
	got := s.inject(1, msg)
	if ok := len(got) == 1 && got[0].Cause == election.CauseEpochWindow; ok != refused {
		t.Fatalf("refusals %+v, want refused=%v", got, refused)
	}
	if e := s.nodes[1].m.Epoch(); refused && e != before {
		t.Errorf("epoch moved %d -> %d on a refused message", before, e)
	}
	return got
}

func TestEpochWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     wire.Type
		epoch   func(cur uint64) uint64
		refused bool
	}{
		{"heartbeat at 2^64-1", wire.TypeHeartbeat, func(uint64) uint64 { return math.MaxUint64 }, true},
		{"coordinator past MaxEpoch", wire.TypeCoordinator, func(uint64) uint64 { return election.MaxEpoch + 1 }, true},
		{"halt one past the window", wire.TypeHalt, func(c uint64) uint64 { return c + election.EpochWindow + 1 }, true},
		{"reject one past the window", wire.TypeReject, func(c uint64) uint64 { return c + election.EpochWindow + 1 }, true},
		{"election at the window's edge", wire.TypeElection, func(c uint64) uint64 { return c + election.EpochWindow }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stableSim(t, 4)
			before := s.nodes[1].m.Epoch()
			msg := wire.Message{Type: tc.typ, Epoch: tc.epoch(before), From: s.nodes[3].id}
			if tc.typ == wire.TypeReject {
				msg.Payload = wire.AppendID(nil, s.nodes[3].id)
			}
			refused := injectAgainstEpochWindow(t, s, msg, tc.refused)
			if tc.refused {
				if refused[0].Peer.ID != s.nodes[3].id || refused[0].Peer.Addr != "n3" {
					t.Errorf("refusal names %+v, want n3 at its address", refused[0].Peer)
				}
			} else if e := s.nodes[1].m.Epoch(); e != before+election.EpochWindow {
				t.Errorf("epoch %d, want %d", e, before+election.EpochWindow)
			}
			// Whatever happened, the cluster still elects when its leader dies.
			crashLeaderAndAgree(t, s, 3)
		})
	}
}

func TestBootstrappingNodeTakesAnyEpoch(t *testing.T) {
	s := newSimNetwork(t, 3, 2, electiontest.Config())
	s.start(0)
	far := uint64(1 << 40)
	if refused := s.inject(0, wire.Message{Type: wire.TypeHeartbeat, Epoch: far, From: s.nodes[1].id}); len(refused) != 0 {
		t.Fatalf("a first start refused %+v", refused)
	}
	if e := s.nodes[0].m.Epoch(); e != far {
		t.Fatalf("epoch %d, want %d", e, far)
	}
	s.start(1)
	s.runUntil(s.now+time.Second, nil)
	if _, err := s.agreement(); err != nil {
		t.Fatal(err)
	}
	// Having followed a leader, it holds to the window.
	if refused := s.inject(0, wire.Message{Type: wire.TypeHeartbeat, Epoch: far * 2, From: s.nodes[1].id}); len(refused) != 1 {
		t.Fatalf("refusals %+v after following a leader, want 1", refused)
	}
}

func TestMembershipBounds(t *testing.T) {
	t.Run("unsolicited MEMBERS", func(t *testing.T) {
		s := stableSim(t, 3)
		fake := wire.Member{ID: uuid.New(), Addr: "attacker:1"}
		refused := s.inject(0, wire.Message{Type: wire.TypeMembers, Epoch: 1, From: s.nodes[2].id,
			Payload: wire.AppendMembers(nil, []wire.Member{fake})})
		if len(refused) != 1 || refused[0].Cause != election.CauseMembership {
			t.Fatalf("refusals %+v", refused)
		}
		if len(s.nodes[0].m.Members()) != 3 {
			t.Errorf("members %v", s.nodes[0].m.Members())
		}
	})
	t.Run("JOIN past MaxMembers", func(t *testing.T) {
		cfg := electiontest.Config()
		cfg.MaxMembers = 4
		s := newSimNetwork(t, 5, 3, cfg)
		for i := range 3 {
			s.start(i)
		}
		s.runUntil(time.Second, nil)
		join := func() []election.Event {
			return s.inject(0, wire.Message{Type: wire.TypeJoin, From: uuid.New(), Payload: []byte("x:1")})
		}
		if refused := join(); len(refused) != 0 {
			t.Fatalf("the 4th member was refused: %+v", refused)
		}
		if refused := join(); len(refused) != 1 || refused[0].Cause != election.CauseMembership {
			t.Fatalf("the 5th member: refusals %+v", refused)
		}
		if n := len(s.nodes[0].m.Members()); n != 4 {
			t.Errorf("%d members, MaxMembers 4", n)
		}
	})
	t.Run("insecure JOIN from a stranger", func(t *testing.T) {
		cfg := electiontest.Config()
		cfg.Insecure = true
		s := newSimNetwork(t, 5, 3, cfg)
		for i := range 3 {
			s.start(i)
		}
		s.runUntil(time.Second, nil)
		outsider := uuid.New()
		refused := s.inject(0, wire.Message{Type: wire.TypeJoin, From: outsider, Payload: []byte("x:1")})
		if len(refused) != 1 || refused[0].Cause != election.CauseMembership {
			t.Fatalf("refusals %+v", refused)
		}
		// Its COORDINATOR is then that of a stranger: ignored.
		s.inject(0, wire.Message{Type: wire.TypeCoordinator, Epoch: s.nodes[0].m.Epoch() + 1, From: outsider})
		if l, _ := s.nodes[0].m.Leader(); l != s.nodes[2].id {
			t.Errorf("n0 follows %s after an outsider's COORDINATOR", l)
		}
	})
}

// TestForgedLeaveHeals: a LEAVE in the leader's name that the leader did
// not send (possible only without a cluster key) makes a node forget it;
// the leader's next HEARTBEAT brings it back, and no split brain lasts.
func TestForgedLeaveHeals(t *testing.T) {
	s := stableSim(t, 4)
	s.inject(0, wire.Message{Type: wire.TypeLeave, Epoch: s.nodes[0].m.Epoch(), From: s.nodes[3].id})
	if n := len(s.nodes[0].m.Members()); n != 3 {
		t.Fatalf("n0 knows %d members after the LEAVE, want 3", n)
	}
	s.runUntil(s.now+2*time.Second, nil)
	if l, err := s.agreement(); err != nil || l != 3 {
		t.Fatalf("after the forged LEAVE: leader n%d, %v", l, err)
	}
	if n := len(s.nodes[0].m.Members()); n != 4 {
		t.Errorf("n0 knows %d members, want the leader back (4)", n)
	}
	crashLeaderAndAgree(t, s, 3)
}
