package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// Apply applies f (see fault.Fault for what each kind takes) and returns the
// record observers got.
func (l *Lab) Apply(ctx context.Context, f fault.Fault) (fault.Fault, error) {
	switch f.Kind {
	case fault.Crash:
		return l.Crash(f.Nodes...)
	case fault.Restart:
		return l.Restart(ctx, f.Nodes...)
	case fault.Pause:
		return l.Pause(f.Nodes...)
	case fault.Resume:
		return l.Resume(f.Nodes...)
	case fault.Isolate:
		return l.Isolate(f.Nodes...)
	case fault.Unisolate:
		return l.Unisolate(f.Nodes...)
	case fault.Partition:
		return l.Partition(f.Groups, f.OneWay)
	case fault.Heal:
		return l.Heal()
	case fault.Delay, fault.Loss:
		if f.Impair == nil {
			return fault.Fault{}, fmt.Errorf("%s: no impairment given", f.Kind)
		}
		if f.Kind == fault.Delay {
			return l.DelayNodes(f.Nodes, f.Peers, f.Impair.Delay, f.Impair.Jitter)
		}
		return l.LossNodes(f.Nodes, f.Peers, f.Impair.Loss)
	case fault.Clear:
		return l.Clear(f.Nodes...)
	case fault.Campaign:
		return l.Campaign(ctx, f.Nodes...)
	case fault.Leave:
		return l.Leave(ctx, f.Nodes...)
	case fault.Join:
		return l.Join(ctx, f.Nodes...)
	case "":
		return fault.Fault{}, fmt.Errorf("fault: no kind given (want %s)", fault.KindList())
	}
	return fault.Fault{}, fmt.Errorf("unknown fault %q (want %s)", f.Kind, fault.KindList())
}

// begin takes the fault lock and checks the lab is open. The caller calls
// the returned function when done.
func (l *Lab) begin() (func(), error) {
	l.faultMu.Lock()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		l.faultMu.Unlock()
		return nil, fmt.Errorf("lab %s is closed", l.tb.Run())
	}
	return l.faultMu.Unlock, nil
}

