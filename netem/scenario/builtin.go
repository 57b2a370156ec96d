package scenario

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/bullylab/bullylab/wire/suggest"
)

// Params tune the built-in scenarios.
type Params struct {
	// Nodes is the topology's node count; chaos needs it to keep its
	// faults possible (never more than a minority down).
	Nodes int
	// K is how many of the top nodes cascade crashes; 0 means 3.
	K int
	// Delays are the points of latency-sweep, one scenario each; nil means
	// 0, 10ms, 50ms and 100ms.
	Delays []time.Duration
	// Losses are the points of loss, percentages, one scenario each,
	// labelled loss=PCT; nil means Loss alone, or DefaultLosses when Loss
	// is 0 too.
	Losses []float64
	// Loss is a one-point loss sweep: the percentage loss drops, kept for
	// callers from before loss swept. Giving it and a different Losses is
	// an error.
	Loss float64
	// Seed draws chaos's steps; a bench passes its --seed.
	Seed int64
	// Faults is how many faults chaos injects; 0 means 10.
	Faults int
	// Hold is how long chained, quorum-loss and bridge keep their cut
	// before healing it; 0 means DefaultHold.
	Hold time.Duration
}

// Defaults of Params.
var (
	DefaultK      = 3
	DefaultDelays = []time.Duration{0, 10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}
	DefaultLosses = []float64{1, 5, 10, 20}
	// DefaultLoss was loss's one percentage before it swept DefaultLosses;
	// it is one of them.
	DefaultLoss   = 5.0
	DefaultFaults = 10
	DefaultHold   = 30 * time.Second
)

type builtin struct {
	name string
	make func(p Params) ([]*Scenario, error)
}

// builtins in the order of the issue that asked for them.
var builtins = []builtin{
	{"cold-start", one(coldStart)},
	{"leader-crash", one(leaderCrash)},
	{"leader-pause", one(leaderPause)},
	{"crash-during-election", one(crashDuringElection)},
	{"cascade", cascade},
	{"partition-minority", one(partitionMinority)},
	{"partition-majority", one(partitionMajority)},
	{"one-way-partition", one(oneWayPartition)},
	{"latency-sweep", latencySweep},
	{"loss", loss},
	{"churn", one(churn)},
	{"chaos", chaos},
	{"chained", chained},
	{"quorum-loss", quorumLoss},
	{"bridge", bridge},
}

func one(f func() *Scenario) func(Params) ([]*Scenario, error) {
	return func(Params) ([]*Scenario, error) { return []*Scenario{f()}, nil }
}

// BuiltinNames lists the built-in scenarios.
func BuiltinNames() []string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = b.name
	}
	return names
}

// Builtin returns the built-in scenario called name: one scenario, or one
// per point for latency-sweep and loss.
func Builtin(name string, p Params) ([]*Scenario, error) {
	for _, b := range builtins {
		if b.name != name {
			continue
		}
		scs, err := b.make(p)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", name, err)
		}
		for _, sc := range scs {
			sc.Source = "built-in " + name
			if err := sc.Validate(); err != nil {
				return nil, err // a bug here, or Params out of range
			}
		}
		return scs, nil
	}
	return nil, fmt.Errorf("scenario %s: no such built-in scenario (built in: %s)%s",
		bounded.Quote(name), strings.Join(BuiltinNames(), ", "), suggest.Hint(name, BuiltinNames()))
}

// Lookup returns the built-in scenario called nameOrPath, or parses the
// file at that path. A name with a slash or a .yaml/.yml suffix is a path.
func Lookup(nameOrPath string, p Params) ([]*Scenario, error) {
	isPath := strings.ContainsRune(nameOrPath, '/') ||
		strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml")
	if !isPath {
		return Builtin(nameOrPath, p)
	}
	sc, err := Load(nameOrPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("scenario %s: no such file", bounded.Quote(nameOrPath))
	}
	if err != nil {
		return nil, err
	}
	return []*Scenario{sc}, nil
}

func sel(s string) Selector {
	x, err := ParseSelector(s)
	if err != nil {
		panic(err) // built-ins use constant selectors
	}
	return x
}

func sels(ss ...string) Selectors {
	if len(ss) == 0 {
		return nil
	}
	out := make(Selectors, len(ss))
	for i, s := range ss {
		out[i] = sel(s)
	}
	return out
}

func inject(k fault.Kind, nodes ...string) Step {
	return Step{Kind: StepInject, Fault: &Injection{Kind: k, Nodes: sels(nodes...)}}
}

