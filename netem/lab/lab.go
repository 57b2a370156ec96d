//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Lab is a Testbed running a topology's nodes, a process each or all in a
// shared host. Its parts each keep one concern, with its own lock:
// nodeProcs boots the nodes and starts and stops their processes, network
// keeps what partitions and impairments made of the network, Faults
// applies faults through both, one at a time, Monitor watches the nodes,
// and Capture records the switch. Its methods, and its parts', are safe
// for concurrent use.
//
// The lock order is Faults.applying, nodeProcs.mu, network.mu: Close and
// every fault hold Faults.applying while they take the others, and
// Monitor.NodeStates holds nodeProcs.mu while it takes network.mu. The
// observers' lock and a Capture's are taken with at most
// Faults.applying held.
type Lab struct {
	*roster
	tb      *netem.Testbed
	key     wire.Key
	procs   *nodeProcs
	net     *network
	faults  *Faults
	monitor *Monitor
	capture *Capture

	startMu sync.Mutex
	held    bool // built, its nodes not started yet (Share.Hold)

	cancel    context.CancelFunc // ends the parts' context as Close begins
	closeOnce sync.Once
	closeErr  error
}

// Boot builds topo's testbed, applies the topology's impairments,
// starts one node per topology node and returns once every node's control
// socket answers and the boot's one election is over: every node but the
// highest starts held, and is released once it follows the highest or
// after that election's timeouts (bootAll). It does not confirm a leader:
// see Monitor.WaitLeader.
// On error, or when ctx ends first, it removes everything it created.
//
// Node IDs are random version-4 UUIDs assigned in ascending order, so a
// node's index is its Bully priority: in star5, n5 is the highest and wins.
func Boot(ctx context.Context, topo *topologies.Topology, opts BootOptions) (*Lab, error) {
	if len(topo.Hosts) > 0 && opts.Share == nil {
		// Refused rather than run here in full: a testbed of the wrong
		// machines measures something else.
		return nil, fmt.Errorf("lab: topology %s spans %d hosts (hosts:): build it with --hosts, or leave the hosts section out to run every node on this machine", topo.Name, len(topo.Hosts))
	}
	opts, err := opts.withDefaults(topo)
	if err != nil {
		return nil, err
	}
	if s := opts.Share; s != nil && s.SpanBoot && !s.Hold {
		// Nothing would boot the span's highest node or release the rest.
		return nil, fmt.Errorf("lab: share of host %s: a span boot (SpanBoot) needs its nodes held (Hold)", s.Host)
	}
	ids, here, err := opts.share(topo)
	if err != nil {
		return nil, err
	}
	keys, err := opts.memberKeys(topo, len(ids))
	if err != nil {
		return nil, err
	}
	key, err := opts.key()
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	begin := time.Now()
	// Without a capture of the boot or impairments to install before the
	// first election, the nodes boot while the testbed is still being
	// built, in the order they boot in: the kernel serialises the build,
	// which left a core idle for the 0.6 s 250 nodes take.
	// A share is joined to the other hosts' before its nodes boot.
	overlap := (opts.Capture == nil || !opts.Capture.FromBoot) && !topo.Impaired() && opts.Share == nil
	tb, err := claimTestbed(ctx, here, opts.Run, !overlap)
	if err != nil {
		return nil, err
	}
	l := newLab(tb, topo, opts, key, ids, keys)
	l.procs.times = Times{Begin: begin, Built: time.Now()}
	if s := opts.Share; s != nil && s.Join != nil {
		if err := s.Join(tb); err != nil {
			return nil, errors.Join(fmt.Errorf("lab: joining host %s to the others: %w", s.Host, err), l.Close())
		}
	}
	// Written before any node starts, in the state directory that the
	// testbed claimed (mode 0700), so that Close and Clean remove it.
	if err := wire.WriteKeyFile(l.keyFile, l.key); err != nil {
		return nil, errors.Join(fmt.Errorf("lab: %w", err), l.Close())
	}
	tb.RecordKeyFile(l.keyFile)
	switch {
	case overlap:
		err = l.procs.whileBuilding(ctx, l.start)
	case opts.Share != nil && opts.Share.Hold:
		l.held = true
		err = l.startCaptureFromBoot(opts.Capture)
	default:
		err = l.startBuilt(ctx, opts.Capture)
	}
	if err == nil && opts.Capture != nil && !opts.Capture.FromBoot {
		l.capture, err = l.startCapture(*opts.Capture)
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// claimTestbed claims a run for topo: run, or a fresh ID when run is "".
// With build it builds the testbed too; otherwise the caller constructs
// it.
func claimTestbed(ctx context.Context, topo *topologies.Topology, run string, build bool) (*netem.Testbed, error) {
	for attempt := 0; ; attempt++ {
		id := run
		if id == "" {
			id = netem.NewRunID()
		}
		var tb *netem.Testbed
		var err error
		if build {
			tb, err = netem.Build(ctx, topo, id)
		} else {
			tb, err = netem.NewTestbed(topo, id)
		}
		if errors.Is(err, netem.ErrRunExists) && run == "" && attempt < 10 {
			continue // drew a run ID another run holds
		}
		return tb, err
	}
}

// newLab describes the lab of topo on tb, its nodes with the IDs ids, and
// the command lines they start with.
func newLab(tb *netem.Testbed, topo *topologies.Topology, opts BootOptions, key wire.Key, ids []uuid.UUID, keys nodeKeys) *Lab {
	lctx, cancel := context.WithCancel(context.Background())
	nodes := newRoster(tb.Run(), topo, opts, ids, keys)
	procs := &nodeProcs{roster: nodes, tb: tb, opts: opts, ctx: lctx}
	nw := &network{roster: nodes, tb: tb, forcedBackend: opts.Backend}
	return &Lab{
		roster:  nodes,
		tb:      tb,
		key:     key,
		procs:   procs,
		net:     nw,
		faults:  &Faults{roster: nodes, procs: procs, net: nw, ctx: lctx},
		monitor: &Monitor{roster: nodes, procs: procs, net: nw, ctx: lctx},
		cancel:  cancel,
	}
}

// startBuilt boots the nodes on the testbed built in full, after starting
// a capture of the boot if one is asked for.
func (l *Lab) startBuilt(ctx context.Context, c *CaptureOptions) error {
	if err := l.startCaptureFromBoot(c); err != nil {
		return err
	}
	return l.start(ctx)
}

// startCaptureFromBoot starts the capture c asks for if it is to hold the
// boot.
func (l *Lab) startCaptureFromBoot(c *CaptureOptions) error {
	if c == nil || !c.FromBoot {
		return nil
	}
	var err error
	l.capture, err = l.startCapture(*c)
	return err
}

// StartHeld starts the nodes of a share that Boot held (Share.Hold) and
// returns once every node's control socket answers, as Boot does. On
// error the caller closes the lab.
func (l *Lab) StartHeld(ctx context.Context) error {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	if !l.held {
		return fmt.Errorf("lab %s: its nodes were started already", l.Run())
	}
	l.held = false
	return l.start(ctx)
}

// Lead boots the span's highest node, which runs on this host and which
// StartHeld started held with the rest (Share.SpanBoot), and returns once
// it has won its boot election. The controller calls it once every host's
// StartHeld returned: its HALTs then reach every node of the span, up and
// listening.
func (l *Lab) Lead(ctx context.Context) error {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	if l.held {
		return fmt.Errorf("lab %s: its nodes are not started", l.Run())
	}
	return l.procs.lead(ctx)
}

// Settle, once the span's highest node has won (Lead, on its host), waits
// until this host's nodes follow it and releases those that do not, as
// Boot does on one host (Share.SpanBoot); Times.Ready is when it returned.
func (l *Lab) Settle(ctx context.Context) error {
	l.startMu.Lock()
	defer l.startMu.Unlock()
	if l.held || !l.procs.spanBoot() || l.procs.watches == nil {
		return fmt.Errorf("lab %s: no held span boot to settle", l.Run())
	}
	return l.procs.settle(ctx)
}

// start writes what the nodes read, puts the topology's impairments in,
// so that the first election already runs on the topology's network, and
// boots the nodes.
func (l *Lab) start(ctx context.Context) error {
	if err := l.procs.prepare(); err != nil {
		return err
	}
	if err := l.net.applyAll(l.nodes); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.procs.bootAll(ctx)
}

// Faults returns what applies faults to the lab's nodes.
func (l *Lab) Faults() *Faults { return l.faults }

// Monitor returns what watches the lab's nodes and their election.
func (l *Lab) Monitor() *Monitor { return l.monitor }

// Run returns the run ID.
func (l *Lab) Run() string { return l.tb.Run() }

// Key returns the cluster key the nodes share, which verifies the frames
// of a capture of the run.
func (l *Lab) Key() wire.Key { return l.key }

// KeyFile returns the path of the nodes' cluster key file (KeyPath), which
// Close removes with the rest of the run's state.
func (l *Lab) KeyFile() string { return l.keyFile }

// Testbed returns the testbed the nodes run in.
func (l *Lab) Testbed() *netem.Testbed { return l.tb }

// PeersFile returns the path of the peers file the nodes read: every
// node's ID, address and public member key.
func (l *Lab) PeersFile() string { return l.peers }

// Topology returns the topology the lab was started from.
func (l *Lab) Topology() *topologies.Topology { return l.topo }

// Times are the milestones of Boot.
type Times struct {
	Begin time.Time // Boot was called
	// Built is when the testbed's links were all up: before Started, or
	// after it where the nodes boot while the testbed is built.
	Built   time.Time
	Started time.Time // the first node process was started
	Ready   time.Time // every node had booted
}

// Times returns the milestones of Boot.
func (l *Lab) Times() Times { return l.procs.times }

// Nodes returns the node names in topology order.
func (l *Lab) Nodes() []string {
	names := make([]string, len(l.nodes))
	for i, n := range l.nodes {
		names[i] = n.name
	}
	return names
}

// ID returns a node's ID.
func (l *Lab) ID(name string) (uuid.UUID, error) {
	n, err := l.node(name)
	if err != nil {
		return uuid.Nil, err
	}
	return n.id, nil
}

// NodeName returns the name of the node with ID id, or "" if none has it.
func (l *Lab) NodeName(id uuid.UUID) string { return l.nodeName(id) }

// LogPath returns where a node's output goes: its JSON event log, with
// whatever else its process writes to stdout and stderr, every
// incarnation appended. Close removes it unless BootOptions.LogDir
// holds it.
func (l *Lab) LogPath(name string) (string, error) {
	n, err := l.node(name)
	if err != nil {
		return "", err
	}
	return n.log, nil
}

// Client returns the control-socket client of a node.
func (l *Lab) Client(name string) (*node.ControlClient, error) {
	n, err := l.node(name)
	if err != nil {
		return nil, err
	}
	return n.client, nil
}

// Close tears the lab down: the node processes first (a live process keeps
// its namespace alive and would keep sending into a half-removed network),
// then the Impairers before the Firewalls (removing the Firewalls' base
// chain would drop packets a delayer still holds), then the namespaces and
// the state directory, with the data dirs and default logs. Faults in
// progress are aborted. Further calls return the first result.
func (l *Lab) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		l.faults.applying.Lock()
		defer l.faults.applying.Unlock()
		procs := l.procs.close()
		imps, fws := l.net.closing()

		var errs []error
		if l.capture != nil {
			errs = append(errs, l.capture.stopOnClose())
		}
		errs = append(errs, l.procs.kill(procs))
		for _, im := range imps {
			errs = append(errs, im.Close())
		}
		for _, fw := range fws {
			errs = append(errs, fw.Close())
		}
		errs = append(errs, l.procs.unmount())
		errs = append(errs, l.tb.Close())
		if err := errors.Join(errs...); err != nil {
			l.closeErr = fmt.Errorf("lab %s: %s", l.tb.Run(), strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	})
	return l.closeErr
}
