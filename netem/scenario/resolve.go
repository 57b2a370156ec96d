package scenario

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire/bounded"
)

// ProcessState is what a node's process is doing, as the testbed sees it.
type ProcessState string

const (
	StatusLive    ProcessState = "live"    // running
	StatusCrashed ProcessState = "crashed" // not running: killed, or not started yet
	StatusPaused  ProcessState = "paused"  // stopped with SIGSTOP
	StatusLeft    ProcessState = "left"    // announced LEAVE and exited; join brings it back
)

// NodeView is one node in a View.
type NodeView struct {
	Name   string
	Status ProcessState
}

// View is the testbed as a step sees it when its selectors are resolved.
type View struct {
	// Nodes lists every node of the testbed, lowest ID first: the Bully
	// order (the lab gives IDs in topology order, so there they agree).
	Nodes []NodeView
	// Groups are the topology's named groups, for selectors that name one.
	Groups map[string][]string
	// Leader is the leader most live Normal nodes follow (ties go to the
	// higher ID), "" when no live node is Normal; Epoch is its epoch.
	Leader string
	Epoch  uint64
}

// InitialView is the view a scenario starts from on a testbed whose nodes
// are given lowest ID first: every node live under the highest for
// StartStable, every node down for StartCold.
func InitialView(nodes []string, groups map[string][]string, start Start) View {
	v := View{Groups: groups}
	for _, n := range nodes {
		st := StatusLive
		if start == StartCold {
			st = StatusCrashed
		}
		v.Nodes = append(v.Nodes, NodeView{Name: n, Status: st})
	}
	if start != StartCold && len(nodes) > 0 {
		v.Leader, v.Epoch = nodes[len(nodes)-1], 1
	}
	return v
}

// Clone returns a deep copy of v.
func (v View) Clone() View {
	c := v
	c.Nodes = slices.Clone(v.Nodes)
	c.Groups = maps.Clone(v.Groups)
	return c
}

func (v *View) status(node string) (ProcessState, bool) {
	for _, n := range v.Nodes {
		if n.Name == node {
			return n.Status, true
		}
	}
	return "", false
}

func (v *View) setStatus(node string, st ProcessState) {
	for i := range v.Nodes {
		if v.Nodes[i].Name == node {
			v.Nodes[i].Status = st
		}
	}
}

// impairText is imp as a schedule line has it: "50ms jitter 5ms 2%".
func impairText(imp fault.Impairment) string {
	var parts []string
	if imp.Delay > 0 || imp.Jitter > 0 {
		s := imp.Delay.String()
		if imp.Jitter > 0 {
			s += " jitter " + imp.Jitter.String()
		}
		parts = append(parts, s)
	}
	if imp.Loss > 0 {
		parts = append(parts, strconv.FormatFloat(imp.Loss, 'g', -1, 64)+"%")
	}
	return strings.Join(parts, " ")
}

// Action is a step with its selectors resolved to node names: what the
// Target is asked to do. Node lists are lowest ID first.
type Action struct {
	Step int // index in Scenario.Steps
	Kind StepKind

	Fault  fault.Kind // inject
	Nodes  []string   // inject: the nodes; wait_leader: those waited for; heal: those unisolated
	Groups [][]string // inject partition; heal: the partition removed
	// Links are the node pairs a cut severs, each in ID order unless the
	// cut is one-way; for heal, the pairs cut until then (both ways).
	Links  [][2]string
	OneWay bool            // inject partition, cut
	Mode   fault.CutMode   // inject partition, isolate, cut
	Clock  fault.ClockSkew // inject clock
	// Impair is what delay or loss sets on Nodes: Delay and Jitter for
	// delay, Loss for loss; the node's other settings stay.
	Impair fault.Impairment

	Healed  bool     // heal: a partition or isolation was removed
	Cleared []string // heal: the nodes whose delay and loss were cleared

	Timeout  time.Duration // wait_leader, wait_election
	Expect   Expect        // wait_leader
	Measure  bool          // wait_leader
	Duration time.Duration // wait
}

// fault is the fault an inject action applies.
func (a Action) fault() fault.Fault {
	f := fault.Fault{Kind: a.Fault, Nodes: a.Nodes, Groups: a.Groups, Links: a.Links, OneWay: a.OneWay, Mode: a.Mode}
	if a.Fault == fault.Delay || a.Fault == fault.Loss {
		imp := a.Impair
		f.Impair = &imp
	}
	if a.Fault == fault.Clock {
		skew := a.Clock
		f.Clock = &skew
	}
	return f
}