func partition(oneWay bool, groups ...string) Step {
	ft := &Injection{Kind: fault.Partition, OneWay: oneWay}
	for _, g := range groups {
		ft.Groups = append(ft.Groups, sels(g))
	}
	return Step{Kind: StepInject, Fault: ft}
}

func waitLeader(measure bool, among ...string) Step {
	return Step{Kind: StepWaitLeader, Timeout: DefaultTimeout, Expect: ExpectHighestLive, Measure: measure, Among: sels(among...)}
}

func waitFor(d time.Duration) Step { return Step{Kind: StepWait, Duration: d} }

func healStep() Step { return Step{Kind: StepHeal} }

func scenario(name, desc string, steps ...Step) *Scenario {
	return &Scenario{Name: name, Description: desc, Start: StartStable, Steps: steps}
}

func coldStart() *Scenario {
	sc := scenario("cold-start", "every node starts at once; time to the first leader",
		inject(fault.Restart, "all"),
		waitLeader(true))
	sc.Start = StartCold
	return sc
}

func leaderCrash() *Scenario {
	return scenario("leader-crash", "the leader is killed; the survivors elect the highest of them",
		inject(fault.Crash, "leader"),
		waitLeader(true))
}

func leaderPause() *Scenario {
	return scenario("leader-pause", "grey failure: the leader stops (SIGSTOP) with its sockets open, then resumes and takes over",
		inject(fault.Pause, "leader"),
		waitLeader(true),
		inject(fault.Resume, "all"),
		waitLeader(false))
}

func crashDuringElection() *Scenario {
	return scenario("crash-during-election", "the leader is killed, then the highest survivor as soon as an election runs",
		inject(fault.Crash, "leader"),
		Step{Kind: StepWaitElection, Timeout: DefaultTimeout},
		inject(fault.Crash, "highest"),
		waitLeader(true))
}

func cascade(p Params) ([]*Scenario, error) {
	k := p.K
	if k == 0 {
		k = DefaultK
	}
	if k < 1 || k > MaxCount {
		return nil, fmt.Errorf("k = %d, want 1..%d", k, MaxCount)
	}
	if p.Nodes > 0 && k >= p.Nodes {
		return nil, fmt.Errorf("k = %d crashes every node of %d", k, p.Nodes)
	}
	sc := scenario("cascade", fmt.Sprintf("the %d highest nodes crash at once; the survivors' ELECTIONs meet the dead above them", k),
		inject(fault.Crash, "top:"+strconv.Itoa(k)),
		waitLeader(true))
	sc.Labels = map[string]string{"k": strconv.Itoa(k)}
	return []*Scenario{sc}, nil
}

func partitionMinority() *Scenario {
	return scenario("partition-minority", "the highest minority, leader included, is cut off; the majority elects; then heal",
		partition(false, "minority", "rest"),
		waitLeader(true),
		healStep(),
		waitLeader(false))
}

func partitionMajority() *Scenario {
	return scenario("partition-majority", "the lowest minority is cut off from the leader and elects its own; heal; measured: the cluster converging",
		partition(false, "majority", "rest"),
		waitLeader(false, "side:2"),
		healStep(),
		waitLeader(true))
}

func oneWayPartition() *Scenario {
	return scenario("one-way-partition", "what the leader sends is dropped, what it receives is not; the others elect; then heal",
		partition(true, "leader", "rest"),
		waitLeader(true),
		healStep(),
		waitLeader(false))
}

func latencySweep(p Params) ([]*Scenario, error) {
	delays := p.Delays
	if delays == nil {
		delays = DefaultDelays
	}
	if len(delays) == 0 {
		return nil, errors.New("no delays to sweep")
	}
	var out []*Scenario
	seen := map[time.Duration]bool{}
	for _, d := range delays {
		if d < 0 {
			return nil, fmt.Errorf("delay %v is negative", d)
		}
		if seen[d] {
			return nil, fmt.Errorf("delay %v is listed twice", d)
		}
		seen[d] = true
		var steps []Step
		if d > 0 {
			// The delay is in force, and the cluster settled under it,
			// before the measured crash.
			steps = append(steps,
				Step{Kind: StepInject, Fault: &Injection{Kind: fault.Delay, Nodes: sels("all"), Delay: d}},
				waitLeader(false))
		}
		steps = append(steps, inject(fault.Crash, "leader"), waitLeader(true))
		desc := fmt.Sprintf("every node sends %v late; the leader is killed", d)
		if d == 0 {
			desc = "the baseline of the sweep, no delay added; the leader is killed"
		}
		sc := scenario("latency-sweep", desc, steps...)
		sc.Labels = map[string]string{"delay": d.String()}
		out = append(out, sc)
	}
	return out, nil
}

