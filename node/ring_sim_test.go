package node

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
)

// ringCounts is what one ring election sends: RING_ELECTION and ELECTED.
func ringCounts(runs, elected uint64) electionCounts {
	return electionCounts{wire.TypeRingElection: runs, wire.TypeElected: elected}
}

// stableRing boots n ring nodes with constant delays and waits until they
// follow the highest.
func stableRing(t *testing.T, n int) *simNetwork {
	t.Helper()
	s := newSimNetwork(t, uint64(n), n, electiontest.Config())
	s.algorithm = AlgorithmRing
	s.maxDly = s.minDly // constant delay: the counts are exact
	for i := range n {
		s.start(i)
	}
	s.runUntil(time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("N=%d cold start: leader n%d, %v", n, l, err)
	}
	return s
}

// campaignTogether makes the given nodes start a run at the same instant
// and returns what the election sent, heartbeats aside, once the cluster
// follows the highest node again.
func campaignTogether(t *testing.T, s *simNetwork, initiators []int) electionCounts {
	t.Helper()
	before := s.sent
	for _, i := range initiators {
		s.nodes[i].m.Campaign(s.now, wire.ReasonManual)
		s.flush(s.nodes[i])
	}
	// With a delay of 1 ms a run and its ELECTED take at most 3N-1 ms.
	n := len(s.nodes)
	s.runUntil(s.now+time.Duration(3*n+10)*s.minDly, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("N=%d after initiators %v: leader n%d, %v", n, initiators, l, err)
	}
	return sentSince(s, before)
}

// TestRingCounts asserts the ring's message counts of node/ring/doc.go on
// N = 2..50 live nodes: the initiator at clockwise distance j from the
// highest node (the highest wrapping to the lowest) costs 2N + j, so 2N at
// best (j = 0) and 3N - 1 at worst (j = N - 1, the highest's successor).
func TestRingCounts(t *testing.T) {
	for n := 2; n <= 50; n++ {
		s := stableRing(t, n)
		for j := range n {
			initiator := n - 1 - j
			got := campaignTogether(t, s, []int{initiator})
			want := ringCounts(uint64(n+j), uint64(n))
			if got.String() != want.String() {
				t.Errorf("N=%d, initiator n%d (j=%d): got %v, want %v", n, initiator, j, got, want)
			}
			switch j {
			case 0:
				if total := got[wire.TypeRingElection] + got[wire.TypeElected]; total != uint64(2*n) {
					t.Errorf("N=%d best case: %d messages, want 2N = %d", n, total, 2*n)
				}
			case n - 1:
				if total := got[wire.TypeRingElection] + got[wire.TypeElected]; total != uint64(3*n-1) {
					t.Errorf("N=%d worst case: %d messages, want 3N-1 = %d", n, total, 3*n-1)
				}
			}
		}
	}
}

// TestRingConcurrentInitiators: k nodes starting runs at the same instant
// with equal delays cost what the lowest of them alone costs, 2N + j of the
// lowest, since each lower run dies at the next initiator clockwise.
func TestRingConcurrentInitiators(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 12))
	for n := 2; n <= 50; n++ {
		s := stableRing(t, n)
		placements := [][]int{}
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		placements = append(placements, all)                 // everyone
		placements = append(placements, []int{0, n - 1})     // the lowest and the highest
		placements = append(placements, []int{n / 2, n - 2}) // two below the highest
		for _, k := range []int{2, 3, 5, n / 2, n - 1} {
			if k >= 2 && k <= n {
				placements = append(placements, rng.Perm(n)[:k])
			}
		}
		for _, p := range placements {
			p = slices.Compact(slices.Sorted(slices.Values(p)))
			j := n - 1 - p[0]
			got := campaignTogether(t, s, p)
			if want := ringCounts(uint64(n+j), uint64(n)); got.String() != want.String() {
				t.Errorf("N=%d, initiators %v (lowest j=%d): got %v, want %v", n, p, j, got, want)
			}
		}
	}
}

// TestRingLeaderCrashCounts is the testbed's leader crash: the survivors'
// staggered failure detectors fire, the highest survivor's first, and its
// run skips the leader it suspects: N-1 RING_ELECTIONs and N-1 ELECTEDs,
// 2(N-1), none of them to the dead node; a lone survivor (N = 2) sends
// none at all.
func TestRingLeaderCrashCounts(t *testing.T) {
	for n := 2; n <= 50; n++ {
		s := stableRing(t, n)
		s.crash(n - 1)
		before := s.sent
		s.runUntil(s.now+2*time.Second, nil)
		if l, err := s.agreement(); err != nil || l != n-2 {
			t.Fatalf("N=%d after the crash: leader n%d, %v", n, l, err)
		}
		want := ringCounts(uint64(n-1), uint64(n-1))
		if n == 2 {
			want = electionCounts{}
		}
		if got := sentSince(s, before); got.String() != want.String() {
			t.Errorf("N=%d: got %v, want %v", n, got, want)
		}
	}
}

// TestRingEpochWindow: the ring refuses what Bully refuses, epochs past
// the window or past MaxEpoch, and a ring cluster still elects afterwards.
func TestRingEpochWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		typ     wire.Type
		epoch   func(cur uint64) uint64
		refused bool
	}{
		{"heartbeat at 2^64-1", wire.TypeHeartbeat, func(uint64) uint64 { return math.MaxUint64 }, true},
		{"elected past MaxEpoch", wire.TypeElected, func(uint64) uint64 { return election.MaxEpoch + 1 }, true},
		{"run one past the window", wire.TypeRingElection, func(c uint64) uint64 { return c + election.EpochWindow + 1 }, true},
		{"run at the window's edge", wire.TypeRingElection, func(c uint64) uint64 { return c + election.EpochWindow }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stableRing(t, 4)
			before := s.nodes[1].m.Epoch()
			msg := wire.Message{Type: tc.typ, Epoch: tc.epoch(before), From: s.nodes[0].id}
			switch tc.typ {
			case wire.TypeRingElection:
				msg.Payload = wire.AppendRingElection(nil, s.nodes[0].id, s.nodes[0].id)
			case wire.TypeElected:
				msg.Payload = wire.AppendID(nil, s.nodes[3].id)
			}
			injectAgainstEpochWindow(t, s, msg, tc.refused)
			s.runUntil(s.now+2*time.Second, nil)
			if l, err := s.agreement(); err != nil || l != 3 {
				t.Fatalf("after the message: leader n%d, %v", l, err)
			}
			crashLeaderAndAgree(t, s, 3)
		})
	}
}