// String is the action as one line of a schedule.
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(string(a.Kind))
	switch a.Kind {
	case StepInject:
		b.WriteString(" " + string(a.Fault))
		switch a.Fault.Args() {
		case fault.ArgsGroups:
			sep := " | "
			if a.OneWay {
				sep = " -> "
			}
			for i, g := range a.Groups {
				if i == 0 {
					b.WriteByte(' ')
				} else {
					b.WriteString(sep)
				}
				b.WriteString(strings.Join(g, ","))
			}
		case fault.ArgsLinks:
			b.WriteString(" " + linksText(a.Links, a.OneWay))
		case fault.ArgsClock:
			fmt.Fprintf(&b, " %s on %s", clockText(a.Clock), strings.Join(a.Nodes, ","))
		case fault.ArgsNone:
		case fault.ArgsDelay, fault.ArgsLoss:
			fmt.Fprintf(&b, " %s on %s", impairText(a.Impair), strings.Join(a.Nodes, ","))
		default:
			b.WriteString(" " + strings.Join(a.Nodes, ","))
		}
		if a.Mode != "" {
			b.WriteString(" mode " + string(a.Mode))
		}
	case StepHeal:
		var parts []string
		if len(a.Groups) > 0 {
			parts = append(parts, "partition")
		}
		if len(a.Links) > 0 {
			parts = append(parts, "uncut "+linksText(a.Links, false))
		}
		if len(a.Nodes) > 0 {
			parts = append(parts, "unisolate "+strings.Join(a.Nodes, ","))
		}
		if len(a.Cleared) > 0 {
			parts = append(parts, "clear "+strings.Join(a.Cleared, ","))
		}
		if len(parts) == 0 {
			parts = append(parts, "nothing in force")
		}
		b.WriteString(" " + strings.Join(parts, "; "))
	case StepWaitLeader:
		fmt.Fprintf(&b, " among %s expect %s timeout %s", strings.Join(a.Nodes, ","), a.Expect, a.Timeout)
		if a.Measure {
			b.WriteString(" (measured)")
		}
	case StepWaitElection:
		fmt.Fprintf(&b, " timeout %s", a.Timeout)
	case StepWait:
		b.WriteString(" " + a.Duration.String())
	}
	return b.String()
}

// clockText is a skew as a schedule line has it: "offset +1m30s rate
// -500ppm", or "host clock" for none.
func clockText(c fault.ClockSkew) string {
	if c == (fault.ClockSkew{}) {
		return "host clock"
	}
	s := "offset " + c.Offset.String()
	if c.Offset > 0 {
		s = "offset +" + c.Offset.String()
	}
	if c.RatePPM != 0 {
		s += " rate " + strconv.FormatFloat(c.RatePPM, 'g', -1, 64) + "ppm"
		if c.RatePPM > 0 {
			s = strings.Replace(s, "rate ", "rate +", 1)
		}
	}
	return s
}

// linksText is links as a schedule has them: "a-b,a-c", or "a->b" for
// one-way.
func linksText(links [][2]string, oneWay bool) string {
	sep := "-"
	if oneWay {
		sep = "->"
	}
	parts := make([]string, len(links))
	for i, l := range links {
		parts[i] = l[0] + sep + l[1]
	}
	return strings.Join(parts, ",")
}

// Schedule is a scenario resolved step by step.
type Schedule []Action

// String prints one action a line, numbered from 1 as people count steps.
// Two schedules print alike exactly when they do the same thing.
func (s Schedule) String() string {
	var b strings.Builder
	for _, a := range s {
		fmt.Fprintf(&b, "%d. %s\n", a.Step+1, a)
	}
	return b.String()
}

// network is the fault state the executor put in force. It is kept by the
// executor rather than asked of the Target because nothing else changes
// it, and the dry run needs it without a testbed.
type network struct {
	groups   [][]string // partition in force; nil when none
	oneWay   bool
	isolated map[string]bool
	impaired map[string]bool // delay or loss set by a fault
	// cut holds the directions the cut in force severs, [from, to]; a new
	// cut replaces it, as in the lab, and a heal removes it.
	cut map[[2]string]bool
}

func newNetwork() *network {
	return &network{isolated: map[string]bool{}, impaired: map[string]bool{}, cut: map[[2]string]bool{}}
}

