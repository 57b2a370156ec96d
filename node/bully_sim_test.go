package node

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/bully"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/node/ring"
	"github.com/bullylab/bullylab/wire"
)

var (
	simSeed      = flag.Uint64("sim.seed", 0, "replay one random fault schedule with this seed (prints its trace)")
	simSchedules = flag.Int("sim.schedules", 10000, "random fault schedules per TestRandomSchedules run")
)

// electionCounts is the number of messages of each type one election emits.
type electionCounts map[wire.Type]uint64

func (c electionCounts) String() string {
	var parts []string
	for _, t := range wire.Types {
		if c[t] != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", t, c[t]))
		}
	}
	return strings.Join(parts, " ")
}

// Textbook scenarios, N nodes ranked 1..N by ID, leader N crashed, a stable
// cluster before the crash. These are the formulas documented in
// node/bully/doc.go.
func highestDetects(n uint64) electionCounts {
	return electionCounts{
		wire.TypeHalt:        n - 2,
		wire.TypeHaltAck:     n - 2,
		wire.TypeCoordinator: n - 1,
	}
}

func lowestDetects(n uint64) electionCounts {
	return electionCounts{
		wire.TypeElection:    (n - 2) + (n-2)*(n-1)/2,
		wire.TypeAnswer:      (n - 2) + (n-3)*(n-2)/2,
		wire.TypeHalt:        n - 2,
		wire.TypeHaltAck:     n - 2,
		wire.TypeCoordinator: n - 1,
	}
}

func allDetect(n uint64) electionCounts {
	return electionCounts{
		wire.TypeElection:    (n - 1) * (n - 2) / 2,
		wire.TypeAnswer:      (n - 1) * (n - 2) / 2,
		wire.TypeHalt:        n - 2,
		wire.TypeHaltAck:     n - 2,
		wire.TypeCoordinator: n - 1,
	}
}

func TestTextbookCounts(t *testing.T) {
	scenarios := []struct {
		name     string
		detect   func(n int) []int // which survivors detect the crash
		expected func(n uint64) electionCounts
	}{
		{"highest-survivor-detects", func(n int) []int { return []int{n - 2} }, highestDetects},
		{"lowest-detects", func(n int) []int { return []int{0} }, lowestDetects},
		{"all-detect", func(n int) []int {
			all := make([]int, n-1)
			for i := range all {
				all[i] = i
			}
			return all
		}, allDetect},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for n := 2; n <= 50; n++ {
				got := textbookElection(t, n, sc.detect(n))
				want := sc.expected(uint64(n))
				if got.String() != want.String() {
					t.Errorf("N=%d: got %v, want %v", n, got, want)
				}
			}
		})
	}
	// With the default stagger the survivors' own failure detectors, not
	// the test, decide who detects: the highest survivor first, and its
	// HALTs reach the others before their turn.
	t.Run("leader-crash-staggered", func(t *testing.T) {
		for n := 2; n <= 50; n++ {
			got := staggeredLeaderCrash(t, n)
			if want := highestDetects(uint64(n)); got.String() != want.String() {
				t.Errorf("N=%d: got %v, want %v", n, got, want)
			}
		}
	})
}

