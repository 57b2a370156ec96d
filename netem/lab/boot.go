//go:build linux

package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// readyPoll is how often a booting node's control socket is looked for:
// short, as each boot waits for it.
const readyPoll = 2 * time.Millisecond

// whileBuilding builds the testbed and runs start, which boots the nodes,
// at once: each node boots once its namespace and links are up
// (awaitBuilt). The testbed builds the top node first and the rest in
// ascending order, the order the held nodes boot in (bootAll).
func (ps *nodeProcs) whileBuilding(ctx context.Context, start func(context.Context) error) error {
	n := len(ps.nodes)
	order := make([]int, 0, n)
	order = append(order, n-1)
	for i := range n - 1 {
		order = append(order, i)
	}
	ps.nodeBuilt = make([]chan struct{}, n)
	for i := range ps.nodeBuilt {
		ps.nodeBuilt[i] = make(chan struct{})
	}
	ps.built = make(chan struct{})
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		err := ps.tb.Construct(bctx, order, func(i int) { close(ps.nodeBuilt[i]) })
		ps.times.Built = time.Now()
		ps.buildErr = err
		close(ps.built)
	}()
	err := start(ctx)
	if err != nil {
		cancel()
	}
	<-ps.built
	if err == nil {
		err = ps.buildErr
	}
	return err
}

// awaitBuilt waits, while the testbed is being built, until node n's part
// is built and its links are up. Once the build is over it returns at once:
// a node restarted later may have its link down on purpose (isolate).
func (ps *nodeProcs) awaitBuilt(ctx context.Context, n *labNode) error {
	if ps.nodeBuilt == nil {
		return nil
	}
	i, err := ps.tb.NodeIndex(n.name)
	if err != nil {
		return err
	}
	select {
	case <-ps.built:
		return ps.buildErr
	default:
	}
	select {
	case <-ps.built:
		return ps.buildErr
	case <-ps.nodeBuilt[i]:
	case <-ctx.Done():
		return ctx.Err()
	}
	return ps.tb.WaitLinksUp(ctx, []int{i})
}

// prepare writes what the nodes read at start: the peers file, their data
// dirs (on a tmpfs) with their member keys, and the log dir.
func (ps *nodeProcs) prepare() error {
	var buf bytes.Buffer
	if err := node.FormatPeersKeys(&buf, ps.members(), ps.publicKeys()); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := os.WriteFile(ps.peers, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	mounted, err := netem.MountTmpfs(DataRoot(ps.run))
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	ps.tmpfs = mounted
	for _, n := range ps.nodes {
		if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
			return fmt.Errorf("lab: node %s: %w", n.name, err)
		}
		if n.memberKey != nil {
			if err := wire.WriteMemberKeyFile(n.keyFile, n.memberKey); err != nil {
				return fmt.Errorf("lab: node %s: %w", n.name, err)
			}
		}
	}
	if ps.opts.LogDir != "" {
		if err := os.MkdirAll(ps.opts.LogDir, 0o755); err != nil {
			return fmt.Errorf("lab: log dir: %w", err)
		}
	}
	return nil
}

// bootAll boots every node: a process per node paced on each node's own
// boot election (bootPaced), a shared topology held, in one election.
func (ps *nodeProcs) bootAll(ctx context.Context) error {
	if ps.topo.Hosting != topologies.HostingShared {
		return ps.bootPaced(ctx)
	}
	if err := ps.startHosts(); err != nil {
		return err
	}
	// In the shared hosts every node but the highest starts held
	// (--hold-boot): up and
	// listening, but without a boot election. The highest then starts
	// alone; its boot election has nobody above it to ask, HALTs the N-1
	// nodes below, all up, and announces itself: about 3N frames. The
	// held nodes are released once they follow it, which costs nothing
	// for a follower and boots any node the election missed. Before,
	// each node booted on its own election: the highest first, the rest
	// in ascending order two at a time, each booting node's ELECTION
	// sent to every member above it, most of them not up yet and
	// refusing it: about N^2/2 connects, 500,000 at 1000 nodes. (Booting
	// in descending order was worse: every follower above a booting
	// node started an election of its own, "bullied", and 100 nodes
	// never settled.)
	if ps.spanBoot() {
		// Every host's nodes start held, this share's highest too: the
		// span's highest boots once every host's listen (Lead).
		return ps.startHeld(ctx, ps.nodes)
	}
	n := len(ps.nodes)
	top, held := ps.nodes[n-1], ps.nodes[:n-1]
	if err := ps.startHeld(ctx, held); err != nil {
		return err
	}
	if err := ps.boot(ctx, []*labNode{top}, false); err != nil {
		return err
	}
	return ps.settle(ctx)
}

