package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/ring"
	"github.com/bullylab/bullylab/wire"
)

// partialLinks returns the node pairs the built-in partial-connectivity
// scenario pattern cuts in a cluster of n, both ways. The scenarios rank
// nodes by ID, r1 the highest: in the simulator r_k is node n-k.
func partialLinks(pattern string, n int) [][2]int {
	r := func(k int) int { return n - k }
	var pairs [][2]int
	switch pattern {
	case "chained": // r1 - r2
		pairs = append(pairs, [2]int{r(1), r(2)})
	case "quorum-loss": // every pair among r1..r(N-1); rN keeps every link
		for a := 1; a < n; a++ {
			for b := a + 1; b < n; b++ {
				pairs = append(pairs, [2]int{r(a), r(b)})
			}
		}
	case "bridge": // r1 reaches only rN, r2 only r(N-1), r3..rN fully connected
		for k := 2; k <= n; k++ {
			if k != n {
				pairs = append(pairs, [2]int{r(1), r(k)})
			}
		}
		for k := 3; k <= n; k++ {
			if k != n-1 {
				pairs = append(pairs, [2]int{r(2), r(k)})
			}
		}
	default:
		panic("unknown pattern " + pattern)
	}
	return pairs
}

// partialRun is what one partial-connectivity run measured.
type partialRun struct {
	hold simFigures
	// perSecond and electionPerSecond are the messages sent per second of
	// the hold, all of them and HEARTBEATs aside.
	perSecond, electionPerSecond float64
	// recovery is the time from the heal until every live node followed
	// the highest node for good, -1 if not within partialAfterHeal.
	recovery time.Duration
	// healDual is the time two leaders that reach each other coexisted
	// after the heal.
	healDual time.Duration
	final    string    // every node's view at the end of the hold
	views    []simView // the same, for the checks
}

// leads, follows and electing say, by rank (1 = r1), what a node believed
// at the end of the hold: whether it led, the rank of the leader it
// followed (-1 for none, or when not Normal), whether it was not Normal.
func (r partialRun) leads(k int) bool { n := len(r.views); return r.views[n-k].leads(n - k) }

func (r partialRun) follows(k int) int {
	v := r.views[len(r.views)-k]
	if v.status != election.StatusNormal || v.leader < 0 {
		return -1
	}
	return len(r.views) - v.leader
}

func (r partialRun) electing(k int) bool {
	v := r.views[len(r.views)-k]
	return v.up && v.status != election.StatusNormal
}

// partialAfterHeal is how long a run goes on after the heal: long enough
// for the slowest recovery, the ring's run timeout at N = 16 (6.6 s).
const partialAfterHeal = 10 * time.Second

// runPartial boots n nodes running algorithm with the default timings,
// lets them elect the highest, cuts pattern's links for hold, heals, and
// measures the hold and the recovery.
func runPartial(t testing.TB, algorithm, pattern string, n int, seed uint64, hold time.Duration, resets, overTCP bool) partialRun {
	t.Helper()
	s := newSimNetwork(t, seed, n, election.DefaultConfig())
	s.algorithm = algorithm
	s.cutResets = resets
	s.maxDly = simMaxDelay
	if overTCP {
		s.tcp = newSimTCP(TCPConfig{})
	}
	for i := range n {
		if s.tcp != nil {
			s.tcp.boot(i)
		}
		s.start(i)
	}
	s.runUntil(3*time.Second, nil)
	if l, err := s.agreement(); err != nil || l != n-1 {
		t.Fatalf("%s N=%d seed %d: before the cut: leader n%d, %v", pattern, n, seed, l, err)
	}
	rec := recordSim(s)
	cutAt, before := s.now, s.sent
	s.cutLinks(false, partialLinks(pattern, n)...)
	s.runUntil(cutAt+hold, rec.sample)
	var run partialRun
	run.hold = rec.figures(cutAt, cutAt+hold)
	run.final = rec.describe()
	run.views = rec.views[len(rec.views)-1]
	var all, elections uint64
	for ty := range s.sent {
		d := s.sent[ty] - before[ty]
		all += d
		if wire.Type(ty) != wire.TypeHeartbeat {
			elections += d
		}
	}
	run.perSecond = float64(all) / hold.Seconds()
	run.electionPerSecond = float64(elections) / hold.Seconds()

	s.heal()
	healAt := s.now
	run.recovery = -1
	s.runUntil(healAt+partialAfterHeal, func() {
		rec.sample()
		if l, ok := s.agreed(); !ok || l != n-1 {
			run.recovery = -1
		} else if run.recovery < 0 {
			run.recovery = s.now - healAt
		}
	})
	run.healDual = rec.figures(healAt, healAt+partialAfterHeal).DualLeaders
	return run
}