// staggeredLeaderCrash boots n nodes with the default detection stagger,
// crashes the stable leader and returns the messages the election its
// failure detectors start sends, heartbeats aside.
func staggeredLeaderCrash(t *testing.T, n int) electionCounts {
	t.Helper()
	cfg := electiontest.Config()
	if cfg.DetectionStagger == 0 {
		t.Fatal("electiontest.Config has no detection stagger")
	}
	s := newSimNetwork(t, uint64(n), n, cfg)
	s.maxDly = s.minDly
	for i := range n {
		s.start(i)
	}
	s.runUntil(time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("N=%d cold start: leader n%d, %v", n, l, err)
	}
	s.crash(n - 1)
	before := s.sent
	s.runUntil(s.now+2*time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-2 {
		t.Fatalf("N=%d after crash: leader n%d, %v", n, l, err)
	}
	return sentSince(s, before)
}

func sentSince(s *simNetwork, before [16]uint64) electionCounts {
	got := electionCounts{}
	for _, ty := range wire.Types {
		if ty != wire.TypeHeartbeat && s.sent[ty] != before[ty] {
			got[ty] = s.sent[ty] - before[ty]
		}
	}
	return got
}

// textbookElection boots n nodes, waits for the cold-start election, crashes
// the leader, makes exactly the given survivors detect it at the same instant
// and returns the messages the resulting election sent, heartbeats aside.
// The stagger is off: these cases are about detections the test places.
func textbookElection(t *testing.T, n int, detectors []int) electionCounts {
	t.Helper()
	cfg := electiontest.Config()
	cfg.DetectionStagger = 0
	cfg.FailureTimeout = time.Hour // only the chosen detectors notice the crash
	s := newSimNetwork(t, uint64(n), n, cfg)
	s.maxDly = s.minDly // constant delay: the counts are exact
	for i := range n {
		s.start(i)
	}
	s.runUntil(time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("N=%d cold start: leader n%d, %v", n, l, err)
	}
	s.crash(n - 1)
	before := s.sent
	for _, i := range detectors {
		s.nodes[i].m.Campaign(s.now, wire.ReasonLeaderFailed)
		s.flush(s.nodes[i])
	}
	s.runUntil(s.now+2*time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-2 {
		t.Fatalf("N=%d after crash: leader n%d, %v", n, l, err)
	}
	return sentSince(s, before)
}

// sle2Bound is the time after the last fault within which every live node
// running algorithm is Normal with the same, live, highest leader (see
// node/bully/doc.go and node/ring/doc.go for the derivations).
func sle2Bound(algorithm string, cfg election.Config, n int) time.Duration {
	if algorithm == AlgorithmRing {
		return ring.SLE2Bound(cfg, n, simMaxDelay)
	}
	stagger := bully.MaxStaggerDelay(n, cfg.DetectionStagger, cfg.ElectionTimeout)
	spread := election.MaxAskSpread(n, cfg.DetectionStagger)
	wait := bully.WaitFactor*cfg.ElectionTimeout + spread + stagger
	detect := max(cfg.FailureTimeout+simMaxDelay+stagger, wait, cfg.HeartbeatInterval+simMaxDelay)
	return detect + 3*cfg.ElectionTimeout + 2*spread + 10*simMaxDelay
}

// TestRandomSchedules runs random fault schedules for each algorithm and
// checks SLE1 whenever the network is synchronous and SLE2 after the last
// fault.
func TestRandomSchedules(t *testing.T) {
	for _, algorithm := range Algorithms() {
		t.Run(algorithm, func(t *testing.T) { randomSchedules(t, algorithm) })
	}
}

func randomSchedules(t *testing.T, algorithm string) {
	if *simSeed != 0 {
		var trace strings.Builder
		converged, err := runSchedule(t, algorithm, *simSeed, &trace, &scheduleStats{})
		t.Log("\n" + trace.String())
		t.Logf("converged %v after the last fault", converged)
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	n := *simSchedules
	if testing.Short() {
		n = min(n, 1000)
	}
	start := time.Now()
	var maxConverge time.Duration
	var stats scheduleStats
	failures := 0
	for i := range n {
		seed := uint64(i + 1)
		converged, err := runSchedule(t, algorithm, seed, nil, &stats)
		maxConverge = max(maxConverge, converged)
		if err != nil {
			failures++
			t.Errorf("seed %d: %v\n\treplay: go test ./node/ -run 'TestRandomSchedules/%s$' -sim.seed=%d -v", seed, err, algorithm, seed)
			if failures >= 5 {
				t.FailNow()
			}
		}
	}
	t.Logf("%d schedules in %v: %d faults, SLE1 checked after %d of %d events; SLE2 max convergence %v (bound %v)",
		n, time.Since(start).Round(time.Millisecond), stats.faults, stats.checked, stats.events, maxConverge, sle2Bound(algorithm, electiontest.Config(), 7))
}

// runSchedule builds and runs the schedule for seed. It returns how long after
// the last fault the live nodes came to agree for good, and the first
// property the run violated.
func runSchedule(t testing.TB, algorithm string, seed uint64, trace *strings.Builder, stats *scheduleStats) (time.Duration, error) {
	cfg := electiontest.Config()
	rng := rand.New(rand.NewPCG(seed, 0xb011))
	n := 2 + rng.IntN(6)
	s := newSimNetwork(t, seed, n, cfg)
	s.algorithm = algorithm
	s.trace = trace
	s.maxDly = simMaxDelay

	// Synchronous means: no partition, loss or delay spike in force, and the
	// last one ended at least one SLE2 bound ago (rival leaders left by a
	// healed partition need that long to meet). Crashes and restarts happen
	// inside synchronous periods: that is where SLE1 must hold.
	bound := sle2Bound(algorithm, cfg, n)
	asyncUntil := time.Duration(0)
	inAsync := false
	var violation error
	check := func() {
		stats.events++
		if violation != nil || inAsync || s.now < asyncUntil {
			return
		}
		stats.checked++
		violation = s.sle1()
	}

	for i := range n {
		if rng.IntN(3) == 0 {
			s.runUntil(s.now+time.Duration(rng.IntN(200))*time.Millisecond, check)
		}
		s.start(i)
	}
	faults := 3 + rng.IntN(10)
	stats.faults += faults
	for range faults {
		s.runUntil(s.now+time.Duration(rng.IntN(600))*time.Millisecond, check)
		if violation != nil {
			return 0, violation
		}
		var up, down []int
		for _, nd := range s.nodes {
			if nd.up {
				up = append(up, nd.idx)
			} else {
				down = append(down, nd.idx)
			}
		}
		switch k := rng.IntN(10); {
		case k < 3 && len(up) > 1:
			// Crash the leader more often than not: it is the interesting case.
			victim := up[rng.IntN(len(up))]
			if rng.IntN(2) == 0 {
				if l, err := s.agreement(); err == nil {
					victim = l
				}
			}
			s.crash(victim)
		case k < 5 && len(down) > 0:
			s.start(down[rng.IntN(len(down))])
		case k < 9:
			if inAsync {
				s.heal()
				inAsync = false
				asyncUntil = s.now + bound
				for _, d := range s.queue {
					asyncUntil = max(asyncUntil, d.at+bound)
				}
				continue
			}
			inAsync = true
			switch rng.IntN(4) {
			case 0: // symmetric partition into two groups
				perm := rng.Perm(n)
				cutAt := 1 + rng.IntN(n-1)
				s.partition(perm[:cutAt], perm[cutAt:])
			case 1: // one-way cut between two nodes
				a, b := rng.IntN(n), rng.IntN(n)
				if a != b {
					s.cutLinks(true, [2]int{a, b})
				}
			case 2:
				s.loss = 0.05 + rng.Float64()*0.45
				s.tracef("LOSS %.2f", s.loss)
			case 3:
				s.maxDly = time.Duration(1+rng.IntN(3)) * cfg.ElectionTimeout
				s.tracef("DELAY up to %v", s.maxDly)
			}
		default:
			if len(up) > 0 {
				i := up[rng.IntN(len(up))]
				s.nodes[i].m.Campaign(s.now, wire.ReasonManual)
				s.flush(s.nodes[i])
				s.tracef("n%d CAMPAIGN", i)
			}
		}
	}
	if inAsync {
		s.heal()
	}
	if len(upNodes(s)) == 0 {
		s.start(rng.IntN(n))
	}
	// Messages delayed by a spike still arrive after the heal: the network is
	// synchronous again only once they have.
	lastFault := s.now
	for _, d := range s.queue {
		lastFault = max(lastFault, d.at)
	}
	asyncUntil = max(asyncUntil, lastFault+bound)
	s.tracef("LAST FAULT; SLE2 deadline %v", lastFault+bound)
	converged := time.Duration(-1)
	s.runUntil(lastFault+bound, func() {
		check()
		if _, ok := s.agreed(); !ok {
			converged = -1
		} else if converged < 0 {
			converged = s.now - lastFault
		}
	})
	if violation != nil {
		return converged, violation
	}
	leader, err := s.agreement()
	if err != nil {
		return converged, fmt.Errorf("SLE2 violated: %v after the last fault: %v", bound, err)
	}
	up := upNodes(s)
	if highest := up[len(up)-1]; leader != highest {
		return converged, fmt.Errorf("SLE2: leader n%d is not the highest live node n%d", leader, highest)
	}
	// Stable: one more failure timeout changes nothing.
	asyncUntil = 0
	s.runUntil(s.now+2*cfg.FailureTimeout, check)
	if violation != nil {
		return converged, violation
	}
	if l2, err := s.agreement(); err != nil || l2 != leader {
		return converged, fmt.Errorf("leader did not stay: n%d then n%d (%v)", leader, l2, err)
	}
	return converged, nil
}

// scheduleStats says how much the random schedules exercised.
type scheduleStats struct {
	faults  int // faults injected
	events  int // events processed
	checked int // events after which SLE1 was checked
}

func upNodes(s *simNetwork) []int {
	var up []int
	for _, nd := range s.nodes {
		if nd.up {
			up = append(up, nd.idx)
		}
	}
	return up
}

// TestMembershipChurn: with each algorithm, a node unknown to the cluster
// joins through one seed and, being the highest, takes over; then it leaves and the next highest
// leads; restarted from its data, it joins again.
func TestMembershipChurn(t *testing.T) {
	for _, algorithm := range Algorithms() {
		t.Run(algorithm, func(t *testing.T) { membershipChurn(t, algorithm) })
	}
}

func membershipChurn(t *testing.T, algorithm string) {
	s := newSimNetwork(t, 7, 5, electiontest.Config())
	s.algorithm = algorithm
	s.maxDly = simMaxDelay
	all := s.peers()
	for i := range 4 {
		s.nodes[i].peers = all[:4]
	}
	s.nodes[4].peers = all[:1] // knows only the lowest node
	s.nodes[4].join = true
	for i := range 4 {
		s.start(i)
	}
	s.runUntil(time.Second, nil)
	if l, err := s.agreement(); err != nil || l != 3 {
		t.Fatalf("before join: leader n%d, %v", l, err)
	}

	s.start(4)
	s.runUntil(s.now+time.Second, nil)
	if l, err := s.agreement(); err != nil || l != 4 {
		t.Fatalf("after join: leader n%d, %v", l, err)
	}
	for _, n := range s.nodes {
		if got := len(n.m.Members()); got != 5 {
			t.Errorf("n%d knows %d members after the join, want 5", n.idx, got)
		}
	}

	s.nodes[4].m.Leave(s.now)
	s.flush(s.nodes[4])
	s.crash(4)
	s.runUntil(s.now+time.Second, nil)
	if l, err := s.agreement(); err != nil || l != 3 {
		t.Fatalf("after leave: leader n%d, %v", l, err)
	}
	for _, n := range s.nodes[:4] {
		if got := len(n.m.Members()); got != 4 {
			t.Errorf("n%d knows %d members after the leave, want 4", n.idx, got)
		}
	}

	s.start(4) // restarts from its persisted state, which says it left
	s.runUntil(s.now+time.Second, nil)
	if l, err := s.agreement(); err != nil || l != 4 {
		t.Fatalf("after rejoin: leader n%d, %v", l, err)
	}
	if !s.nodes[4].m.IsLeader() {
		t.Fatal("rejoined highest node does not lead")
	}
}

// TestTopCutElectsInLinearMessages cuts star500's partition-minority into
// the simulator: the leader and the 248 nodes below it are cut off, so
// every one of the 251 left is ranked past the detection stagger's cap and
// elects at once. Asking the members above in waves, highest first, the
// majority elects its highest, within the SLE2 bound, in a few ELECTIONs
// and ANSWERs a node that arrive, where asking them all at once delivered
// 251·250/2 = 31,375 of each.
func TestTopCutElectsInLinearMessages(t *testing.T) {
	const n, kept = 500, 251
	cfg := electiontest.Config()
	s := newSimNetwork(t, 29, n, cfg)
	for i := range n {
		s.start(i)
	}
	s.runUntil(time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("cold start: leader n%d, %v", l, err)
	}
	majority, minority := make([]int, kept), make([]int, n-kept)
	for i := range majority {
		majority[i] = i
	}
	for i := range minority {
		minority[i] = kept + i
	}
	s.partition(majority, minority)
	before, droppedBefore, cut := s.delivered, s.dropped, s.now
	bound := sle2Bound(AlgorithmBully, cfg, n)
	s.runUntil(cut+bound, nil)
	for _, i := range majority {
		nd := s.nodes[i]
		if l, _ := nd.m.Leader(); nd.m.Status() != election.StatusNormal || l != s.nodes[kept-1].id {
			t.Fatalf("n%d %v after the cut: %s under %s, want normal under n%d", i, bound, nd.m.Status(), s.name(l), kept-1)
		}
	}
	elections := s.delivered[wire.TypeElection] - before[wire.TypeElection]
	answers := s.delivered[wire.TypeAnswer] - before[wire.TypeAnswer]
	intoCut := s.dropped[wire.TypeElection] - droppedBefore[wire.TypeElection]
	t.Logf("delivered after the cut: %d ELECTION, %d ANSWER; %d ELECTIONs into the cut", elections, answers, intoCut)
	if limit := uint64(16 * kept); elections > limit || answers > limit {
		t.Errorf("delivered %d ELECTIONs and %d ANSWERs, want at most %d each (16 a node)", elections, answers, limit)
	}
	// The highest survivor asks every cut-off member; each other survivor
	// asks the top of the cluster in its first wave, with its nearest
	// member above, which answers before the next wave.
	if limit := uint64(n - kept + 2*kept); intoCut > limit {
		t.Errorf("%d ELECTIONs into the cut, want at most %d: the cut-off members, and 2 a survivor", intoCut, limit)
	}
}