func loss(p Params) ([]*Scenario, error) {
	losses := p.Losses
	switch {
	case losses != nil && p.Loss != 0 && !slices.Equal(losses, []float64{p.Loss}):
		return nil, fmt.Errorf("loss %g%% given besides the sweep %v", p.Loss, losses)
	case losses == nil && p.Loss != 0:
		losses = []float64{p.Loss}
	case losses == nil:
		losses = DefaultLosses
	}
	if len(losses) == 0 {
		return nil, errors.New("no losses to sweep")
	}
	var out []*Scenario
	seen := map[string]bool{}
	for _, pct := range losses {
		if !(pct > 0 && pct <= 100) {
			return nil, fmt.Errorf("loss %g%% is not in (0, 100]", pct)
		}
		s := strconv.FormatFloat(pct, 'g', -1, 64)
		if seen[s] {
			return nil, fmt.Errorf("loss %s%% is listed twice", s)
		}
		seen[s] = true
		sc := scenario("loss", fmt.Sprintf("every node loses %s%% of what it sends; the leader is killed", s),
			Step{Kind: StepInject, Fault: &Injection{Kind: fault.Loss, Nodes: sels("all"), Loss: pct}},
			waitLeader(false),
			inject(fault.Crash, "leader"),
			waitLeader(true))
		sc.Labels = map[string]string{"loss": s}
		out = append(out, sc)
	}
	return out, nil
}

func churn() *Scenario {
	return scenario("churn", "a random node leaves and joins again, then the leader leaves (measured) and joins again",
		inject(fault.Leave, "random"),
		waitLeader(false),
		inject(fault.Join, "all"),
		waitLeader(false),
		inject(fault.Leave, "leader"),
		waitLeader(true),
		inject(fault.Join, "all"),
		waitLeader(false))
}

// chaos draws Params.Faults faults from Params.Seed, each followed by a
// random wait, never taking more than a minority of the nodes down or away,
// then heals everything and measures how long the cluster takes to agree
// on its highest node. Its selectors are keywords, so the nodes they pick
// still vary with each run's seed.
func chaos(p Params) ([]*Scenario, error) {
	n := p.Nodes
	if n < 1 {
		return nil, errors.New("chaos needs the topology's node count")
	}
	faults := p.Faults
	if faults == 0 {
		faults = DefaultFaults
	}
	if faults < 1 || faults > MaxSteps/2-4 {
		return nil, fmt.Errorf("%d faults, want 1..%d", faults, MaxSteps/2-4)
	}
	rng := newStream(p.Seed, streamChaos)
	maxAway := (n - 1) / 2 // crashed, paused or isolated at once
	var (
		crashed, paused, isolated int
		partitioned, impaired     bool
		steps                     []Step
	)
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	type option struct {
		ok  bool
		add func()
	}
	for range faults {
		away := crashed + paused + isolated
		options := []option{
			{away < maxAway, func() { steps = append(steps, inject(fault.Crash, "random")); crashed++ }},
			{away < maxAway, func() { steps = append(steps, inject(fault.Crash, "highest")); crashed++ }},
			{crashed > 0, func() { steps = append(steps, inject(fault.Restart, "random")); crashed-- }},
			{away < maxAway, func() { steps = append(steps, inject(fault.Pause, "random")); paused++ }},
			{paused > 0, func() { steps = append(steps, inject(fault.Resume, "random")); paused-- }},
			{away < maxAway, func() { steps = append(steps, inject(fault.Isolate, "random")); isolated++ }},
			{isolated > 0, func() { steps = append(steps, inject(fault.Unisolate, "random")); isolated-- }},
			{!partitioned && n-crashed-paused >= 3, func() {
				steps = append(steps, partition(false, "minority:random", "rest"))
				partitioned = true
			}},
			{partitioned, func() {
				steps = append(steps, Step{Kind: StepInject, Fault: &Injection{Kind: fault.Heal}})
				partitioned = false
			}},
			{true, func() {
				d := ms(1, 100)
				steps = append(steps, Step{Kind: StepInject, Fault: &Injection{Kind: fault.Delay, Nodes: sels("all"), Delay: d, Jitter: d / 10}})
				impaired = true
			}},
			{true, func() {
				steps = append(steps, Step{Kind: StepInject, Fault: &Injection{Kind: fault.Loss, Nodes: sels("all"), Loss: float64(1 + rng.IntN(20))}})
				impaired = true
			}},
			{impaired, func() { steps = append(steps, inject(fault.Clear, "all")); impaired = false }},
			{true, func() { steps = append(steps, inject(fault.Campaign, "random")) }},
		}
		options = slices.DeleteFunc(options, func(o option) bool { return !o.ok })
		options[rng.IntN(len(options))].add()
		steps = append(steps, waitFor(ms(50, 1500).Round(10*time.Millisecond)))
	}
	steps = append(steps, healStep())
	if crashed > 0 {
		steps = append(steps, inject(fault.Restart, "all"))
	}
	if paused > 0 {
		steps = append(steps, inject(fault.Resume, "all"))
	}
	steps = append(steps, waitLeader(true))
	sc := scenario("chaos", fmt.Sprintf("%d random faults drawn from seed %d, then everything healed; measured: the cluster converging", faults, p.Seed), steps...)
	sc.Labels = map[string]string{"seed": strconv.FormatInt(p.Seed, 10)}
	return []*Scenario{sc}, nil
}