// spanBoot reports whether the lab's nodes boot in one held election with
// the other hosts' (Share.SpanBoot).
func (ps *nodeProcs) spanBoot() bool {
	s := ps.opts.Share
	return s != nil && s.SpanBoot && ps.topo.Hosting == topologies.HostingShared
}

// startHeld starts nodes held (--hold-boot), up and listening but
// without a boot election, after watching every node's event log for
// settle.
func (ps *nodeProcs) startHeld(ctx context.Context, nodes []*labNode) error {
	ps.watches = make([]*eventWatch, len(ps.nodes))
	for i, nd := range ps.nodes {
		var err error
		if ps.watches[i], err = watchEvents(nd.log); err != nil {
			return fmt.Errorf("lab: node %s: %w", nd.name, err)
		}
	}
	ps.mu.Lock()
	for _, nd := range nodes {
		nd.run.hold = true
	}
	ps.mu.Unlock()
	ps.times.Started = time.Now()
	// Unpaced: a held node elects nothing, so there is no election to
	// wait for; bootWindow still bounds the processes starting at once.
	return ps.boot(ctx, nodes, false)
}

// settle waits until the highest node has won and the others follow it
// (awaitNormal), and releases those that do not.
func (ps *nodeProcs) settle(ctx context.Context) error {
	waiting, err := ps.awaitNormal(ctx, ps.nodes, ps.watches)
	if err != nil {
		return err
	}
	if err := ps.release(waiting); err != nil {
		return err
	}
	ps.times.Ready = time.Now()
	return nil
}

// lead releases the span's highest node, started held here (spanBoot),
// and waits until it has won its boot election: released, a held node
// elects as it would have at boot (node.Node.Release).
func (ps *nodeProcs) lead(ctx context.Context) error {
	if !ps.spanBoot() || ps.watches == nil {
		return fmt.Errorf("lab %s: no held span boot to lead", ps.run)
	}
	top := ps.nodes[len(ps.nodes)-1]
	if top != ps.all[len(ps.all)-1] {
		return fmt.Errorf("lab %s: the highest node, %s, runs on host %s", ps.run, ps.all[len(ps.all)-1].name, ps.all[len(ps.all)-1].host)
	}
	if err := ps.release([]*labNode{top}); err != nil {
		return err
	}
	pending, err := ps.awaitNormal(ctx, []*labNode{top}, ps.watches[len(ps.watches)-1:])
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("lab %s: node %s did not win its boot election in %v (log: %s)", ps.run, top.name, ps.opts.StartTimeout, logTail(top.log, 2))
	}
	return nil
}

// bootPaced boots a process per node, each on its own boot election: the
// highest first, which becomes leader, then the rest in ascending order,
// bootWindow at a time, each counted as booting until its election
// settled. A booting node's ELECTION reaches that leader (which re-asserts
// itself) and nodes not up yet (refused at once): about N^2/2 refused
// connects, which a process per node, at most a few hundred, affords. The
// held boot's burst does not suit it: the top's HALT round wakes N-1
// processes at once, and with 250 of them on 2 cores beside other work
// (the test suite's benchmarks) their answers came late, halted nodes
// elected on their own, bullying the others into elections, and the 250
// had not agreed a minute later (epoch 41). Paced, they boot in about the
// same time, a node process's start costing more than its refused
// ELECTIONs.
func (ps *nodeProcs) bootPaced(ctx context.Context) error {
	top := ps.nodes[len(ps.nodes)-1]
	ps.times.Started = time.Now()
	if err := ps.boot(ctx, []*labNode{top}, true); err != nil {
		return err
	}
	if err := ps.boot(ctx, ps.nodes[:len(ps.nodes)-1], true); err != nil {
		return err
	}
	ps.times.Ready = time.Now()
	return nil
}