// cutPairs are the node pairs some cut severed in either direction, in
// the ID order rank gives, lower first.
func (n *network) cutPairs(rank map[string]int) [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	for l := range n.cut {
		if rank[l[0]] > rank[l[1]] {
			l[0], l[1] = l[1], l[0]
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	sortLinks(out, rank)
	return out
}

func sortLinks(links [][2]string, rank map[string]int) {
	slices.SortFunc(links, func(a, b [2]string) int {
		if c := rank[a[0]] - rank[b[0]]; c != 0 {
			return c
		}
		return rank[a[1]] - rank[b[1]]
	})
}

// apply records the network effect of a.
func (n *network) apply(a Action) {
	switch a.Kind {
	case StepHeal:
		n.groups, n.oneWay = nil, false
		clear(n.isolated)
		clear(n.impaired)
		clear(n.cut)
	case StepInject:
		switch a.Fault {
		case fault.Partition:
			n.groups, n.oneWay = a.Groups, a.OneWay
		case fault.Cut:
			clear(n.cut)
			for _, l := range a.Links {
				n.cut[l] = true
				if !a.OneWay {
					n.cut[[2]string{l[1], l[0]}] = true
				}
			}
		case fault.Heal:
			n.groups, n.oneWay = nil, false
			clear(n.isolated)
			clear(n.cut)
		case fault.Isolate:
			for _, x := range a.Nodes {
				n.isolated[x] = true
			}
		case fault.Unisolate:
			for _, x := range a.Nodes {
				delete(n.isolated, x)
			}
		case fault.Delay, fault.Loss:
			for _, x := range a.Nodes {
				n.impaired[x] = true
			}
		case fault.Clear:
			for _, x := range a.Nodes {
				delete(n.impaired, x)
			}
		}
	}
}

// predict applies the effect a dry run assumes an action has on the view:
// faults do what they say, and wait_leader ends with the highest node
// waited for leading, as the Bully algorithm promises.
func (v *View) predict(a Action) {
	switch a.Kind {
	case StepInject:
		set := func(st ProcessState) {
			for _, x := range a.Nodes {
				v.setStatus(x, st)
				if x == v.Leader && st != StatusLive {
					v.Leader = ""
				}
			}
		}
		switch a.Fault {
		case fault.Crash:
			set(StatusCrashed)
		case fault.Pause:
			set(StatusPaused)
		case fault.Leave:
			set(StatusLeft)
		case fault.Restart, fault.Resume, fault.Join:
			set(StatusLive)
		}
	case StepWaitLeader:
		if len(a.Nodes) > 0 {
			if leader := a.Nodes[len(a.Nodes)-1]; leader != v.Leader {
				v.Leader = leader
				v.Epoch++
			}
		}
	}
}

// resolver turns steps into actions. Each step draws from a generator of
// its own, seeded from the scenario's generator before step 1, so a step
// picks the same nodes whatever earlier steps drew: a random:3 that found
// only two candidates does not shift every later choice.
type resolver struct {
	sc    *Scenario
	seeds []int64
}

func newResolver(sc *Scenario, rng *rand.Rand) *resolver {
	r := &resolver{sc: sc, seeds: make([]int64, len(sc.Steps))}
	for i := range r.seeds {
		r.seeds[i] = int64(rng.Uint64())
	}
	return r
}

// Resolve is a dry run: it resolves every step of sc against view, which
// it evolves as Execute would if every fault did what it says and every
// election elected the highest node waited for. The same scenario, view
// and seed give the same schedule; Execute resolves each step the same way
// against the testbed's view at that moment, so on a testbed that behaves
// its schedule is this one.
func Resolve(sc *Scenario, view View, rng *rand.Rand) (Schedule, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	r := newResolver(sc, rng)
	net := newNetwork()
	v := view.Clone()
	var sched Schedule
	for i := range sc.Steps {
		a, err := r.step(i, &v, net)
		if err != nil {
			return sched, &StepError{Step: i, Kind: sc.Steps[i].Kind, Err: err}
		}
		net.apply(a)
		v.predict(a)
		sched = append(sched, a)
	}
	return sched, nil
}

// step resolves step i against view v and the network state.
func (r *resolver) step(i int, v *View, net *network) (Action, error) {
	st := r.sc.Steps[i]
	a := Action{Step: i, Kind: st.Kind, Timeout: st.Timeout, Expect: st.Expect, Measure: st.Measure, Duration: st.Duration}
	rng := NewRand(r.seeds[i])
	pk := newPicker(v, net, rng)
	switch st.Kind {
	case StepInject:
		ft := st.Fault
		a.Fault = ft.Kind
		switch ft.Kind.Args() {
		case fault.ArgsNone:
		case fault.ArgsGroups:
			groups, err := pk.partition(ft.Groups)
			if err != nil {
				return a, fmt.Errorf("partition: %w", err)
			}
			a.Groups, a.OneWay, a.Mode = groups, ft.OneWay, ft.Mode
		case fault.ArgsLinks:
			links, err := pk.links(ft.Links, ft.OneWay)
			if err != nil {
				return a, fmt.Errorf("cut: %w", err)
			}
			a.Links, a.OneWay, a.Mode = links, ft.OneWay, ft.Mode
		default:
			pool, poolName := pk.pool(ft.Kind)
			nodes, err := pk.pick(ft.Nodes, pool, poolName, nil)
			if err != nil {
				return a, fmt.Errorf("%s: %w", ft.Kind, err)
			}
			a.Nodes = nodes
			a.Impair = fault.Impairment{Delay: ft.Delay, Jitter: ft.Jitter, Loss: ft.Loss}
			a.Mode, a.Clock = ft.Mode, ft.Clock
		}
	case StepHeal:
		a.Groups = net.groups
		a.Nodes = pk.filter(func(x string) bool { return net.isolated[x] })
		a.Links = net.cutPairs(pk.rank)
		a.Healed = net.groups != nil || len(a.Nodes) > 0 || len(a.Links) > 0
		a.Cleared = pk.filter(func(x string) bool { return net.impaired[x] })
	case StepWaitLeader:
		var err error
		if len(st.Among) > 0 {
			a.Nodes, err = pk.pick(st.Among, pk.live(), "live", nil)
		} else {
			a.Nodes, err = pk.connected()
		}
		if err != nil {
			return a, fmt.Errorf("wait_leader: %w", err)
		}
	}
	return a, nil
}

// picker resolves selectors against one view.
type picker struct {
	v      *View
	net    *network
	rng    *rand.Rand
	rank   map[string]int // position in ID order
	status map[string]ProcessState
}

func newPicker(v *View, net *network, rng *rand.Rand) *picker {
	p := &picker{v: v, net: net, rng: rng, rank: make(map[string]int, len(v.Nodes)), status: make(map[string]ProcessState, len(v.Nodes))}
	for i, n := range v.Nodes {
		p.rank[n.Name] = i
		p.status[n.Name] = n.Status
	}
	return p
}

// filter returns the nodes for which keep holds, lowest ID first.
func (p *picker) filter(keep func(string) bool) []string {
	var out []string
	for _, n := range p.v.Nodes {
		if keep(n.Name) {
			out = append(out, n.Name)
		}
	}
	return out
}

func (p *picker) withStatus(st ProcessState) []string {
	return p.filter(func(x string) bool { return p.status[x] == st })
}

func (p *picker) live() []string { return p.withStatus(StatusLive) }

// pool returns the nodes a fault can apply to, which keyword selectors
// choose from: restart picks among crashed nodes, not live ones.
func (p *picker) pool(k fault.Kind) ([]string, string) {
	switch k {
	case fault.Restart:
		return p.withStatus(StatusCrashed), "crashed"
	case fault.Resume:
		return p.withStatus(StatusPaused), "paused"
	case fault.Join:
		return p.withStatus(StatusLeft), "left"
	case fault.Unisolate:
		return p.filter(func(x string) bool { return p.net.isolated[x] }), "isolated"
	case fault.Isolate:
		return p.filter(func(x string) bool { return p.status[x] == StatusLive && !p.net.isolated[x] }), "live and connected"
	case fault.Clear:
		return p.filter(func(x string) bool { return p.net.impaired[x] }), "impaired"
	case fault.Delay, fault.Loss:
		return p.filter(func(string) bool { return true }), "testbed"
	case fault.Clock:
		// A node down gets the skew when it starts; a paused one cannot
		// be told.
		return p.filter(func(x string) bool { return p.status[x] != StatusPaused }), "unpaused"
	}
	return p.live(), "live"
}

// pick resolves ss against pool. Keyword selectors choose among the pool
// minus taken and minus what earlier selectors of ss chose, so [leader,
// random] names two nodes; names must be in the pool, or anywhere in the
// testbed when poolName is "".
func (p *picker) pick(ss Selectors, pool []string, poolName string, taken map[string]bool) ([]string, error) {
	sel := p.newSelection(pool, poolName, taken)
	for _, s := range ss {
		if err := sel.apply(s); err != nil {
			return nil, err
		}
	}
	return sel.result(), nil
}

// selection is one call of pick under way. Its selectors accumulate into
// chosen, which also narrows what the keyword selectors after them see.
type selection struct {
	p        *picker
	pool     []string
	poolName string
	inPool   map[string]bool
	taken    map[string]bool // by earlier partition groups
	chosen   map[string]bool
}

func (p *picker) newSelection(pool []string, poolName string, taken map[string]bool) *selection {
	sel := &selection{p: p, pool: pool, poolName: poolName, inPool: map[string]bool{}, taken: taken, chosen: map[string]bool{}}
	for _, x := range pool {
		sel.inPool[x] = true
	}
	return sel
}

// free returns the pool nodes still open to keyword selectors, lowest ID
// first.
func (sel *selection) free() []string {
	var out []string
	for _, x := range sel.pool {
		if !sel.chosen[x] && !sel.taken[x] {
			out = append(out, x)
		}
	}
	return out
}

func (sel *selection) choose(xs ...string) {
	for _, x := range xs {
		sel.chosen[x] = true
	}
}

// need checks that n nodes, and at least one, are left to choose from.
func (sel *selection) need(s Selector, n int, cands []string) error {
	if n < 1 {
		return fmt.Errorf("%s: no node to select among %d live nodes", s, len(sel.p.live()))
	}
	if len(cands) < n {
		return fmt.Errorf("%s: needs %d %s nodes, %d left to choose from", s, n, sel.poolName, len(cands))
	}
	return nil
}

// apply adds the nodes s selects to the selection.
func (sel *selection) apply(s Selector) error {
	switch s.Kind {
	case SelLeader:
		return sel.leader()
	case SelHighest, SelLowest, SelTop, SelBottom:
		return sel.byRank(s)
	case SelRank:
		return sel.rank(s)
	case SelRandom:
		cands := sel.free()
		if err := sel.need(s, s.N, cands); err != nil {
			return err
		}
		sel.choose(sel.p.sample(cands, s.N)...)
	case SelAll, SelRest:
		cands := sel.free()
		if len(cands) == 0 {
			return fmt.Errorf("%s: no %s node to select", s, sel.poolName)
		}
		sel.choose(cands...)
	case SelMinority, SelMajority, SelRandomMinority, SelRandomMajority:
		return sel.share(s)
	case SelSide:
		return sel.side(s)
	case SelName, SelNode, SelGroup:
		return sel.named(s)
	default:
		return fmt.Errorf("unknown selector %s", s)
	}
	return nil
}

func (sel *selection) leader() error {
	leader := sel.p.v.Leader
	if leader == "" {
		return fmt.Errorf("leader: the live nodes follow no leader (add a wait_leader step before)")
	}
	if !sel.inPool[leader] {
		return fmt.Errorf("leader: %s is not %s", leader, sel.poolName)
	}
	sel.choose(leader)
	return nil
}

// byRank selects by position in ID order: highest, lowest, top:N and
// bottom:N.
func (sel *selection) byRank(s Selector) error {
	cands := sel.free()
	n := s.N
	if s.Kind == SelHighest || s.Kind == SelLowest {
		n = 1
	}
	if err := sel.need(s, n, cands); err != nil {
		return err
	}
	switch s.Kind {
	case SelHighest, SelTop:
		sel.choose(cands[len(cands)-n:]...)
	default:
		sel.choose(cands[:n]...)
	}
	return nil
}

// rank selects the N-th highest node of the pool. Unlike byRank it counts
// the whole pool, whatever earlier selectors or partition groups took, so
// that [rank:2, rank:3] names the second and third highest: a rank names
// one fixed node, and choosing a node twice changes nothing.
func (sel *selection) rank(s Selector) error {
	if len(sel.pool) < s.N {
		return fmt.Errorf("%s: needs %d %s nodes, the testbed has %d", s, s.N, sel.poolName, len(sel.pool))
	}
	sel.choose(sel.pool[len(sel.pool)-s.N])
	return nil
}

// share selects a minority or a majority. Its size counts every live node,
// not the pool: it is about what the cluster can still elect.
func (sel *selection) share(s Selector) error {
	cands := sel.free()
	live := len(sel.p.live())
	n := (live - 1) / 2
	if s.Kind == SelMajority || s.Kind == SelRandomMajority {
		n = live/2 + 1
	}
	if err := sel.need(s, n, cands); err != nil {
		return err
	}
	if s.Kind == SelMinority || s.Kind == SelMajority {
		sel.choose(cands[len(cands)-n:]...)
	} else {
		sel.choose(sel.p.sample(cands, n)...)
	}
	return nil
}

// side selects the pool nodes of one side of the partition in force.
// Unlike the keywords that draw from free(), it ignores what earlier
// selectors chose: a side is a fixed set of nodes, and choosing a node
// twice changes nothing.
func (sel *selection) side(s Selector) error {
	groups := sel.p.net.groups
	if groups == nil {
		if len(sel.p.net.cut) > 0 {
			return fmt.Errorf("%s: no partition in force (a cut has no sides)", s)
		}
		return fmt.Errorf("%s: no partition in force", s)
	}
	if s.N > len(groups) {
		return fmt.Errorf("%s: the partition in force has %d sides", s, len(groups))
	}
	var side []string
	for _, x := range groups[s.N-1] {
		if sel.inPool[x] && !sel.taken[x] {
			side = append(side, x)
		}
	}
	if len(side) == 0 {
		return fmt.Errorf("%s: no %s node on that side", s, sel.poolName)
	}
	sel.choose(side...)
	return nil
}

// named selects a node or group by name; every node it names must be in
// the pool, unless the pool is the whole testbed.
func (sel *selection) named(s Selector) error {
	names, err := sel.p.named(s)
	if err != nil {
		return err
	}
	for _, x := range names {
		if sel.poolName != "" && !sel.inPool[x] {
			return fmt.Errorf("%s is %s, not %s", x, describeStatus(sel.p.status[x], sel.p.net.isolated[x]), sel.poolName)
		}
	}
	sel.choose(names...)
	return nil
}

// result returns what was chosen, lowest ID first.
func (sel *selection) result() []string {
	out := make([]string, 0, len(sel.chosen))
	for x := range sel.chosen {
		out = append(out, x)
	}
	slices.SortFunc(out, func(a, b string) int { return sel.p.rank[a] - sel.p.rank[b] })
	return out
}

func describeStatus(st ProcessState, isolated bool) string {
	if isolated && st == StatusLive {
		return "isolated"
	}
	return string(st)
}

// named resolves a name: a node, else a topology group.
func (p *picker) named(s Selector) ([]string, error) {
	_, isNode := p.rank[s.Name]
	group, isGroup := p.v.Groups[s.Name]
	switch {
	case s.Kind != SelGroup && isNode:
		return []string{s.Name}, nil
	case s.Kind != SelNode && isGroup:
		for _, x := range group {
			if _, ok := p.rank[x]; !ok {
				return nil, fmt.Errorf("group %s names %s, which the testbed does not have", s.Name, x)
			}
		}
		return group, nil
	case s.Kind == SelNode:
		return nil, fmt.Errorf("unknown node %q", s.Name)
	case s.Kind == SelGroup:
		return nil, fmt.Errorf("unknown group %q", s.Name)
	}
	return nil, fmt.Errorf("unknown node or group %q", s.Name)
}

// sample returns n of cands chosen uniformly, by a partial Fisher-Yates
// shuffle of a copy; cands are in ID order, so the draw depends only on
// the generator and the candidates.
func (p *picker) sample(cands []string, n int) []string {
	c := slices.Clone(cands)
	for i := 0; i < n; i++ {
		j := i + p.rng.IntN(len(c)-i)
		c[i], c[j] = c[j], c[i]
	}
	return c[:n]
}

// partition resolves partition groups. Keyword selectors choose among the
// live nodes that earlier groups did not take; names and rest may take any
// node. Every node of the testbed must end in exactly one group, so that
// what a node can reach never depends on a default.
func (p *picker) partition(groups []Selectors) ([][]string, error) {
	all := p.filter(func(string) bool { return true })
	out := make([][]string, len(groups))
	owner := map[string]int{}
	rest := -1
	for i, g := range groups {
		if len(g) == 1 && g[0].Kind == SelRest {
			rest = i
			continue
		}
		taken := map[string]bool{}
		for x := range owner {
			taken[x] = true
		}
		members, err := p.nodesOf(g, taken)
		if err != nil {
			return nil, fmt.Errorf("groups[%d]: %w", i, err)
		}
		for _, x := range members {
			if j, ok := owner[x]; ok && j != i {
				return nil, fmt.Errorf("%s is in groups[%d] and groups[%d]", x, j, i)
			}
			owner[x] = i
		}
		slices.SortFunc(members, func(a, b string) int { return p.rank[a] - p.rank[b] })
		out[i] = slices.Compact(members)
	}
	var missing []string
	for _, x := range all {
		if _, ok := owner[x]; !ok {
			if rest >= 0 {
				out[rest] = append(out[rest], x)
			} else {
				missing = append(missing, x)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s in no group (add rest as a group)", strings.Join(missing, ","))
	}
	for i, g := range out {
		if len(g) == 0 {
			return nil, fmt.Errorf("groups[%d] is empty", i)
		}
	}
	return out, nil
}

// links resolves a cut's links to node pairs: for each link, every node
// its From selects with every node its To selects but itself, lower ID
// first unless the cut is one-way, each pair once, in ID order. Like
// partition groups, names may name any node and keywords pick among the
// live nodes; the two ends of a link are resolved independently, so
// [top:2, top:2] cuts the two highest nodes from each other.
func (p *picker) links(links []Link, oneWay bool) ([][2]string, error) {
	seen := map[[2]string]bool{}
	var out [][2]string
	for i, l := range links {
		from, err := p.nodesOf(l.From, map[string]bool{})
		if err != nil {
			return nil, fmt.Errorf("links[%d][0]: %w", i, err)
		}
		to, err := p.nodesOf(l.To, map[string]bool{})
		if err != nil {
			return nil, fmt.Errorf("links[%d][1]: %w", i, err)
		}
		n := len(out)
		for _, a := range from {
			for _, b := range to {
				pair := [2]string{a, b}
				if !oneWay && p.rank[a] > p.rank[b] {
					pair = [2]string{b, a}
				}
				if a != b && !seen[pair] {
					seen[pair] = true
					out = append(out, pair)
				}
			}
		}
		if len(out) == n && len(from) == 1 && slices.Equal(from, to) {
			return nil, fmt.Errorf("links[%d] joins %s to itself", i, from[0])
		}
	}
	sortLinks(out, p.rank)
	return out, nil
}

// nodesOf resolves a partition group or one end of a cut's link: names
// anywhere in the testbed, keywords among the live nodes that neither
// taken (which it extends by the names) nor the names hold.
func (p *picker) nodesOf(ss Selectors, taken map[string]bool) ([]string, error) {
	var names, keys Selectors
	for _, s := range ss {
		if s.Kind == SelName || s.Kind == SelNode || s.Kind == SelGroup {
			names = append(names, s)
		} else {
			keys = append(keys, s)
		}
	}
	var out []string
	if len(names) > 0 {
		ns, err := p.pick(names, nil, "", nil)
		if err != nil {
			return nil, err
		}
		for _, x := range ns {
			taken[x] = true
		}
		out = append(out, ns...)
	}
	if len(keys) > 0 {
		ks, err := p.pick(keys, p.live(), "live", taken)
		if err != nil {
			return nil, err
		}
		out = append(out, ks...)
	}
	return out, nil
}

// connected returns the live nodes wait_leader waits for by default: those
// of the largest connected part of the network. Isolated nodes are parts of
// their own. With no cut in force: under a symmetric partition the largest
// side wins, ties going to the side with the highest node; under a one-way
// partition from Groups[0] to Groups[1], Groups[1], which no longer hears
// Groups[0]. With cuts the network need not fall into clean parts; the
// nodes waited for are then the largest connected component of the graph
// whose edges are the pairs of live, unisolated nodes linked both ways
// (neither direction cut, nor separated by the partition), ties going to
// the component with the highest node. A cut that leaves that graph
// connected (chained, bridge) waits for every live unisolated node.
func (p *picker) connected() ([]string, error) {
	cands := p.filter(func(x string) bool { return p.status[x] == StatusLive && !p.net.isolated[x] })
	if len(p.net.cut) > 0 {
		cands = p.largestComponent(cands)
	} else if p.net.groups != nil {
		side := map[string]int{}
		for i, g := range p.net.groups {
			for _, x := range g {
				side[x] = i
			}
		}
		best := -1
		if p.net.oneWay {
			var out []string
			for _, x := range cands {
				if side[x] == 1 {
					out = append(out, x)
				}
			}
			cands = out
		} else {
			count := make([]int, len(p.net.groups))
			highest := make([]int, len(p.net.groups))
			for i := range highest {
				highest[i] = -1
			}
			for _, x := range cands {
				count[side[x]]++
				highest[side[x]] = max(highest[side[x]], p.rank[x])
			}
			for i := range count {
				if best < 0 || count[i] > count[best] || count[i] == count[best] && highest[i] > highest[best] {
					best = i
				}
			}
			var out []string
			for _, x := range cands {
				if side[x] == best {
					out = append(out, x)
				}
			}
			cands = out
		}
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("no live connected node to wait for")
	}
	return cands, nil
}

// largestComponent returns the largest connected component of nodes
// (lowest ID first) under the partition and cuts in force, counting a
// link only when it is up both ways.
func (p *picker) largestComponent(nodes []string) []string {
	side := map[string]int{}
	for i, g := range p.net.groups {
		for _, x := range g {
			side[x] = i
		}
	}
	up := func(a, b string) bool {
		return side[a] == side[b] && !p.net.cut[[2]string{a, b}] && !p.net.cut[[2]string{b, a}]
	}
	comp := make([]int, len(nodes))
	for i := range comp {
		comp[i] = -1
	}
	var best []string
	for i := range nodes {
		if comp[i] >= 0 {
			continue
		}
		comp[i] = i
		members := []int{i}
		for q := 0; q < len(members); q++ {
			for j := range nodes {
				if comp[j] < 0 && up(nodes[members[q]], nodes[j]) {
					comp[j] = i
					members = append(members, j)
				}
			}
		}
		slices.Sort(members)
		if len(members) > len(best) || len(members) == len(best) && p.rank[nodes[members[len(members)-1]]] > p.rank[best[len(best)-1]] {
			best = best[:0]
			for _, j := range members {
				best = append(best, nodes[j])
			}
		}
	}
	return best
}

// CheckNames reports the first selector of sc that names a node or group
// the testbed lacks, before anything runs: such a step could only fail,
// and a bench would find out only once it had built a testbed and run the
// steps before it. nodes are the testbed's node names and groups its
// groups, those of the topology called topology. The error is an *Error
// naming the scenario's file, the step's line and field, and the name.
func (sc *Scenario) CheckNames(topology string, nodes []string, groups map[string][]string) error {
	isNode := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		isNode[n] = true
	}
	check := func(st Step, field string, ss Selectors) error {
		for _, s := range ss {
			var msg string
			switch {
			case s.Kind == SelNode && !isNode[s.Name]:
				msg = fmt.Sprintf("topology %s has no node %s (%s)", topology, bounded.Quote(s.Name), describeNodes(nodes))
			case s.Kind == SelGroup && groups[s.Name] == nil:
				msg = fmt.Sprintf("topology %s has no group %s (%s)", topology, bounded.Quote(s.Name), describeGroups(groups))
			case s.Kind == SelName && !isNode[s.Name] && groups[s.Name] == nil:
				msg = fmt.Sprintf("topology %s has no node or group %s (%s; %s)", topology, bounded.Quote(s.Name),
					describeNodes(nodes), describeGroups(groups))
			default:
				continue
			}
			return &Error{File: sc.Source, Line: st.Line, Field: field, Msg: msg}
		}
		return nil
	}
	for i, st := range sc.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		var err error
		switch {
		case st.Kind == StepWaitLeader:
			err = check(st, f+".wait_leader.among", st.Among)
		case st.Kind == StepInject && st.Fault != nil:
			ft := st.Fault
			f += ".inject." + string(ft.Kind)
			for j, g := range ft.Groups {
				if err = check(st, fmt.Sprintf("%s.groups[%d]", f, j), g); err != nil {
					break
				}
			}
			for j, l := range ft.Links {
				if err == nil {
					err = check(st, fmt.Sprintf("%s.links[%d][0]", f, j), l.From)
				}
				if err == nil {
					err = check(st, fmt.Sprintf("%s.links[%d][1]", f, j), l.To)
				}
			}
			if err == nil {
				if ft.Kind.Impairs() || ft.Kind == fault.Clock || ft.Kind == fault.Isolate && ft.Mode != "" {
					f += ".nodes"
				}
				err = check(st, f, ft.Nodes)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// describeNodes says which nodes there are, in a few words whatever their
// number.
func describeNodes(nodes []string) string {
	switch len(nodes) {
	case 0:
		return "it has no nodes"
	case 1:
		return "its node is " + nodes[0]
	case 2:
		return "its nodes are " + nodes[0] + " and " + nodes[1]
	}
	return fmt.Sprintf("its %d nodes are %s to %s", len(nodes), nodes[0], nodes[len(nodes)-1])
}

// describeGroups lists the groups there are, at most a few.
func describeGroups(groups map[string][]string) string {
	names := slices.Sorted(maps.Keys(groups))
	switch {
	case len(names) == 0:
		return "it has no groups"
	case len(names) > 5:
		return fmt.Sprintf("its groups are %s and %d more", strings.Join(names[:5], ", "), len(names)-5)
	}
	return "its groups are " + strings.Join(names, ", ")
}
