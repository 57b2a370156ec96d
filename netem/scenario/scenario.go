package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/topologies/yamlfile"
	"github.com/bullylab/bullylab/wire/bounded"
)

// Scenario is a named list of timed steps run against a testbed.
type Scenario struct {
	Name        string
	Description string
	// Start says how the cluster stands before step 1.
	Start Start
	// Labels tell variants of one scenario apart (delay=50ms for one point
	// of a latency sweep). They become key=value parts of benchmark names
	// and are stored with the results.
	Labels map[string]string
	Steps  []Step
	// Source is the file the scenario was parsed from, or "built-in NAME";
	// errors name it.
	Source string
}

// Start is how the cluster stands before the first step.
type Start string

const (
	// StartStable: every node runs and agrees on the highest node as
	// leader before step 1; reaching that is not measured.
	StartStable Start = "stable"
	// StartCold: the testbed is built and no node runs; the steps start
	// them (restart: all), so the first election is measured.
	StartCold Start = "cold"
)

// StepKind says what a step does.
type StepKind string

const (
	StepInject       StepKind = "inject"        // apply one Fault
	StepWaitLeader   StepKind = "wait_leader"   // wait until the connected live nodes agree on a leader
	StepWaitElection StepKind = "wait_election" // wait until some node is in an election
	StepWait         StepKind = "wait"          // let Duration pass
	StepHeal         StepKind = "heal"          // undo every network fault: partitions, isolations, impairments
)

// Expect is what a wait_leader step requires of the leader it finds.
type Expect string

const (
	// ExpectHighestLive: the leader is the highest-ID node among those
	// waited for (the Bully guarantee, SLE2).
	ExpectHighestLive Expect = "highest-live"
	// ExpectAny: any leader they agree on will do.
	ExpectAny Expect = "any"
)

// DefaultTimeout bounds wait_leader and wait_election steps that name no
// timeout. It is far above the SLE2 bound of the default timings (about
// 1.2 s plus ten message delays), so that hitting it means the election is
// stuck, not slow.
const DefaultTimeout = 30 * time.Second

// Limits keep a hostile or mistaken file from costing unbounded work.
const (
	MaxSteps     = 10_000
	MaxSelectors = 1_000 // per fault, group, link side or among list; links per cut
	MaxCount     = 1_000 // K of top:K and friends; topologies have at most 1000 nodes
)

// Step is one step of a scenario. Only the fields of its Kind are set.
type Step struct {
	Kind StepKind
	// Line is the step's 1-based line in its file; 0 for built-ins.
	Line int

	Fault *Injection // inject

	Timeout time.Duration // wait_leader, wait_election
	Expect  Expect        // wait_leader
	// Among selects the nodes whose agreement wait_leader waits for; empty
	// means the live nodes of the largest connected part of the network.
	Among   Selectors // wait_leader
	Measure bool      // wait_leader: this is the election the run measures

	Duration time.Duration // wait
}

// Injection is what an inject step does: a fault on selected nodes.
type Injection struct {
	Kind   fault.Kind
	Nodes  Selectors   // every fault but partition, cut and heal
	Groups []Selectors // partition
	Links  []Link      // cut
	OneWay bool        // partition, cut
	// Mode is how partition, isolate and cut sever links; empty is
	// fault.ModeDrop, and the file says it only when it was written.
	Mode   fault.CutMode
	Delay  time.Duration
	Jitter time.Duration
	Loss   float64         // percent, 0..100
	Clock  fault.ClockSkew // clock
}

// Link is one entry of a cut: every node From selects is cut from every
// node To selects (a node from itself excepted), both ways unless the
// cut is one-way.
type Link struct {
	From, To Selectors
}

// The patterns compile on first use: package initialisation runs in every
// bullylab process, node processes included, which never parse a scenario.
var (
	labelKeyPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`) })
	labelValPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`) })
)

// reservedLabels are the keys benchmark names already use.
var reservedLabels = []string{"topology", "scenario"}

// Measured returns the index of the wait_leader step whose election a run
// measures: the one marked measure, or else the first wait_leader after
// the first step that changes the cluster. It returns -1 when there is
// none, which Validate refuses.
func (sc *Scenario) Measured() int {
	for i, st := range sc.Steps {
		if st.Kind == StepWaitLeader && st.Measure {
			return i
		}
	}
	changed := false
	for i, st := range sc.Steps {
		switch st.Kind {
		case StepInject, StepHeal:
			changed = true
		case StepWaitLeader:
			if changed {
				return i
			}
		}
	}
	return -1
}