// awaitNormal waits, reading their event logs from watches, until the
// top node, the last of nodes, has won its boot election, and then until
// every node has been Normal, or until none turned Normal for as long as a
// healthy election takes to end after its last step; it returns the nodes
// not seen Normal. A topology with heavy loss must not turn into a failed
// start, and the ring's boot run passes one node at a time, so progress,
// not one deadline for all, says when to stop. The wait for the top is
// bounded by StartTimeout alone: releasing the held nodes before it won
// would have each of them send ELECTION to every member above it, all up
// and following nobody, or following the top and then "bullied" into
// elections of their own; on a saturated host that took 250 nodes past
// the shared host's 20,000 open files.
func (ps *nodeProcs) awaitNormal(ctx context.Context, nodes []*labNode, watches []*eventWatch) ([]*labNode, error) {
	quiet := releaseQuiet
	for _, n := range nodes {
		tn, _ := ps.topo.Node(n.name)
		quiet = max(quiet, 2*(tn.Settings.ElectionTimeout+tn.Settings.FailureTimeout))
	}
	top := nodes[len(nodes)-1]
	topWon := false
	pending := slices.Clone(nodes)
	pendingWatches := slices.Clone(watches)
	lastProgress := time.Now()
	giveUp := lastProgress.Add(ps.opts.StartTimeout)
	tick := time.NewTicker(awaitNormalPoll)
	defer tick.Stop()
	for len(pending) > 0 {
		k := 0
		for i, n := range pending {
			if !topWon && n != top {
				// Nothing to wait for below the top until it won: at 1000
				// nodes, reading every log each poll was 100,000 stats a
				// second of the lab's CPU, beside a host booting on it.
				pending[k], pendingWatches[k] = n, pendingWatches[i]
				k++
				continue
			}
			_, normal, err := pendingWatches[i].scan()
			if err != nil {
				return nil, fmt.Errorf("node %s: reading its log: %w", n.name, err)
			}
			if normal {
				topWon = topWon || n == top
				continue
			}
			pending[k], pendingWatches[k] = n, pendingWatches[i]
			k++
		}
		if k < len(pending) {
			lastProgress = time.Now()
		}
		pending, pendingWatches = pending[:k], pendingWatches[:k]
		switch {
		case len(pending) == 0:
			return nil, nil
		case topWon && time.Since(lastProgress) > quiet:
			return pending, nil
		case !topWon && time.Now().After(giveUp):
			return pending, nil
		}
		for _, n := range pending {
			ps.mu.Lock()
			p := n.run.proc
			ps.mu.Unlock()
			select {
			case <-p.Done():
				return nil, fmt.Errorf("node %s exited at start: %s", n.name, logTail(n.log, 3))
			default:
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	return nil, nil
}

// releaseQuiet is the least awaitNormal waits for a node to turn Normal
// once the top won: a COORDINATOR may wait for its connection's HELLO up
// to the transport's handshake timeout (5 s, node.TCPConfig), and on a
// saturated host it did. Released early, the 178 of 250 nodes still on
// their way each sent ELECTION to every member above them.
const releaseQuiet = 10 * time.Second

// awaitNormalPoll is how often awaitNormal reads the logs of the nodes
// not yet Normal: each poll costs a stat per such node, and most turn
// Normal within a few polls of the leader's COORDINATOR.
const awaitNormalPoll = 10 * time.Millisecond

// release lets held nodes elect (node.Node.Release), all at once.
func (ps *nodeProcs) release(nodes []*labNode) error {
	if len(nodes) == 0 {
		return nil
	}
	if ps.hosts != nil {
		_, err := ps.hostAll(hostRelease, nodes)
		return err
	}
	errs := make([]error, len(nodes))
	parallel(len(nodes), bootWindow(), func(i int) bool {
		ctx, cancel := context.WithTimeout(ps.ctx, queryTimeout)
		defer cancel()
		if err := nodes[i].client.Release(ctx); err != nil {
			errs[i] = fmt.Errorf("node %s: %w", nodes[i].name, err)
		}
		return true
	})
	return errors.Join(errs...)
}

// DataRoot holds a lab's node data dirs, one per node, on a tmpfs.
func DataRoot(run string) string { return filepath.Join(netem.StateDir(run), "nodes") }

// boot starts the nodes' processes and waits until their control sockets
// answer, keeping at most bootWindow of them booting at once. A node
// process spends 15-20 ms of CPU starting (runtime and package
// initialisation, page faults) before any election; started 8 at a time,
// 250 of them kept both cores saturated. With pace, as when each node boots
// on its own election (bootPaced), a node counts as booting until its
// election settled too: unpaced, the leader answered ELECTIONs later than
// the 200 ms election timeout and booting nodes elected themselves. A held
// boot has no election to pace on.
func (ps *nodeProcs) boot(ctx context.Context, nodes []*labNode, pace bool) error {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
		failed  atomic.Bool
	)
	for range min(bootWindow(), len(nodes)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(nodes) {
					return
				}
				n := nodes[i]
				err := ctx.Err()
				var log *eventWatch
				if err == nil {
					err = ps.awaitBuilt(ctx, n)
				}
				if err == nil && pace {
					log, err = watchEvents(n.log)
				}
				if err == nil {
					err = ps.startProc(n)
				}
				switch {
				case err != nil:
				case pace:
					err = ps.waitBooted(ctx, n, log)
				case ps.hosts == nil:
					// A shared host answers a start once the node
					// listens, on its control socket too.
					err = ps.waitReady(ctx, n)
				}
				if err != nil {
					errOnce.Do(func() { first = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	// One wait for the record of all, instead of one write per process.
	return ps.tb.Flush()
}

// bootWindow is how many node processes boot at once: one per core, at
// least two so that a node blocked on I/O leaves the other core busy. On 2
// cores, 250 nodes booted in 12.0-14.7 s one at a time and 10.5-11.5 s
// three at a time, against 10.3-10.9 s two at a time: a third booting
// process made each use 10% more CPU.
func bootWindow() int { return max(2, runtime.NumCPU()) }

func (ps *nodeProcs) startProc(n *labNode) error {
	ps.mu.Lock()
	closed := ps.closed
	ps.mu.Unlock()
	if closed {
		return fmt.Errorf("node %s: lab %s is closed", n.name, ps.run)
	}
	ps.mu.Lock()
	argv, join, hold := n.argv, n.run.join, n.run.hold
	if join {
		argv = append(slices.Clone(argv), "--join")
	}
	if hold {
		argv = append(slices.Clone(argv), "--hold-boot")
	}
	clock := ps.clockLocked(n, time.Now())
	if args := clockArgs(clock); args != nil {
		argv = append(slices.Clone(argv), args...)
	}
	ps.mu.Unlock()
	var p nodeProc
	var err error
	if ps.hosts != nil {
		spec := ps.hostedSpec(n, join, clock)
		spec.HoldBoot = hold
		p, err = ps.hostOf(n).start(ps.ctx, n.name, spec)
	} else {
		p, err = ps.tb.StartUnflushed(n.name, argv, ps.opts.Env, n.log)
	}
	if err != nil {
		return err
	}
	ps.mu.Lock()
	// A restart never holds: what a scenario's restart measures is the
	// node's own boot election.
	n.run.proc, n.run.crashed, n.run.left, n.run.paused, n.run.join, n.run.hold = p, false, false, false, false, false
	ps.mu.Unlock()
	return nil
}

// waitReady polls until n's control socket answers GET /status, without
// the member list, which at 1000 nodes is most of the answer. The socket
// file appears once the node listens, so a stat, not a request, is what
// each poll costs until then.
func (ps *nodeProcs) waitReady(ctx context.Context, n *labNode) error {
	ctx, cancel := context.WithTimeout(ctx, ps.opts.StartTimeout)
	defer cancel()
	ps.mu.Lock()
	p := n.run.proc
	ps.mu.Unlock()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if _, err := os.Stat(n.control); err == nil {
			qctx, cancel := context.WithTimeout(ctx, queryTimeout)
			_, err = n.client.StatusBrief(qctx)
			cancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-p.Done():
			return fmt.Errorf("node %s exited at start: %s", n.name, logTail(n.log, 3))
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return fmt.Errorf("node %s: control socket not answering after %v (log: %s)", n.name, ps.opts.StartTimeout, logTail(n.log, 2))
		case <-tick.C:
		}
	}
}

// waitBooted waits, reading n's event log, until n has started (it writes
// node_started once its control socket listens) and then until its boot
// election has settled (a status record to normal), or until its settings
// say a healthy election would long be over: pacing must not turn a node
// that cannot elect (a topology with heavy loss) into a failed start. The
// log costs the node nothing to read; polling its control socket every few
// milliseconds made it encode its whole status, members list included,
// hundreds of times while it booted.
func (ps *nodeProcs) waitBooted(ctx context.Context, n *labNode, log *eventWatch) error {
	ps.mu.Lock()
	p := n.run.proc
	ps.mu.Unlock()
	tn, _ := ps.topo.Node(n.name)
	deadline := time.Now().Add(ps.opts.StartTimeout)
	var settle time.Time // set once started
	grew, poll, stop := notifyGrowth(n.log)
	defer stop()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		started, normal, err := log.scan()
		if err != nil {
			return fmt.Errorf("node %s: reading its log: %w", n.name, err)
		}
		if started && settle.IsZero() {
			settle = time.Now().Add(2 * (tn.Settings.ElectionTimeout + tn.Settings.FailureTimeout))
			timer.Reset(time.Until(settle))
		}
		if normal || started && time.Now().After(settle) {
			return nil
		}
		if !started && time.Now().After(deadline) {
			return fmt.Errorf("node %s: not started after %v (log: %s)", n.name, ps.opts.StartTimeout, logTail(n.log, 2))
		}
		select {
		case <-p.Done():
			return fmt.Errorf("node %s exited at start: %s", n.name, logTail(n.log, 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-grew:
		case <-poll:
		case <-timer.C:
		}
	}
}