// The partial-connectivity built-ins rank the nodes by ID, r1 the highest
// (the leader before the fault) to rN the lowest, and name them rank:K,
// so that they cut the same links whatever the topology calls its nodes.
// Each cuts from a stable start, holds the cut for Params.Hold, heals it,
// and measures the recovery after the heal.

// chained cuts r1 from r2 alone: r2 stops hearing the leader, which every
// other node still hears, and their elections chain through nodes that
// disagree on whether r1 lives.
func chained(p Params) ([]*Scenario, error) {
	if err := needNodes("chained", p, 3); err != nil {
		return nil, err
	}
	return cutScenario("chained", "the leader and the second highest node lose the link between them, every other link up; held, healed; measured: the recovery after the heal",
		p, Link{From: sels("rank:1"), To: sels("rank:2")})
}

// quorumLoss cuts every link among r1..r(N-1): only rN reaches everyone,
// so no node but rN hears a majority.
func quorumLoss(p Params) ([]*Scenario, error) {
	if err := needNodes("quorum-loss", p, 3); err != nil {
		return nil, err
	}
	top := sels("top:" + strconv.Itoa(p.Nodes-1))
	return cutScenario("quorum-loss", "every link among all but the lowest node is cut; the lowest still reaches everyone; held, healed; measured: the recovery after the heal",
		p, Link{From: top, To: top})
}

// bridge leaves r1 reaching only rN and r2 only r(N-1), r3..rN fully
// connected: the two highest hang off the rest by one link each.
func bridge(p Params) ([]*Scenario, error) {
	if err := needNodes("bridge", p, 4); err != nil {
		return nil, err
	}
	n := p.Nodes
	ranks := func(ks ...int) Selectors {
		var ss []string
		for _, k := range ks {
			ss = append(ss, "rank:"+strconv.Itoa(k))
		}
		return sels(ss...)
	}
	var r1Cut, r2Cut []int // r1 from r2..r(N-1); r2 from r3..r(N-2) and rN
	for k := 2; k <= n-1; k++ {
		r1Cut = append(r1Cut, k)
	}
	for k := 3; k <= n-2; k++ {
		r2Cut = append(r2Cut, k)
	}
	r2Cut = append(r2Cut, n)
	return cutScenario("bridge", "the leader reaches only the lowest node, the second highest only the second lowest, the rest fully connected; held, healed; measured: the recovery after the heal",
		p, Link{From: ranks(1), To: ranks(r1Cut...)}, Link{From: ranks(2), To: ranks(r2Cut...)})
}

// needNodes checks that the topology has the nodes scenario name needs.
func needNodes(name string, p Params, least int) error {
	if p.Nodes < 1 {
		return fmt.Errorf("%s needs the topology's node count", name)
	}
	if p.Nodes < least {
		return fmt.Errorf("%s needs at least %d nodes, the topology has %d", name, least, p.Nodes)
	}
	return nil
}

// cutScenario cuts links from a stable start, holds the cut for p.Hold,
// heals, and measures the election after the heal.
func cutScenario(name, desc string, p Params, links ...Link) ([]*Scenario, error) {
	hold := p.Hold
	if hold == 0 {
		hold = DefaultHold
	}
	if hold < 0 {
		return nil, fmt.Errorf("hold %v is negative", hold)
	}
	sc := scenario(name, desc,
		Step{Kind: StepInject, Fault: &Injection{Kind: fault.Cut, Links: links}},
		waitFor(hold),
		healStep(),
		waitLeader(true))
	return []*Scenario{sc}, nil
}
