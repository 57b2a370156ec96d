//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies/fault"
)

// Faults applies faults to a lab's nodes, one at a time, and hands each
// one's record to the observers once it is in force: on the processes
// (crash, pause, leave, ...) through the lab's nodeProcs, on the network
// (partitions, isolation, delay, loss) through its network.
type Faults struct {
	*roster
	procs *nodeProcs
	net   *network
	ctx   context.Context // the lab's: ends when Close begins, aborting waits

	applying sync.Mutex // held while a fault is applied, and by Close

	mu        sync.Mutex // guards observers
	observers []func(fault.Fault)
}

// checkCutMode refuses a mode other than drop ("") and reset, naming the
// fault it was given for.
func checkCutMode(kind fault.Kind, mode fault.CutMode) error {
	if !mode.Valid() {
		return fmt.Errorf("%s: mode %q: want %s or %s", kind, mode, fault.ModeDrop, fault.ModeReset)
	}
	return nil
}

// Apply applies f (see fault.Fault for what each kind takes) and returns the
// record observers got.
func (fl *Faults) Apply(ctx context.Context, f fault.Fault) (fault.Fault, error) {
	if err := checkCutMode(f.Kind, f.Mode); err != nil {
		return fault.Fault{}, err
	}
	if f.Mode != "" && !f.Kind.Severs() {
		return fault.Fault{}, fmt.Errorf("%s: a mode is for %s, %s and %s", f.Kind, fault.Partition, fault.Isolate, fault.Cut)
	}
	switch f.Kind {
	case fault.Crash:
		return fl.Crash(f.Nodes...)
	case fault.Restart:
		return fl.Restart(ctx, f.Nodes...)
	case fault.Pause:
		return fl.Pause(f.Nodes...)
	case fault.Resume:
		return fl.Resume(f.Nodes...)
	case fault.Isolate:
		return fl.Isolate(f.Mode, f.Nodes...)
	case fault.Unisolate:
		return fl.Unisolate(f.Nodes...)
	case fault.Partition:
		return fl.Partition(f.Groups, f.OneWay, f.Mode)
	case fault.Cut:
		return fl.Cut(f.Links, f.OneWay, f.Mode)
	case fault.Heal:
		return fl.Heal()
	case fault.Delay, fault.Loss:
		if f.Impair == nil {
			return fault.Fault{}, fmt.Errorf("%s: no impairment given", f.Kind)
		}
		if f.Kind == fault.Delay {
			return fl.DelayNodes(f.Nodes, f.Peers, f.Impair.Delay, f.Impair.Jitter)
		}
		return fl.LossNodes(f.Nodes, f.Peers, f.Impair.Loss)
	case fault.Clear:
		if len(f.Peers) > 0 {
			return fl.ClearPairs(f.Nodes, f.Peers)
		}
		return fl.Clear(f.Nodes...)
	case fault.Campaign:
		return fl.Campaign(ctx, f.Nodes...)
	case fault.Leave:
		return fl.Leave(ctx, f.Nodes...)
	case fault.Join:
		return fl.Join(ctx, f.Nodes...)
	case fault.Clock:
		if f.Clock == nil {
			return fault.Fault{}, errors.New("clock: no skew given (clock, with offset_ns and rate_ppm)")
		}
		return fl.Clock(ctx, f.Nodes, *f.Clock)
	case "":
		return fault.Fault{}, fmt.Errorf("fault: no kind given (want %s)", fault.KindList())
	}
	return fault.Fault{}, fmt.Errorf("unknown fault %q (want %s)", f.Kind, fault.KindList())
}

// begin takes the fault lock and checks the lab is open. The caller calls
// the returned function when done.
func (fl *Faults) begin() (func(), error) {
	fl.applying.Lock()
	if fl.procs.isClosed() {
		fl.applying.Unlock()
		return nil, fmt.Errorf("lab %s is closed", fl.run)
	}
	return fl.applying.Unlock, nil
}