func (r partialRun) String() string {
	rec := "none"
	if r.recovery >= 0 {
		rec = r.recovery.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%v msgs/s=%.0f (elections %.1f) recovery=%s heal-dual=%v", r.hold, r.perSecond, r.electionPerSecond, rec, r.healDual.Round(time.Millisecond))
}

// partialCase is what the derivations in node/bully/doc.go and
// node/ring/doc.go ("Partial connectivity") predict for a pattern.
type partialCase struct {
	algorithm, pattern string
	// resets: the cut answers with TCP resets (the testbed's reset mode),
	// so senders are told Refused, instead of dropping silently.
	resets bool
	// overTCP puts the simulator's model of the TCP transport (simTCP)
	// between the nodes and the cut: dials into a dropping cut time out
	// and are reported unreachable, connections opened before it lose
	// frames silently until TCP_USER_TIMEOUT, backoffs drop frames.
	overTCP bool
	// sizes are the cluster sizes the case holds for; nil is 5 and 16.
	sizes   []int
	verdict string
	// leaders are the ranks (1 = r1) that declare themselves leader during
	// the hold.
	leaders func(n int) []int
	// final checks every node's view at the end of the hold, by rank.
	final func(n int, r partialRun) error
	// wins bounds the elections won during the hold.
	wins func(n int) (lo, hi int)
	// recovery bounds the time from the heal until every node follows r1.
	recovery func(n int) time.Duration
}

func rankRange(lo, hi int) []int {
	var rs []int
	for k := lo; k <= hi; k++ {
		rs = append(rs, k)
	}
	return rs
}

// partialCases are the outcomes the package docs derive from each
// algorithm's rules, as checks.
func partialCases() []partialCase {
	cfg := election.DefaultConfig()
	// After a heal Bully's leaders hear each other's HEARTBEATs within one
	// interval; r1 then halts everyone, a REJECT round or two at most.
	bullyRecovery := func(int) time.Duration { return cfg.HeartbeatInterval + 10*simMaxDelay }
	// The ring's r1 hears its rival's HEARTBEAT within one interval and its
	// run and ELECTED go round the ring: 2N hops.
	ringRecovery := func(n int) time.Duration {
		return cfg.HeartbeatInterval + time.Duration(2*n+2)*simMaxDelay
	}
	// Nodes that took part in runs ignore r1's older HEARTBEATs: the first
	// run timeout after the heal starts the run r1 wins.
	ringRunRecovery := func(n int) time.Duration {
		return ring.RunTimeout(n, cfg.ElectionTimeout) + time.Duration(2*ring.MaxHops(n))*simMaxDelay
	}
	chainedFinal := func(n int, r partialRun) error {
		if !r.leads(1) || !r.leads(2) {
			return fmt.Errorf("r1 and r2 should both lead")
		}
		for k := 3; k <= n; k++ {
			if r.follows(k) != 2 {
				return fmt.Errorf("r%d should follow r2", k)
			}
		}
		return nil
	}
	cases := []partialCase{
		{
			algorithm: AlgorithmBully, pattern: "chained", verdict: "stuck",
			leaders:  func(int) []int { return []int{1, 2} },
			final:    chainedFinal,
			wins:     func(int) (int, int) { return 1, 1 },
			recovery: bullyRecovery,
		},
		{
			algorithm: AlgorithmBully, pattern: "quorum-loss", verdict: "stuck",
			leaders: func(n int) []int { return rankRange(1, n-1) },
			final: func(n int, r partialRun) error {
				for k := 1; k < n; k++ {
					if !r.leads(k) {
						return fmt.Errorf("r%d should lead", k)
					}
				}
				if l := r.follows(n); l < 2 || l > n-1 {
					return fmt.Errorf("r%d should follow one of r2..r%d, follows r%d", n, n-1, l)
				}
				return nil
			},
			// Each of r2..r(N-1) wins at least once; a winner whose
			// COORDINATOR rN rejects (it promised a newer ballot meanwhile)
			// is outvoted and wins again, a few times at most.
			wins:     func(n int) (int, int) { return n - 2, 8 * n },
			recovery: bullyRecovery,
		},
		{
			algorithm: AlgorithmBully, pattern: "bridge", verdict: "stuck",
			leaders: func(int) []int { return []int{1, 2, 3} },
			final: func(n int, r partialRun) error {
				for k := 1; k <= 3; k++ {
					if !r.leads(k) {
						return fmt.Errorf("r%d should lead", k)
					}
				}
				for k := 4; k <= n; k++ {
					if r.follows(k) != 3 {
						return fmt.Errorf("r%d should follow r3", k)
					}
				}
				return nil
			},
			wins:     func(int) (int, int) { return 2, 2 },
			recovery: bullyRecovery,
		},
		{
			algorithm: AlgorithmRing, pattern: "chained", verdict: "stuck",
			leaders:  func(int) []int { return []int{1, 2} },
			final:    chainedFinal,
			wins:     func(int) (int, int) { return 1, 1 },
			recovery: ringRecovery,
		},
		{
			algorithm: AlgorithmRing, pattern: "quorum-loss", verdict: "stuck",
			leaders: func(int) []int { return []int{1} },
			final: func(n int, r partialRun) error {
				if !r.leads(1) {
					return fmt.Errorf("r1 should lead")
				}
				for k := 2; k <= n; k++ {
					if !r.electing(k) {
						return fmt.Errorf("r%d should be electing", k)
					}
				}
				return nil
			},
			wins:     func(int) (int, int) { return 0, 0 },
			recovery: ringRunRecovery,
		},
		{
			algorithm: AlgorithmRing, pattern: "bridge", verdict: "stuck",
			leaders: func(int) []int { return []int{1} },
			final: func(n int, r partialRun) error {
				if !r.leads(1) || r.follows(n) != 1 {
					return fmt.Errorf("r1 should lead and r%d follow it", n)
				}
				for k := 2; k < n; k++ {
					if !r.electing(k) {
						return fmt.Errorf("r%d should be electing", k)
					}
				}
				return nil
			},
			wins:     func(int) (int, int) { return 0, 0 },
			recovery: ringRunRecovery,
		},
	}
	// With resets Bully ends alike: a refused HALT only ends the round
	// sooner, and a refused ELECTION is ignored.
	for _, pc := range cases[:3] {
		pc.resets = true
		cases = append(cases, pc)
	}
	// The ring passes a refused frame to the next member, and a node that
	// finds the run's candidate refused stands in for it: the last node
	// before a cut wins.
	cases = append(cases,
		partialCase{
			algorithm: AlgorithmRing, pattern: "chained", resets: true, verdict: "stuck",
			leaders:  func(int) []int { return []int{1, 2} },
			final:    chainedFinal,
			wins:     func(int) (int, int) { return 1, 1 },
			recovery: ringRecovery,
		},
		partialCase{
			// r(N-1) stands in for every run and wins it again, each time a
			// cut-off node's run times out or rN tells it of a lower leader.
			algorithm: AlgorithmRing, pattern: "quorum-loss", resets: true, verdict: "flapping",
			leaders: func(n int) []int { return []int{1, n - 1} },
			final: func(n int, r partialRun) error {
				return flapFinal(n, r, n-1, map[int]bool{n - 1: true, n: true})
			},
			wins:     func(n int) (int, int) { return 2, ringRunRounds(n) * 2 * (n - 3) },
			recovery: ringRecovery,
		},
		partialCase{
			// r3 stands in for r2, whose runs it wins again, one each run
			// timeout.
			algorithm: AlgorithmRing, pattern: "bridge", resets: true, verdict: "flapping",
			leaders: func(n int) []int { return []int{1, 3} },
			final: func(n int, r partialRun) error {
				group := map[int]bool{}
				for k := 3; k <= n; k++ {
					group[k] = true
				}
				return flapFinal(n, r, 3, group)
			},
			wins:     func(n int) (int, int) { return 2, 2 * ringRunRounds(n) },
			recovery: ringRecovery,
		},
	)
	// Over the TCP model Bully ends as without it, and recovers once the
	// transport's backoffs from the cut-off peers have run out: a frame
	// dropped by a backoff (BackoffMax at most), the dial after it, a
	// HEARTBEAT interval and a HALT round with a REJECT one.
	tcp := TCPConfig{}.withDefaults()
	tcpRecovery := func(int) time.Duration {
		return tcp.BackoffMax + tcp.DialTimeout + cfg.HeartbeatInterval + 2*cfg.ElectionTimeout + 10*simMaxDelay
	}
	ringTCPRecovery := func(n int) time.Duration { return tcp.BackoffMax + tcp.DialTimeout + ringRunRecovery(n) }
	var overTCP []partialCase
	for _, pc := range cases {
		pc.overTCP = true
		switch {
		case pc.algorithm == AlgorithmBully:
			pc.recovery = tcpRecovery
			overTCP = append(overTCP, pc)
		case pc.resets:
			pc.recovery = ringTCPRecovery
			overTCP = append(overTCP, pc)
			// Behind a dropping cut the transport reports the sends into
			// it unreachable, later than a reset would: the ring ends as
			// with resets, but for quorum-loss at N = 16, where the run
			// must be passed over 14 cut members, a dial timeout each, and
			// the run timeout (6.6 s) replaces it before it gets round.
			dropped := pc
			dropped.resets = false
			if pc.pattern == "quorum-loss" {
				dropped.sizes = []int{5}
			}
			overTCP = append(overTCP, dropped)
		case pc.pattern == "quorum-loss":
			pc.recovery = ringTCPRecovery
			pc.sizes = []int{16}
			overTCP = append(overTCP, pc)
		}
	}
	return append(cases, overTCP...)
}

// flapFinal checks the views of a ring whose node leader, standing in for
// the nodes behind the cut, keeps winning their runs: r1 leads, the nodes
// of leader's group follow it, and everyone else is electing. The hold
// may end in the middle of a run, so any of them may be electing too.
func flapFinal(n int, r partialRun, leader int, group map[int]bool) error {
	if !r.leads(1) {
		return fmt.Errorf("r1 should lead")
	}
	for k := 2; k <= n; k++ {
		switch {
		case r.electing(k):
		case !group[k]:
			return fmt.Errorf("r%d should be electing", k)
		case r.follows(k) != leader:
			return fmt.Errorf("r%d should follow r%d or be electing", k, leader)
		}
	}
	return nil
}

// ringRunRounds is how many run timeouts fit in the partial-connectivity
// hold, plus the first run.
func ringRunRounds(n int) int {
	return int(partialHold/ring.RunTimeout(n, election.DefaultConfig().ElectionTimeout)) + 1
}

// partialHold is how long the cut lasts, the scenarios' default.
const partialHold = 30 * time.Second

// partialSeeds is how many seeds (message delays) each case runs with.
const partialSeeds = 10

// TestPartialConnectivity runs the built-in partial-connectivity patterns
// for each algorithm with N = 5 and 16 and checks the simulator against
// the derivations of node/bully/doc.go and node/ring/doc.go: the verdict
// over a 30 s hold, who leads, the final views, the elections won, no two
// leaders that reach each other, and the recovery after the heal. With -v
// it prints the figures table of the docs.
func TestPartialConnectivity(t *testing.T) {
	seeds := uint64(partialSeeds)
	if testing.Short() {
		seeds = 3
	}
	for _, pc := range partialCases() {
		mode := "drop"
		if pc.resets {
			mode = "reset"
		}
		if pc.overTCP {
			mode += "+tcp"
		}
		sizes := pc.sizes
		if sizes == nil {
			sizes = []int{5, 16}
		}
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%s/%s/%s/N=%d", pc.algorithm, pc.pattern, mode, n), func(t *testing.T) {
				var agg partialAggregate
				for seed := uint64(1); seed <= seeds; seed++ {
					r := runPartial(t, pc.algorithm, pc.pattern, n, seed, partialHold, pc.resets, pc.overTCP)
					agg.add(r)
					if err := pc.check(n, r); err != nil {
						t.Errorf("seed %d: %v\n\t%v\n\t%s", seed, err, r, r.final)
					}
				}
				t.Logf("| %s | %s | %s | %d | %s |", pc.algorithm, pc.pattern, mode, n, agg)
			})
		}
	}
}