// beginOn is begin for a fault of kind on the nodes names, which it
// resolves; refuse, when not nil, sees each node with its process state
// (under the lab's lock) and returns why the fault cannot apply to it.
// The caller calls the returned function when done.
func (l *Lab) beginOn(kind fault.Kind, names []string, refuse func(n *labNode, state string) error) ([]*labNode, func(), error) {
	end, err := l.begin()
	if err != nil {
		return nil, nil, err
	}
	nodes, err := l.nodesOf(names)
	if err != nil {
		end()
		return nil, nil, fmt.Errorf("%s: %w", kind, err)
	}
	if refuse != nil {
		l.mu.Lock()
		for _, n := range nodes {
			if err = refuse(n, l.procStateLocked(n)); err != nil {
				break
			}
		}
		l.mu.Unlock()
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
func (l *Lab) done(f fault.Fault) fault.Fault {
	if f.InForce.IsZero() {
		f.InForce = time.Now()
	}
	l.emit(f)
	return f
}

// Crash SIGKILLs the nodes' processes and waits until they are gone.
func (l *Lab) Crash(names ...string) (fault.Fault, error) {
	nodes, end, err := l.beginOn(fault.Crash, names, func(n *labNode, st string) error {
		if st != ProcRunning && st != ProcPaused {
			return fmt.Errorf("node %s is not running (%s)", n.name, st)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	var procs []*netem.Process
	var hosted []string
	l.mu.Lock()
	for _, n := range nodes {
		if p, ok := n.proc.(*netem.Process); ok {
			procs = append(procs, p)
		} else {
			hosted = append(hosted, n.name)
		}
		n.crashed = true
	}
	l.mu.Unlock()
	f := fault.Fault{Time: time.Now(), Kind: fault.Crash, Nodes: slices.Clone(names)}
	if len(hosted) > 0 {
		f.Detail = fmt.Sprintf("killed in shared host process %d, as SIGKILL would its own process", l.host.proc.PID())
		if err := l.hostAll(hostKill, hosted); err != nil {
			return fault.Fault{}, fmt.Errorf("crash: %w", err)
		}
		for _, n := range nodes {
			// The host reports the end after the kill's answer.
			select {
			case <-n.proc.Done():
			case <-time.After(10 * time.Second):
				return fault.Fault{}, fmt.Errorf("crash: node %s still running 10s after the shared host killed it", n.name)
			}
		}
		return l.done(f), nil
	}
	pids := make([]string, len(procs))
	for i, p := range procs {
		pids[i] = strconv.Itoa(p.PID())
	}
	f.Detail = "SIGKILL to process " + strings.Join(pids, ", ")
	if err := netem.KillAll(procs); err != nil {
		return fault.Fault{}, fmt.Errorf("crash: %w", err)
	}
	return l.done(f), nil
}

// Join starts nodes that are down (that left, say) as newcomers: each
// announces itself to every member it knows with JOIN, asks for the
// membership (MEMBERS) and then elects, as `bullylab node --join` does.
// The others, which dropped a node that left from their membership, take
// it back on its JOIN. It returns once the control sockets answer.
func (l *Lab) Join(ctx context.Context, names ...string) (fault.Fault, error) {
	return l.startNodes(ctx, fault.Join, names)
}

// Restart starts crashed or exited nodes again with the same ID, address
// and data dir, and waits until their control sockets answer.
func (l *Lab) Restart(ctx context.Context, names ...string) (fault.Fault, error) {
	return l.startNodes(ctx, fault.Restart, names)
}

func (l *Lab) startNodes(ctx context.Context, kind fault.Kind, names []string) (fault.Fault, error) {
	nodes, end, err := l.beginOn(kind, names, func(n *labNode, st string) error {
		if st != ProcCrashed && st != ProcExited {
			return fmt.Errorf("node %s is %s; crash it first", n.name, st)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	l.mu.Lock()
	for _, n := range nodes {
		n.join = kind == fault.Join
	}
	l.mu.Unlock()
	ctx, cancel := mergeCancel(ctx, l.ctx)
	defer cancel()
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names)}
	if err := l.boot(ctx, nodes, false); err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	var pids []string
	l.mu.Lock()
	for _, n := range nodes {
		pids = append(pids, strconv.Itoa(n.proc.PID()))
	}
	l.mu.Unlock()
	how := "as process " + strings.Join(pids, ", ")
	if l.host != nil {
		how = "in shared host process " + pids[0]
	}
	if kind == fault.Join {
		how = "with --join " + how
	}
	f.Detail = "started " + how + "; control sockets answering"
	return l.done(f), nil
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
func (l *Lab) Pause(names ...string) (fault.Fault, error) {
	return l.signal(fault.Pause, names, syscall.SIGSTOP)
}

// Resume SIGCONTs paused nodes and returns once they run again.
func (l *Lab) Resume(names ...string) (fault.Fault, error) {
	return l.signal(fault.Resume, names, syscall.SIGCONT)
}

func (l *Lab) signal(kind fault.Kind, names []string, sig syscall.Signal) (fault.Fault, error) {
	pause := sig == syscall.SIGSTOP
	want := ProcRunning
	if !pause {
		want = ProcPaused
	}
	nodes, end, err := l.beginOn(kind, names, func(n *labNode, st string) error {
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
	if l.host != nil {
		return l.hostSignal(f, nodes, pause)
	}
	var pids []string
	for _, n := range nodes {
		p := n.proc.(*netem.Process)
		if err := p.Signal(sig); err != nil {
			return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
		}
		l.mu.Lock()
		n.paused = pause
		l.mu.Unlock()
		pids = append(pids, strconv.Itoa(p.PID()))
	}
	for _, n := range nodes {
		if err := n.proc.(*netem.Process).WaitStopped(l.ctx, pause); err != nil {
			return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
		}
	}
	f.Detail = fmt.Sprintf("%v to process group %s", sig, strings.Join(pids, ", "))
	return l.done(f), nil
}

// Isolate cuts nodes off everyone else: every packet between an isolated
// node and any other is dropped on arrival, as when a cable is pulled. The
// receivers drop them, as for a partition, so that what an isolated node
// writes still crosses the switch: a capture there sees every frame each
// node wrote, which is what the bench's counter cross-check compares
// (with the switch port down, frames written into it vanished before the
// capture, or died with the TCP connection that held them).
func (l *Lab) Isolate(names ...string) (fault.Fault, error) {
	return l.setIsolated(fault.Isolate, names, true)
}

// Unisolate reconnects isolated nodes; a partition in force stays.
func (l *Lab) Unisolate(names ...string) (fault.Fault, error) {
	return l.setIsolated(fault.Unisolate, names, false)
}

func (l *Lab) setIsolated(kind fault.Kind, names []string, isolate bool) (fault.Fault, error) {
	nodes, end, err := l.beginOn(kind, names, nil)
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names)}
	l.mu.Lock()
	was := map[*labNode]bool{}
	for _, n := range nodes {
		was[n] = n.isolated
		n.isolated = isolate
	}
	l.mu.Unlock()
	if err := l.setBlocked(l.wantBlocked()); err != nil {
		l.mu.Lock()
		for n, w := range was {
			n.isolated = w
		}
		l.mu.Unlock()
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	if isolate {
		f.Detail = "dropping every packet to and from " + strings.Join(names, ", ")
	} else {
		f.Detail = strings.Join(names, ", ") + " reconnected"
	}
	return l.done(f), nil
}

// wantBlocked returns, per receiver, the sources its Firewall must drop:
// the partition's cut, and every packet to or from an isolated node.
func (l *Lab) wantBlocked() map[string]map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	want := map[string]map[string]bool{}
	add := func(rcv, src string) {
		if want[rcv] == nil {
			want[rcv] = map[string]bool{}
		}
		want[rcv][src] = true
	}
	for rcv, srcs := range l.cut {
		for src := range srcs {
			add(rcv, src)
		}
	}
	for _, a := range l.nodes {
		if !a.isolated {
			continue
		}
		for _, b := range l.nodes {
			if a != b {
				add(a.name, b.name)
				add(b.name, a.name)
			}
		}
	}
	return want
}

// ResolveGroup expands a group: each entry is a node name or a topology
// group name.
func (l *Lab) ResolveGroup(entries []string) ([]string, error) {
	var out []string
	for _, e := range entries {
		if _, ok := l.byName[e]; ok {
			out = append(out, e)
			continue
		}
		if members, ok := l.topo.Groups[e]; ok {
			out = append(out, members...)
			continue
		}
		return nil, fmt.Errorf("run %s has no node or group %q", l.tb.Run(), e)
	}
	if len(out) == 0 {
		return nil, errors.New("empty group")
	}
	return out, nil
}

// Partition cuts the network into groups, replacing any earlier partition
// (isolation stays). Symmetric: no packet crosses between two groups.
// One-way (exactly two groups): what Groups[0] sends to Groups[1] is
// dropped, the reverse passes. Nodes in no group keep reaching everyone.
// The cut is made by the receivers, whose Firewalls drop packets from the
// blocked sources, so senders see no error, as on a real network.
func (l *Lab) Partition(groups [][]string, oneWay bool) (fault.Fault, error) {
	end, err := l.begin()
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
		r, err := l.ResolveGroup(g)
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
	want := map[string]map[string]bool{} // receiver -> sources it drops
	cut := func(from, to []string) {
		for _, b := range to {
			if want[b] == nil {
				want[b] = map[string]bool{}
			}
			for _, a := range from {
				want[b][a] = true
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
	f := fault.Fault{Time: time.Now(), Kind: fault.Partition, Groups: resolved, OneWay: oneWay}
	l.mu.Lock()
	old := l.cut
	l.cut = want
	l.mu.Unlock()
	if err := l.setBlocked(l.wantBlocked()); err != nil {
		l.mu.Lock()
		l.cut = old
		l.mu.Unlock()
		return fault.Fault{}, fmt.Errorf("partition: %w", err)
	}
	parts := make([]string, len(resolved))
	for i, g := range resolved {
		parts[i] = "{" + strings.Join(g, ",") + "}"
	}
	sep := " | "
	if oneWay {
		sep = " -> "
		f.Detail = "dropping what " + parts[0] + " sends to " + parts[1]
	} else {
		f.Detail = "cut " + strings.Join(parts, sep)
	}
	return l.done(f), nil
}

// setBlocked makes every node drop exactly the sources want gives it. All
// Firewalls needed are created first, so that the cut itself is a quick
// series of set updates.
func (l *Lab) setBlocked(want map[string]map[string]bool) error {
	for name, srcs := range want {
		if len(srcs) == 0 || l.byName[name].host != "" {
			continue // another host's lab cuts at its nodes
		}
		if err := l.ensureFirewall(l.byName[name]); err != nil {
			return err
		}
	}
	for _, n := range l.nodes {
		l.mu.Lock()
		fw, cur := n.fw, cloneSet(n.blocked)
		l.mu.Unlock()
		if fw == nil {
			continue
		}
		var block, unblock []netip.Addr
		for src := range want[n.name] {
			if !cur[src] {
				block = append(block, l.byName[src].addr)
			}
		}
		for src := range cur {
			if !want[n.name][src] {
				unblock = append(unblock, l.byName[src].addr)
			}
		}
		if err := fw.Unblock(unblock...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		if err := fw.Block(block...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		next := map[string]bool{}
		for src := range want[n.name] {
			next[src] = true
		}
		l.mu.Lock()
		n.blocked = next
		l.mu.Unlock()
	}
	return nil
}

func cloneSet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (l *Lab) ensureFirewall(n *labNode) error {
	l.mu.Lock()
	have := n.fw != nil
	l.mu.Unlock()
	if have {
		return nil
	}
	ns, err := l.tb.NamespaceHandle(n.name)
	if err != nil {
		return err
	}
	fw, err := netem.NewFirewall(ns, l.tb.Run())
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	l.mu.Lock()
	n.fw = fw
	l.mu.Unlock()
	return nil
}

// Heal removes every partition and reconnects every isolated node.
func (l *Lab) Heal() (fault.Fault, error) {
	end, err := l.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	f := fault.Fault{Time: time.Now(), Kind: fault.Heal}
	var healed []string
	l.mu.Lock()
	for _, n := range l.nodes {
		if len(n.blocked) > 0 || n.isolated {
			healed = append(healed, n.name)
		}
		n.isolated = false
	}
	l.cut = nil
	l.mu.Unlock()
	if err := l.setBlocked(nil); err != nil {
		return fault.Fault{}, fmt.Errorf("heal: %w", err)
	}
	f.Nodes = healed
	if len(healed) == 0 {
		f.Detail = "nothing was cut"
	} else {
		f.Detail = "every partition and isolation removed"
	}
	return l.done(f), nil
}

// Delay sets the delay and jitter of what node sends, to every destination
// (peer "") or to peer alone, keeping the link's other impairments. Zero
// removes the delay.
func (l *Lab) Delay(name, peer string, delay, jitter time.Duration) (fault.Fault, error) {
	return l.DelayNodes([]string{name}, peersOf(peer), delay, jitter)
}

// Loss sets the percentage of packets node's sends lose, to every
// destination (peer "") or to peer alone. Zero removes the loss.
func (l *Lab) Loss(name, peer string, percent float64) (fault.Fault, error) {
	return l.LossNodes([]string{name}, peersOf(peer), percent)
}

func peersOf(peer string) []string {
	if peer == "" {
		return nil
	}
	return []string{peer}
}

// DelayNodes sets the delay and jitter of what each of nodes sends, to
// every destination (no peers) or to each of peers, as one fault.
func (l *Lab) DelayNodes(nodes, peers []string, delay, jitter time.Duration) (fault.Fault, error) {
	return l.impair(fault.Delay, nodes, peers, func(imp *fault.Impairment) {
		imp.Delay, imp.Jitter = delay, jitter
	})
}

// LossNodes sets the loss of what each of nodes sends, to every
// destination (no peers) or to each of peers, as one fault.
func (l *Lab) LossNodes(nodes, peers []string, percent float64) (fault.Fault, error) {
	return l.impair(fault.Loss, nodes, peers, func(imp *fault.Impairment) { imp.Loss = percent })
}

func (l *Lab) impair(kind fault.Kind, names, peerNames []string, change func(*fault.Impairment)) (fault.Fault, error) {
	end, err := l.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	// Another host's senders are kept too: receivers here apply the loss
	// of what they send.
	nodes, err := l.anyNodesOf(names)
	if err != nil {
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	if len(peerNames) > 0 {
		if _, err := l.anyNodesOf(peerNames); err != nil {
			return fault.Fault{}, fmt.Errorf("%s: peer: %w", kind, err)
		}
	}
	for _, n := range nodes {
		if slices.Contains(peerNames, n.name) {
			return fault.Fault{}, fmt.Errorf("%s: node %s cannot be its own peer", kind, n.name)
		}
	}
	type saved struct {
		link  fault.Impairment
		pairs map[string]fault.Impairment
	}
	old := map[*labNode]saved{}
	var rec fault.Impairment // what the first node's link or first pair now gets
	l.mu.Lock()
	for i, n := range nodes {
		old[n] = saved{n.link, cloneImpairs(n.pairs)}
		if len(peerNames) == 0 {
			change(&n.link)
			if i == 0 {
				rec = n.link
			}
			continue
		}
		for j, p := range peerNames {
			imp := l.pairImpairmentLocked(n, p)
			change(&imp)
			n.pairs[p] = imp
			if i == 0 && j == 0 {
				rec = imp
			}
		}
	}
	l.mu.Unlock()
	restore := func() {
		l.mu.Lock()
		for n, o := range old {
			n.link, n.pairs = o.link, o.pairs
		}
		l.mu.Unlock()
	}
	if err := l.validateImpairments(nodes); err != nil {
		restore()
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	f := fault.Fault{Time: time.Now(), Kind: kind, Nodes: slices.Clone(names), Peers: slices.Clone(peerNames), Impair: &rec}
	if err := l.applyAll(nodes); err != nil {
		// Part of the change may be in force: put back what was.
		restore()
		_ = l.applyAll(nodes)
		return fault.Fault{}, fmt.Errorf("%s: %w", kind, err)
	}
	to := "everyone"
	if len(peerNames) > 0 {
		to = strings.Join(peerNames, ",")
	}
	f.Detail = fmt.Sprintf("%s -> %s: %s", strings.Join(names, ","), to, rec)
	return l.done(f), nil
}

// validateImpairments checks what the nodes' links and pairs now hold.
func (l *Lab) validateImpairments(nodes []*labNode) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range nodes {
		if err := n.link.Validate(); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		for p, imp := range n.pairs {
			if err := imp.Validate(); err != nil {
				return fmt.Errorf("node %s to %s: %w", n.name, p, err)
			}
		}
	}
	return nil
}

// applyAll brings the nodes' Impairers, and every receiver's loss, in line
// with their links and pairs.
func (l *Lab) applyAll(nodes []*labNode) error {
	for _, n := range nodes {
		if err := l.applyImpairments(n); err != nil {
			return err
		}
	}
	return l.applyLoss()
}

func cloneImpairs(m map[string]fault.Impairment) map[string]fault.Impairment {
	out := make(map[string]fault.Impairment, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Clear restores the topology's impairments on the nodes' links (every
// node's when names is empty), undoing delay and loss faults.
func (l *Lab) Clear(names ...string) (fault.Fault, error) {
	end, err := l.begin()
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	nodes := l.all
	if len(names) > 0 {
		if nodes, err = l.anyNodesOf(names); err != nil {
			return fault.Fault{}, fmt.Errorf("clear: %w", err)
		}
	}
	f := fault.Fault{Time: time.Now(), Kind: fault.Clear, Nodes: slices.Clone(names)}
	for _, n := range nodes {
		tn, _ := l.topo.Node(n.name)
		l.mu.Lock()
		n.link = fromTopo(tn.Impair)
		clear(n.pairs)
		l.mu.Unlock()
	}
	if err := l.applyAll(nodes); err != nil {
		return fault.Fault{}, fmt.Errorf("clear: %w", err)
	}
	f.Detail = "impairments back to the topology's"
	return l.done(f), nil
}

// fromTopo converts a topology impairment.
func fromTopo(im topologies.Impair) fault.Impairment {
	return fault.Impairment{Delay: im.Delay, Jitter: im.Jitter, Loss: im.Loss, Duplicate: im.Duplicate, Reorder: im.Reorder}
}

// combine puts b on top of a, as a topology link does on a node's own
// link: delays and jitters add up, independent losses and duplications
// compound, reordering takes the larger share.
func combine(a, b fault.Impairment) fault.Impairment {
	compound := func(p, q float64) float64 {
		// Rounded to a millionth of a percent, so that 10% on top of
		// nothing stays 10%, not 9.999999999999998%.
		return math.Round(1e8*(1-(1-p/100)*(1-q/100))) / 1e6
	}
	return fault.Impairment{
		Delay:     a.Delay + b.Delay,
		Jitter:    a.Jitter + b.Jitter,
		Loss:      compound(a.Loss, b.Loss),
		Duplicate: compound(a.Duplicate, b.Duplicate),
		Reorder:   max(a.Reorder, b.Reorder),
	}
}

// pairImpairmentLocked returns what n's sends to peer get: a fault's
// per-peer setting, else the topology's link between them on top of n's
// own link, else n's own link. l.mu must be held.
func (l *Lab) pairImpairmentLocked(n *labNode, peer string) fault.Impairment {
	if imp, ok := n.pairs[peer]; ok {
		return imp
	}
	if pi, ok := l.topo.PairImpair(n.name, peer); ok {
		return combine(n.link, fromTopo(pi))
	}
	return n.link
}

// wantedPairsLocked returns the per-peer impairments n's Impairer must hold.
// l.mu must be held.
func (l *Lab) wantedPairsLocked(n *labNode) map[netip.Addr]fault.Impairment {
	out := map[netip.Addr]fault.Impairment{}
	for _, pi := range l.topo.PairImpairs {
		peer := pi.B
		if pi.B == n.name {
			peer = pi.A
		} else if pi.A != n.name {
			continue
		}
		out[l.byName[peer].addr] = l.pairImpairmentLocked(n, peer)
	}
	for peer, imp := range n.pairs {
		out[l.byName[peer].addr] = imp
	}
	for a, imp := range out {
		// A zero entry would exempt nothing: the Impairer drops it and the
		// link-wide impairment applies to that peer.
		if imp.IsZero() {
			delete(out, a)
		}
	}
	return out
}

// applyImpairments brings n's Impairer in line with n.link and n.pairs,
// creating it on first need: a lab that never impairs a node costs that
// node nothing. Loss is left out: the receivers apply it (applyLoss).
func (l *Lab) applyImpairments(n *labNode) error {
	if n.host != "" {
		return nil // its own host's lab impairs what it sends
	}
	l.mu.Lock()
	link, pairs, imp := withoutLoss(n.link), l.wantedPairsLocked(n), n.imp
	l.mu.Unlock()
	for a, p := range pairs {
		if p = withoutLoss(p); p.IsZero() {
			delete(pairs, a) // see wantedPairsLocked
		} else {
			pairs[a] = p
		}
	}
	if imp == nil {
		if link.IsZero() && len(pairs) == 0 {
			return nil
		}
		ns, err := l.tb.NamespaceHandle(n.name)
		if err != nil {
			return err
		}
		if imp, err = netem.NewImpairer(ns, l.tb.Run(), netem.NodeVeth, netem.ImpairerOptions{Backend: l.opts.Backend, TCPTimestampUnit: l.tb.TCPTimestampUnit()}); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		l.mu.Lock()
		n.imp = imp
		l.mu.Unlock()
	}
	curLink, curPairs := imp.Current()
	// Pairs first: a new link-wide impairment must not reach, even for a
	// moment, a peer that is about to get its own.
	for a, want := range pairs {
		if cur, ok := curPairs[a]; !ok || cur != want {
			if err := imp.SetPair(a, want); err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
		}
	}
	for a := range curPairs {
		if _, ok := pairs[a]; !ok {
			if err := imp.SetPair(a, fault.Impairment{}); err != nil {
				return fmt.Errorf("node %s: %w", n.name, err)
			}
		}
	}
	if curLink != link {
		if err := imp.Set(link); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	return nil
}

// withoutLoss is imp as the sender's Impairer applies it.
func withoutLoss(imp fault.Impairment) fault.Impairment {
	imp.Loss = 0
	return imp
}

// applyLoss makes every receiver drop, on arrival, the share of each
// sender's packets that the sender's link or pair impairment loses (see
// Firewall.SetLoss for why the receiver does it). Receivers that never
// lost anything get no Firewall.
func (l *Lab) applyLoss() error {
	for _, r := range l.nodes {
		l.mu.Lock()
		loss := map[netip.Addr]float64{}
		for _, s := range l.all {
			if s == r {
				continue
			}
			if p := l.pairImpairmentLocked(s, r.name).Loss; p > 0 {
				loss[s.addr] = p
			}
		}
		fw := r.fw
		l.mu.Unlock()
		if fw == nil && len(loss) == 0 {
			continue
		}
		if err := l.ensureFirewall(r); err != nil {
			return err
		}
		l.mu.Lock()
		fw = r.fw
		l.mu.Unlock()
		if err := fw.SetLoss(loss); err != nil {
			return fmt.Errorf("node %s: %w", r.name, err)
		}
	}
	return nil
}

// Lossy reports whether the impairments now in force lose packets
// between any two nodes.
func (l *Lab) Lossy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.all {
		for _, r := range l.all {
			if s != r && l.pairImpairmentLocked(s, r.name).Loss > 0 {
				return true
			}
		}
	}
	return false
}

// MaxDelay returns the largest one-way delay, jitter included, that the
// impairments now in force give a packet between two nodes, per direction:
// what node/bully/doc.go's SLE2 bound calls d before TCP's share of it.
func (l *Lab) MaxDelay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var d time.Duration
	for _, s := range l.all {
		for _, r := range l.all {
			if s != r {
				imp := l.pairImpairmentLocked(s, r.name)
				d = max(d, imp.Delay+imp.Jitter)
			}
		}
	}
	return d
}

// describeImpairments renders what n's link does, e.g. "delay 50ms; to n4:
// delay 80ms". l.mu must be held.
func (l *Lab) describeImpairments(n *labNode) string {
	pairs := l.wantedPairsLocked(n)
	if n.link.IsZero() && len(pairs) == 0 {
		return ""
	}
	var parts []string
	if !n.link.IsZero() {
		parts = append(parts, n.link.String())
	}
	// Peers with the same impairment share one entry.
	byImp := map[fault.Impairment][]string{}
	var order []fault.Impairment
	for _, p := range l.all {
		imp, ok := pairs[p.addr]
		if !ok {
			continue
		}
		if byImp[imp] == nil {
			order = append(order, imp)
		}
		byImp[imp] = append(byImp[imp], p.name)
	}
	for _, imp := range order {
		parts = append(parts, "to "+strings.Join(byImp[imp], ",")+": "+imp.String())
	}
	return strings.Join(parts, "; ")
}

// Campaign asks the nodes to start an election now, through their control
// sockets.
func (l *Lab) Campaign(ctx context.Context, names ...string) (fault.Fault, error) {
	return l.control(ctx, fault.Campaign, names, (*node.ControlClient).Campaign)
}

// Leave asks the nodes to announce LEAVE and stop; their processes exit.
func (l *Lab) Leave(ctx context.Context, names ...string) (fault.Fault, error) {
	return l.control(ctx, fault.Leave, names, (*node.ControlClient).Leave)
}

func (l *Lab) control(ctx context.Context, kind fault.Kind, names []string, call func(*node.ControlClient, context.Context) error) (fault.Fault, error) {
	nodes, end, err := l.beginOn(kind, names, func(n *labNode, st string) error {
		if st != ProcRunning {
			return fmt.Errorf("node %s is %s", n.name, st)
		}
		return nil
	})
	if err != nil {
		return fault.Fault{}, err
	}
	defer end()
	ctx, cancel := mergeCancel(ctx, l.ctx)
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
		for _, n := range nodes {
			select {
			case <-n.proc.Done():
			case <-time.After(5 * time.Second):
				return fault.Fault{}, fmt.Errorf("leave: node %s did not exit 5s after leaving", n.name)
			}
			l.mu.Lock()
			n.left = true
			l.mu.Unlock()
		}
	}
	return l.done(f), nil
}