// beginOn is begin for a fault of kind on the nodes names, which it
// resolves; refuse, when not nil, sees each node with its process state
// (under the processes' lock) and returns why the fault cannot apply to it.
// The caller calls the returned function when done.
func (fl *Faults) beginOn(kind fault.Kind, names []string, refuse func(n *labNode, state string) error) ([]*labNode, func(), error) {
	end, err := fl.begin()
	if err != nil {
		return nil, nil, err
	}
	nodes, err := fl.nodesOf(names)
	if err != nil {
		end()
		return nil, nil, fmt.Errorf("%s: %w", kind, err)
	}
	if refuse != nil {
		err = fl.procs.refuse(nodes, refuse)
	}
	if err != nil {
		end()
		return nil, nil, fmt.Errorf("%s: %w", kind, err)
	}
	return nodes, end, nil
}

// done stamps f in force, unless its caller did, and hands it to the
// observers; f.Time was set before acting. Callers call it as soon as
// their change is known to be in force: processes gone, stopped or
// running again, nftables batches flushed, impairments applied, started
// processes answering, control calls answered. The capture analysis
// judges the traffic against a fault from then on, so a stamp taken
// before the change took hold would blame the fault for what came
// before it.
func (fl *Faults) done(f fault.Fault) fault.Fault {
	if f.InForce.IsZero() {
		f.InForce = time.Now()
	}
	fl.emit(f)
	return f
}

// OnFault registers f to be called with every fault once it is applied, in
// order, on the goroutine that applied it. f must not apply faults itself.
func (fl *Faults) OnFault(f func(fault.Fault)) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.observers = append(fl.observers, f)
}

func (fl *Faults) emit(f fault.Fault) {
	fl.mu.Lock()
	obs := slices.Clone(fl.observers)
	fl.mu.Unlock()
	for _, o := range obs {
		o(f)
	}
}

