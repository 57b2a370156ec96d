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
// ascending order, the order they boot in.
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

// bootAll starts the shared hosts, if the topology asks for them, and
// boots every node.
func (ps *nodeProcs) bootAll(ctx context.Context) error {
	if ps.topo.Hosting == topologies.HostingShared {
		if err := ps.startHosts(); err != nil {
			return err
		}
	}
	// The highest node boots first and becomes leader; the rest boot in
	// ascending order, so a booting node's ELECTION reaches only that
	// leader (which re-asserts itself: ANSWER and COORDINATOR) and nodes
	// not up yet (refused at once). Descending order made every follower
	// above a booting node start an election of its own ("bullied"): O(N^2)
	// messages per boot, O(N^3) in all, and 100 nodes never settled.
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

// DataRoot holds a lab's node data dirs, one per node, on a tmpfs.
func DataRoot(run string) string { return filepath.Join(netem.StateDir(run), "nodes") }

// boot starts the nodes' processes and waits until their control sockets
// answer, keeping at most bootWindow of them booting at once; with pace, a
// node counts as booting until its boot election has settled too (see
// waitBooted). A node process spends 25-60 ms of CPU booting (runtime and
// package initialisation, page faults, its boot election); started 8 at a
// time, or 4 without pacing, 250 of them kept
// both cores saturated, the leader answered ELECTIONs later than the
// 200 ms election timeout, booting nodes elected themselves, and their
// elections kept the machine saturated for minutes. Pacing on the leader's
// answers slows the boot down exactly when the leader falls behind.
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
				default:
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
	argv, join := n.argv, n.run.join
	if join {
		argv = append(slices.Clone(argv), "--join")
	}
	clock := ps.clockLocked(n, time.Now())
	if args := clockArgs(clock); args != nil {
		argv = append(slices.Clone(argv), args...)
	}
	ps.mu.Unlock()
	var p nodeProc
	var err error
	if ps.hosts != nil {
		p, err = ps.hostOf(n).start(ps.ctx, n.name, ps.hostedSpec(n, join, clock))
	} else {
		p, err = ps.tb.StartUnflushed(n.name, argv, ps.opts.Env, n.log)
	}
	if err != nil {
		return err
	}
	ps.mu.Lock()
	n.run.proc, n.run.crashed, n.run.left, n.run.paused, n.run.join = p, false, false, false, false
	ps.mu.Unlock()
	return nil
}

// waitReady polls until n's control socket answers GET /status. The socket
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
			_, err = n.client.Status(qctx)
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