func (pc partialCase) check(n int, r partialRun) error {
	f := r.hold
	if f.Verdict != pc.verdict {
		return fmt.Errorf("verdict %s, want %s", f.Verdict, pc.verdict)
	}
	var want []int
	for _, k := range pc.leaders(n) {
		want = append(want, n-k)
	}
	slices.Sort(want)
	if !slices.Equal(f.Leaders, want) {
		return fmt.Errorf("leaders %v, want %v", f.Leaders, want)
	}
	if lo, hi := pc.wins(n); f.Wins < lo || f.Wins > hi {
		return fmt.Errorf("%d elections won, want %d..%d", f.Wins, lo, hi)
	}
	if f.DualLeaders != 0 {
		return fmt.Errorf("two leaders that reach each other for %v", f.DualLeaders)
	}
	if err := pc.final(n, r); err != nil {
		return fmt.Errorf("at the end of the hold: %v", err)
	}
	if bound := pc.recovery(n); r.recovery < 0 || r.recovery > bound {
		return fmt.Errorf("recovery after the heal %v, want within %v", r.recovery, bound)
	}
	return nil
}

// partialAggregate sums up a case's runs for the docs' table.
type partialAggregate struct {
	runs                               int
	verdicts                           map[string]int
	winsLo, winsHi                     int
	quietHi, noLeaderHi                time.Duration
	msgsLo, msgsHi, electLo, electHi   float64
	recoveryLo, recoveryHi, healDualHi time.Duration
	unavailable                        time.Duration // the longest, -1 for never
}