// Crash SIGKILLs the nodes' processes and waits until they are gone.
func (fl *Faults) Crash(names ...string) (fault.Fault, error) {
	nodes, end, err := fl.beginOn(fault.Crash, names, func(n *labNode, st string) error {
		if st != ProcRunning && st != ProcPaused {
			return fmt.Errorf("node %s is not running (%s)", n.name, st)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	f := fault.Fault{Time: time.Now(), Kind: fault.Crash, Nodes: slices.Clone(names)}
	if f.Detail, err = fl.procs.crash(nodes); err != nil {
		return fault.Fault{}, fmt.Errorf("crash: %w", err)
	}
	return fl.done(f), nil
}

// Join starts nodes that are down (that left, say) as newcomers: each
// announces itself to every member it knows with JOIN, asks for the
// membership (MEMBERS) and then elects, as `bullylab node --join` does.
// The others, which dropped a node that left from their membership, take
// it back on its JOIN. It returns once the control sockets answer.
func (fl *Faults) Join(ctx context.Context, names ...string) (fault.Fault, error) {
	return fl.startNodes(ctx, fault.Join, names)
}

// Restart starts crashed or exited nodes again with the same ID, address
// and data dir, and waits until their control sockets answer.
func (fl *Faults) Restart(ctx context.Context, names ...string) (fault.Fault, error) {
	return fl.startNodes(ctx, fault.Restart, names)
}

func (fl *Faults) startNodes(ctx context.Context, kind fault.Kind, names []string) (fault.Fault, error) {
	nodes, end, err := fl.beginOn(kind, names, func(n *labNode, st string) error {
		if st != ProcCrashed && st != ProcExited {
			return fmt.Errorf("node %s is %s; crash it first", n.name, st)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	ctx, cancel := mergeCancel(ctx, fl.ctx)
	defer cancel()
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names)}
	if f.Detail, err = fl.procs.restart(ctx, nodes, kind == fault.Join); err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	return fl.done(f), nil
}

// mergeCancel returns a context that ends when either ctx or other does.
func mergeCancel(ctx, other context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return ctx, func() { stop(); cancel() }
}

// Pause SIGSTOPs the nodes' process groups, like hung machines that still
// hold their connections (a grey failure), and returns once the kernel
// reports them stopped.
func (fl *Faults) Pause(names ...string) (fault.Fault, error) {
	return fl.signal(fault.Pause, names, true)
}

// Resume SIGCONTs paused nodes and returns once they run again.
func (fl *Faults) Resume(names ...string) (fault.Fault, error) {
	return fl.signal(fault.Resume, names, false)
}

func (fl *Faults) signal(kind fault.Kind, names []string, pause bool) (fault.Fault, error) {
	want := ProcRunning
	if !pause {
		want = ProcPaused
	}
	nodes, end, err := fl.beginOn(kind, names, func(n *labNode, st string) error {
		if st != want {
			return fmt.Errorf("node %s is %s, not %s", n.name, st, want)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names)}
	if f.Detail, err = fl.procs.signal(nodes, pause); err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	return fl.done(f), nil
}

// Isolate cuts nodes off everyone else: every packet between an isolated
// node and any other is dropped on arrival, as when a cable is pulled, or
// with mode ModeReset refused, TCP answered with a reset. The
// receivers drop them, as for a partition, so that what an isolated node
// writes still crosses the switch: a capture there sees every frame each
// node wrote, which is what the bench's counter cross-check compares
// (with the switch port down, frames written into it vanished before the
// capture, or died with the TCP connection that held them).
func (fl *Faults) Isolate(mode fault.CutMode, names ...string) (fault.Fault, error) {
	return fl.setIsolated(fault.Isolate, names, true, mode)
}

// Unisolate reconnects isolated nodes; a partition in force stays.
func (fl *Faults) Unisolate(names ...string) (fault.Fault, error) {
	return fl.setIsolated(fault.Unisolate, names, false, "")
}

func (fl *Faults) setIsolated(kind fault.Kind, names []string, isolate bool, mode fault.CutMode) (fault.Fault, error) {
	if err := checkCutMode(kind, mode); err != nil {
		return fault.Fault{}, err
	}
	nodes, end, err := fl.beginOn(kind, names, nil)
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names), Mode: mode}
	if err := fl.net.isolate(nodes, isolate, mode); err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	if isolate {
		f.Detail = cutVerb(mode) + " every packet to and from " + strings.Join(names, ", ")
	} else {
		f.Detail = strings.Join(names, ", ") + " reconnected"
	}
	return fl.done(f), nil
}

// ResolveGroup expands a group: each entry is a node name or a topology
// group name.
func (fl *Faults) ResolveGroup(entries []string) ([]string, error) {
	var out []string
	for _, e := range entries {
		if _, ok := fl.byName[e]; ok {
			out = append(out, e)
			continue
		}
		if members, ok := fl.topo.Groups[e]; ok {
			out = append(out, members...)
			continue
		}
		return nil, fmt.Errorf("run %s has no node or group %q", fl.run, e)
	}
	if len(out) == 0 {
		return nil, errors.New("empty group")
	}
	return out, nil
}

// Partition cuts the network into groups, replacing any earlier partition
// (isolation and cut links stay). Symmetric: no packet crosses between two
// groups. One-way (exactly two groups): what Groups[0] sends to Groups[1]
// is cut, the reverse passes. Nodes in no group keep reaching everyone.
// The cut is made by the receivers, whose Firewalls drop packets from the
// blocked sources, so senders see no error, as on a real network; with
// mode ModeReset they answer TCP with a reset instead, so connections
// across the cut fail at once.
func (fl *Faults) Partition(groups [][]string, oneWay bool, mode fault.CutMode) (fault.Fault, error) {
	if err := checkCutMode(fault.Partition, mode); err != nil {
		return fault.Fault{}, err
	}
	end, err := fl.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	if len(groups) < 2 {
		return fault.Fault{}, fmt.Errorf("partition: want at least 2 groups, got %d", len(groups))
	}
	if oneWay && len(groups) != 2 {
		return fault.Fault{}, fmt.Errorf("partition: one-way takes exactly 2 groups, got %d", len(groups))
	}
	resolved := make([][]string, len(groups))
	in := map[string]int{}
	for i, g := range groups {
		r, err := fl.ResolveGroup(g)
		if err != nil {
			return fault.Fault{}, fmt.Errorf("partition: group %d: %w", i+1, err)
		}
		for _, name := range r {
			if j, ok := in[name]; ok {
				if j == i {
					return fault.Fault{}, fmt.Errorf("partition: node %s is named twice in group %d", name, i+1)
				}
				return fault.Fault{}, fmt.Errorf("partition: node %s is in groups %d and %d", name, j+1, i+1)
			}
			in[name] = i
		}
		resolved[i] = r
	}
	want := blockMap{}
	cut := func(from, to []string) {
		for _, b := range to {
			for _, a := range from {
				want.add(b, a, mode)
			}
		}
	}
	if oneWay {
		cut(resolved[0], resolved[1])
	} else {
		for i := range resolved {
			for j := range resolved {
				if i != j {
					cut(resolved[i], resolved[j])
				}
			}
		}
	}
	f := fault.Fault{Time: time.Now(), Kind: fault.Partition, Groups: resolved, OneWay: oneWay, Mode: mode}
	if err := fl.net.partition(want); err != nil {
		return fault.Fault{}, fmt.Errorf("partition: %w", err)
	}
	parts := make([]string, len(resolved))
	for i, g := range resolved {
		parts[i] = "{" + strings.Join(g, ",") + "}"
	}
	sep := " | "
	if oneWay {
		sep = " -> "
		f.Detail = cutVerb(mode) + " what " + parts[0] + " sends to " + parts[1]
	} else {
		f.Detail = "cut " + strings.Join(parts, sep)
		if mode == fault.ModeReset {
			f.Detail += ", TCP answered with resets"
		}
	}
	return fl.done(f), nil
}

// cutVerb says in words what a cut of mode does to packets.
func cutVerb(mode fault.CutMode) string {
	if mode == fault.ModeReset {
		return "refusing (TCP with resets)"
	}
	return "dropping"
}

// Cut cuts the links between pairs of nodes, leaving every other link up
// (partial connectivity), replacing any earlier cut of links (partitions
// and isolation stay). Each pair is cut both ways, or with oneWay only
// what the first sends to the second. As for a partition the receivers
// cut, dropping or, with mode ModeReset, answering TCP with a reset.
func (fl *Faults) Cut(links [][2]string, oneWay bool, mode fault.CutMode) (fault.Fault, error) {
	if err := checkCutMode(fault.Cut, mode); err != nil {
		return fault.Fault{}, err
	}
	end, err := fl.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	if len(links) == 0 {
		return fault.Fault{}, errors.New("cut: no node pair given")
	}
	want := blockMap{}
	words := make([]string, len(links))
	for i, l := range links {
		for _, name := range l {
			if _, err := fl.anyNode(name); err != nil {
				return fault.Fault{}, fmt.Errorf("cut: %w", err)
			}
		}
		if l[0] == l[1] {
			return fault.Fault{}, fmt.Errorf("cut: pair %d names node %s twice", i+1, l[0])
		}
		want.add(l[1], l[0], mode)
		words[i] = l[0] + "->" + l[1]
		if !oneWay {
			want.add(l[0], l[1], mode)
			words[i] = l[0] + "<->" + l[1]
		}
	}
	f := fault.Fault{Time: time.Now(), Kind: fault.Cut, Links: slices.Clone(links), OneWay: oneWay, Mode: mode}
	if err := fl.net.cutLinks(want); err != nil {
		return fault.Fault{}, fmt.Errorf("cut: %w", err)
	}
	f.Detail = cutVerb(mode) + " " + strings.Join(words, ", ")
	return fl.done(f), nil
}

// Heal removes every partition and cut of links and reconnects every
// isolated node.
func (fl *Faults) Heal() (fault.Fault, error) {
	end, err := fl.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	f := fault.Fault{Time: time.Now(), Kind: fault.Heal}
	healed, err := fl.net.heal()
	if err != nil {
		return fault.Fault{}, fmt.Errorf("heal: %w", err)
	}
	f.Nodes = healed
	if len(healed) == 0 {
		f.Detail = "nothing was cut"
	} else {
		f.Detail = "every partition, cut and isolation removed"
	}
	return fl.done(f), nil
}

// Delay sets the delay and jitter of what node sends, to every destination
// (peer "") or to peer alone, keeping the link's other impairments. Zero
// removes the delay.
func (fl *Faults) Delay(name, peer string, delay, jitter time.Duration) (fault.Fault, error) {
	return fl.DelayNodes([]string{name}, peersOf(peer), delay, jitter)
}

// Loss sets the percentage of packets node's sends lose, to every
// destination (peer "") or to peer alone. Zero removes the loss.
func (fl *Faults) Loss(name, peer string, percent float64) (fault.Fault, error) {
	return fl.LossNodes([]string{name}, peersOf(peer), percent)
}

func peersOf(peer string) []string {
	if peer == "" {
		return nil
	}
	return []string{peer}
}

// DelayNodes sets the delay and jitter of what each of nodes sends, to
// every destination (no peers) or to each of peers, as one fault.
func (fl *Faults) DelayNodes(nodes, peers []string, delay, jitter time.Duration) (fault.Fault, error) {
	return fl.impair(fault.Delay, nodes, peers, func(imp *fault.Impairment) {
		imp.Delay, imp.Jitter = delay, jitter
	})
}

// LossNodes sets the loss of what each of nodes sends, to every
// destination (no peers) or to each of peers, as one fault.
func (fl *Faults) LossNodes(nodes, peers []string, percent float64) (fault.Fault, error) {
	return fl.impair(fault.Loss, nodes, peers, func(imp *fault.Impairment) { imp.Loss = percent })
}

func (fl *Faults) impair(kind fault.Kind, names, peerNames []string, change func(*fault.Impairment)) (fault.Fault, error) {
	end, err := fl.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	// Another host's senders are kept too: receivers here apply the loss
	// of what they send.
	nodes, err := fl.anyNodesOf(names)
	if err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	if len(peerNames) > 0 {
		if _, err := fl.anyNodesOf(peerNames); err != nil {
			return fault.Fault{}, fmt.Errorf("%s: peer: %w", kind, err)
		}
	}
	for _, n := range nodes {
		if slices.Contains(peerNames, n.name) {
			return fault.Fault{}, fmt.Errorf("%s: node %s cannot be its own peer", kind, n.name)
		}
	}
	rec, restore, err := fl.net.impair(nodes, peerNames, change)
	if err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names), Peers: slices.Clone(peerNames), Impair: &rec}
	if err := fl.net.applyAll(nodes); err != nil {
		// Part of the change may be in force: put back what was.
		restore()
		_ = fl.net.applyAll(nodes)
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	to := "everyone"
	if len(peerNames) > 0 {
		to = strings.Join(peerNames, ",")
	}
	f.Detail = fmt.Sprintf("%s -> %s: %s", strings.Join(names, ","), to, rec)
	return fl.done(f), nil
}

// Clear restores the topology's impairments on the nodes' links (every
// node's when names is empty), undoing delay and loss faults.
func (fl *Faults) Clear(names ...string) (fault.Fault, error) {
	end, err := fl.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	nodes := fl.all
	if len(names) > 0 {
		if nodes, err = fl.anyNodesOf(names); err != nil {
			return fault.Fault{}, fmt.Errorf("clear: %w", err)
		}
	}
	f := fault.Fault{Time: time.Now(), Kind: fault.Clear, Nodes: slices.Clone(names)}
	if err := fl.net.clear(nodes); err != nil {
		return fault.Fault{}, fmt.Errorf("clear: %w", err)
	}
	f.Detail = "impairments back to the topology's"
	return fl.done(f), nil
}

// ClearPairs restores the topology's impairments of what each of nodes
// sends to each of peers, undoing the delay and loss faults set on those
// pairs. A node whose sends to everyone are impaired is refused: that is
// its own link, which Clear restores, and a pair cannot be exempt from it.
func (fl *Faults) ClearPairs(names, peerNames []string) (fault.Fault, error) {
	end, err := fl.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	nodes, err := fl.anyNodesOf(names)
	if err != nil {
		return fault.Fault{}, fmt.Errorf("clear: %w", err)
	}
	if _, err := fl.anyNodesOf(peerNames); err != nil {
		return fault.Fault{}, fmt.Errorf("clear: peer: %w", err)
	}
	for _, n := range nodes {
		if slices.Contains(peerNames, n.name) {
			return fault.Fault{}, fmt.Errorf("clear: node %s cannot be its own peer", n.name)
		}
	}
	if err := fl.net.clearPairs(nodes, peerNames); err != nil {
		return fault.Fault{}, fmt.Errorf("clear: %w", err)
	}
	f := fault.Fault{Time: time.Now(), Kind: fault.Clear, Nodes: slices.Clone(names), Peers: slices.Clone(peerNames)}
	f.Detail = fmt.Sprintf("%s -> %s: impairments back to the topology's", strings.Join(names, ","), strings.Join(peerNames, ","))
	return fl.done(f), nil
}

// Campaign asks the nodes to start an election now, through their control
// sockets.
func (fl *Faults) Campaign(ctx context.Context, names ...string) (fault.Fault, error) {
	return fl.control(ctx, fault.Campaign, names, (*node.ControlClient).Campaign)
}

// Leave asks the nodes to announce LEAVE and stop; their processes exit.
func (fl *Faults) Leave(ctx context.Context, names ...string) (fault.Fault, error) {
	return fl.control(ctx, fault.Leave, names, (*node.ControlClient).Leave)
}

func (fl *Faults) control(ctx context.Context, kind fault.Kind, names []string, call func(*node.ControlClient, context.Context) error) (fault.Fault, error) {
	nodes, end, err := fl.beginOn(kind, names, func(n *labNode, st string) error {
		if st != ProcRunning {
			return fmt.Errorf("node %s is %s", n.name, st)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	ctx, cancel := mergeCancel(ctx, fl.ctx)
	defer cancel()
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names), Detail: "POST /" + string(kind) + " on the control socket"}
	for _, n := range nodes {
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		err := call(n.client, qctx)
		qcancel()
		if err != nil {
			return fault.Fault{}, fmt.Errorf("%s: node %s: %w", kind, n.name, err)
		}
	}
	// In force once every node answered: a leaving node has announced
	// LEAVE by then, and its exit below is its own business.
	f.InForce = time.Now()
	if kind == fault.Leave {
		// The node answers, then exits: wait for that, so the lab's view
		// (exited) is right when this returns.
		if err := fl.procs.awaitLeft(nodes); err != nil {
			return fault.Fault{}, fmt.Errorf("leave: %w", err)
		}
	}
	return fl.done(f), nil
}

// Clock sets the wall clock the nodes read to their host's plus
// skew.Offset from now, drifting at skew.RatePPM, through their control
// sockets (node.ControlClient.SetClock); a zero skew puts them back on the
// host's. The lab models the skew as the clock of the node's host: a node
// down now, or restarted later, starts with it, drifted since. A paused
// node is refused, since its control socket cannot answer.
func (fl *Faults) Clock(ctx context.Context, names []string, skew fault.ClockSkew) (fault.Fault, error) {
	if err := skew.Validate(); err != nil {
		return fault.Fault{}, fmt.Errorf("clock: %w", err)
	}
	nodes, end, err := fl.beginOn(fault.Clock, names, func(n *labNode, st string) error {
		if st == ProcPaused {
			return fmt.Errorf("node %s is paused, and cannot be told its clock; resume it first", n.name)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	ctx, cancel := mergeCancel(ctx, fl.ctx)
	defer cancel()
	f := fault.Fault{Time: time.Now(), Kind: fault.Clock, Nodes: slices.Clone(names), Clock: &skew}
	fl.procs.setClock(nodes, skew, f.Time)
	for _, n := range fl.procs.running(nodes) {
		qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
		err := n.client.SetClock(qctx, skew)
		qcancel()
		if err != nil {
			return fault.Fault{}, fmt.Errorf("clock: node %s: %w", n.name, err)
		}
	}
	f.Detail = strings.Join(names, ",") + " clock " + skew.String()
	if skew == (fault.ClockSkew{}) {
		f.Detail = strings.Join(names, ",") + " clock back on the host's"
	}
	return fl.done(f), nil
}

// Lossy reports whether the impairments now in force lose packets
// between any two nodes.
func (fl *Faults) Lossy() bool { return fl.net.lossy() }

// MaxDelay returns the largest one-way delay, jitter included, that the
// impairments now in force give a packet between two nodes, per direction:
// what node/bully/doc.go's SLE2 bound calls d before TCP's share of it.
func (fl *Faults) MaxDelay() time.Duration { return fl.net.maxDelay() }

// Backend returns the impairment backend faults use, and why. Before any
// node has an impairer it asks Probe; if the probe cannot run, name is
// "unknown" and why is the probe's error, which the first impairment will
// return too.
func (fl *Faults) Backend() (name, why string) { return fl.net.backend() }

// DelayerStats returns the NFQUEUE delayer's counters and lateness
// (netem.Impairer.Stats) of each node that was impaired, by name; they
// stay readable after Close, so a run can be judged after teardown.
func (fl *Faults) DelayerStats() map[string]netem.DelayerStats { return fl.net.delayerStats() }