// Key identifies the scenario among variants: its name and its labels in
// key order, as in "latency-sweep delay=50ms".
func (sc *Scenario) Key() string {
	return Key(sc.Name, sc.Labels)
}

// Key joins a scenario name and its labels as Scenario.Key does.
func Key(name string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(name)
	for _, k := range sortedKeys(labels) {
		fmt.Fprintf(&b, " %s=%s", k, labels[k])
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Validate checks what the parser checks, for scenarios built in code.
// Errors are *Error naming the source, line and field.
func (sc *Scenario) Validate() error {
	v := validator{sc: sc}
	return v.run()
}

type validator struct{ sc *Scenario }

func (v validator) err(line int, field, format string, args ...any) error {
	return &Error{File: v.sc.Source, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (v validator) run() error {
	sc := v.sc
	if !yamlfile.ValidName(sc.Name) {
		return v.err(0, "name", "invalid name %s (want [A-Za-z0-9._-]{1,64})", bounded.Quote(sc.Name))
	}
	if strings.ContainsAny(sc.Description, "\r\n") {
		// Descriptions end up in one-line progress output and tables.
		return v.err(0, "description", "must be one line")
	}
	switch sc.Start {
	case StartStable, StartCold:
	default:
		return v.err(0, "start", "unknown start %s (want stable or cold)", bounded.Quote(string(sc.Start)))
	}
	for _, k := range sortedKeys(sc.Labels) {
		f := "labels." + k
		if !labelKeyPattern().MatchString(k) {
			return v.err(0, f, "invalid label name (want [a-z][a-z0-9_-]{0,31})")
		}
		if slices.Contains(reservedLabels, k) {
			return v.err(0, f, "%q is reserved for benchmark names", k)
		}
		if !labelValPattern().MatchString(sc.Labels[k]) {
			return v.err(0, f, "invalid value %s (want [A-Za-z0-9._-]{1,64})", bounded.Quote(sc.Labels[k]))
		}
	}
	if len(sc.Steps) == 0 {
		return v.err(0, "steps", "no steps")
	}
	if len(sc.Steps) > MaxSteps {
		return v.err(0, "steps", "%d steps, at most %d", len(sc.Steps), MaxSteps)
	}
	measured := -1
	for i, st := range sc.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		if err := v.step(st, f); err != nil {
			return err
		}
		if st.Measure {
			if measured >= 0 {
				return v.err(st.Line, f+".wait_leader.measure", "steps[%d] is measured already; a run measures one election", measured)
			}
			measured = i
		}
	}
	m := sc.Measured()
	if m < 0 {
		return v.err(0, "steps", "no wait_leader after a fault: nothing to measure")
	}
	changed := slices.ContainsFunc(sc.Steps[:m], func(st Step) bool { return st.Kind == StepInject || st.Kind == StepHeal })
	if !changed {
		return v.err(sc.Steps[m].Line, fmt.Sprintf("steps[%d].wait_leader.measure", m), "no fault before the measured wait_leader")
	}
	return nil
}

func (v validator) step(st Step, f string) error {
	if st.Measure && st.Kind != StepWaitLeader {
		return v.err(st.Line, f, "only wait_leader steps are measured")
	}
	switch st.Kind {
	case StepInject:
		if st.Fault == nil {
			return v.err(st.Line, f+".inject", "missing fault")
		}
		return v.fault(st.Fault, st.Line, f+".inject."+string(st.Fault.Kind))
	case StepWaitLeader:
		f += ".wait_leader"
		if st.Timeout <= 0 {
			return v.err(st.Line, f+".timeout", "must be positive")
		}
		if st.Expect != ExpectHighestLive && st.Expect != ExpectAny {
			return v.err(st.Line, f+".expect", "unknown expectation %s (want highest-live or any)", bounded.Quote(string(st.Expect)))
		}
		return v.selectors(st.Among, st.Line, f+".among", false)
	case StepWaitElection:
		if st.Timeout <= 0 {
			return v.err(st.Line, f+".wait_election.timeout", "must be positive")
		}
	case StepWait:
		if st.Duration <= 0 {
			return v.err(st.Line, f+".wait.duration", "must be positive")
		}
	case StepHeal:
	default:
		return v.err(st.Line, f, "unknown step kind %s", bounded.Quote(string(st.Kind)))
	}
	return nil
}

func (v validator) fault(ft *Injection, line int, f string) error {
	if ft.Mode != "" {
		if !ft.Mode.Valid() {
			return v.err(line, f+".mode", "unknown mode %s (want drop or reset)", bounded.Quote(string(ft.Mode)))
		}
		if !takesMode(ft.Kind) {
			return v.err(line, f+".mode", "only partition, isolate and cut take a mode")
		}
	}
	if ft.OneWay && ft.Kind != fault.Partition && ft.Kind != fault.Cut {
		return v.err(line, f+".one_way", "only partition and cut are one-way")
	}
	switch ft.Kind.Args() {
	case fault.ArgsLinks:
		return v.links(ft.Links, line, f+".links")
	case fault.ArgsClock:
		if len(ft.Nodes) == 0 {
			return v.err(line, f+".nodes", "selects no node")
		}
		if err := v.selectors(ft.Nodes, line, f+".nodes", false); err != nil {
			return err
		}
		if err := ft.Clock.Validate(); err != nil {
			field := ".offset"
			if ft.Clock.Offset <= fault.MaxClockOffset && ft.Clock.Offset >= -fault.MaxClockOffset {
				field = ".rate"
			}
			return v.err(line, f+field, "%v", err)
		}
		return nil
	case fault.ArgsGroups:
		if len(ft.Groups) < 2 {
			return v.err(line, f+".groups", "want at least two groups, got %d (use rest for everyone else)", len(ft.Groups))
		}
		if len(ft.Groups) > MaxSelectors {
			return v.err(line, f+".groups", "%d groups, at most %d", len(ft.Groups), MaxSelectors)
		}
		if ft.OneWay && len(ft.Groups) != 2 {
			return v.err(line, f+".groups", "a one-way partition cuts one group from another: want two groups, got %d", len(ft.Groups))
		}
		rest := -1
		for i, g := range ft.Groups {
			gf := fmt.Sprintf("%s.groups[%d]", f, i)
			if err := v.selectors(g, line, gf, true); err != nil {
				return err
			}
			if slices.ContainsFunc(g, func(s Selector) bool { return s.Kind == SelRest }) {
				if rest >= 0 {
					return v.err(line, gf, "rest is already groups[%d]", rest)
				}
				rest = i
			}
		}
		return nil
	case fault.ArgsNone:
		return nil
	case fault.ArgsNodes, fault.ArgsNodesOrAll, fault.ArgsDelay, fault.ArgsLoss:
	default:
		return v.err(line, f, "unknown fault %s", bounded.Quote(string(ft.Kind)))
	}
	nf := f
	if ft.Kind.Impairs() {
		nf += ".nodes"
	}
	if len(ft.Nodes) == 0 {
		return v.err(line, nf, "selects no node")
	}
	if err := v.selectors(ft.Nodes, line, nf, false); err != nil {
		return err
	}
	switch ft.Kind.Args() {
	case fault.ArgsDelay:
		if ft.Delay < 0 || ft.Jitter < 0 {
			return v.err(line, f, "negative delay or jitter")
		}
		if ft.Delay == 0 && ft.Jitter == 0 {
			return v.err(line, f+".delay", "zero delay and jitter change nothing (use clear)")
		}
	case fault.ArgsLoss:
		if !(ft.Loss > 0 && ft.Loss <= 100) {
			return v.err(line, f+".percent", "%g is not a percentage in (0, 100]", ft.Loss)
		}
	}
	return nil
}

func (v validator) links(links []Link, line int, f string) error {
	if len(links) == 0 {
		return v.err(line, f, "no links (want [[SEL, SEL], ...])")
	}
	if len(links) > MaxSelectors {
		return v.err(line, f, "%d links, at most %d", len(links), MaxSelectors)
	}
	for i, l := range links {
		for j, side := range [2]Selectors{l.From, l.To} {
			lf := fmt.Sprintf("%s[%d][%d]", f, i, j)
			if len(side) == 0 {
				return v.err(line, lf, "selects no node")
			}
			if err := v.selectors(side, line, lf, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// takesMode reports whether a fault of kind k severs links, and so takes
// a fault.CutMode.
func takesMode(k fault.Kind) bool {
	return k == fault.Partition || k == fault.Isolate || k == fault.Cut
}

func (v validator) selectors(ss Selectors, line int, f string, group bool) error {
	if len(ss) > MaxSelectors {
		return v.err(line, f, "%d selectors, at most %d", len(ss), MaxSelectors)
	}
	if group && len(ss) == 0 {
		return v.err(line, f, "empty group")
	}
	for _, s := range ss {
		if err := s.check(); err != nil {
			return v.err(line, f, "%v", err)
		}
		if s.Kind == SelRest && (!group || len(ss) > 1) {
			return v.err(line, f, "rest stands alone, as a whole partition group")
		}
	}
	return nil
}

// Error is a problem in a scenario. Its message is one line:
// "file:line: field: what is wrong".
type Error = yamlfile.Error