func (a *partialAggregate) add(r partialRun) {
	f := r.hold
	if a.runs == 0 {
		a.verdicts = map[string]int{}
		a.winsLo, a.msgsLo, a.electLo, a.recoveryLo = f.Wins, r.perSecond, r.electionPerSecond, r.recovery
	}
	a.runs++
	a.verdicts[f.Verdict]++
	a.winsLo, a.winsHi = min(a.winsLo, f.Wins), max(a.winsHi, f.Wins)
	a.quietHi = max(a.quietHi, f.Quiet)
	for _, d := range f.NoLeader {
		a.noLeaderHi = max(a.noLeaderHi, d)
	}
	a.msgsLo, a.msgsHi = min(a.msgsLo, r.perSecond), max(a.msgsHi, r.perSecond)
	a.electLo, a.electHi = min(a.electLo, r.electionPerSecond), max(a.electHi, r.electionPerSecond)
	a.recoveryLo, a.recoveryHi = min(a.recoveryLo, r.recovery), max(a.recoveryHi, r.recovery)
	a.healDualHi = max(a.healDualHi, r.healDual)
	if f.Unavailable < 0 || a.unavailable < 0 {
		a.unavailable = -1
	} else {
		a.unavailable = max(a.unavailable, f.Unavailable)
	}
}

func (a partialAggregate) String() string {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	span := func(lo, hi string) string {
		if lo == hi {
			return lo
		}
		return lo + "-" + hi
	}
	var verdicts []string
	for v, c := range a.verdicts {
		verdicts = append(verdicts, fmt.Sprintf("%s %d/%d", v, c, a.runs))
	}
	slices.Sort(verdicts)
	unavail := "never"
	if a.unavailable >= 0 {
		unavail = ms(a.unavailable)
	}
	return fmt.Sprintf("%s | %s | %s | %s | %s | %s | %s | %s",
		strings.Join(verdicts, ", "), unavail,
		span(fmt.Sprint(a.winsLo), fmt.Sprint(a.winsHi)), ms(a.quietHi), ms(a.noLeaderHi),
		span(fmt.Sprintf("%.0f", a.msgsLo), fmt.Sprintf("%.0f", a.msgsHi)),
		span(fmt.Sprintf("%.1f", a.electLo), fmt.Sprintf("%.1f", a.electHi)),
		span(ms(a.recoveryLo), ms(a.recoveryHi))+", dual "+ms(a.healDualHi))
}
