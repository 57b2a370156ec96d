package lab

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/fault"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// Process states of a lab node, as NodeState.State reports them.
const (
	ProcRunning = "running"
	ProcPaused  = "paused"  // SIGSTOPped by a pause fault
	ProcCrashed = "crashed" // SIGKILLed by a crash fault
	ProcExited  = "exited"  // ended by itself: after a leave fault, or failing
)

// BootOptions configure Boot.
type BootOptions struct {
	// Binary is the bullylab executable the nodes run as `Binary node ...`.
	Binary string
	// Run is the run ID; "" draws a fresh one with NewRunID.
	Run string
	// Seed, when not 0, draws the node IDs from an RNG seeded with it, so
	// that a seed reproduces the whole run; 0 draws them from crypto/rand.
	Seed int64
	// LogDir holds one log per node (<node>.log), kept after Close; ""
	// puts them in the run's state directory, removed by Close.
	LogDir string
	// Backend forces an impairment backend (BackendNetem, BackendNFQueue);
	// "" takes what Probe finds.
	Backend string
	// StartTimeout bounds the wait for the nodes' control sockets, at start
	// and on restart. Default 30s.
	StartTimeout time.Duration
	// Env is the nodes' environment; nil passes this process's, with
	// NodeRuntimeEnv for the variables it does not set.
	Env []string
	// Key is the cluster key the nodes share; nil draws a new one for the
	// run. Either way the lab writes it to KeyPath(run) (mode 0600), passes
	// that file to every node with --cluster-key, and removes it on Close.
	Key *wire.Key
	// Capture, when not nil, has the lab capture its switch into a pcapng
	// file (see CaptureOptions), stopped by Close before anything is torn
	// down.
	Capture *CaptureOptions
	// Share, when set, has the lab build one host's part of a topology
	// that spans hosts (its hosts: section); nil refuses such a topology.
	Share *Share

	hostEnv []string // a shared host's environment
}

// Share is the part of a topology spanning hosts that one host's lab
// builds and runs: that host's nodes, in members lists naming every node.
// The nodes of the other hosts are peers the lab knows by name and
// address, so that partitions and impairments can name them: a partition
// is cut, and loss applied, at the receivers, so every host's lab takes
// every partition and every delay or loss fault, and acts on its own
// nodes. Faults on processes (crash, pause, restart) go to the host that
// runs the nodes.
type Share struct {
	// Host is the hosts entry this lab runs.
	Host string
	// IDs are every node's ID, in topology order: the controller draws
	// them once (node.NewIDs) for all hosts.
	IDs []uuid.UUID
	// PublicKeys are every node's member key, in topology order, for the
	// peers file; MemberKeys are the private keys of this host's nodes, at
	// their places (the others nil). Without PublicKeys the nodes run
	// without member keys, on the cluster key alone.
	PublicKeys []ed25519.PublicKey
	MemberKeys []ed25519.PrivateKey
	// Join, when not nil, connects the built share to the other hosts'
	// before any node starts (Testbed.JoinOverlay).
	Join func(*netem.Testbed) error
}

// NodeRuntimeEnv tunes the Go runtime of node processes when Options.Env
// is nil. A node is a single event loop with a transport; 250 of them share
// the machine's cores. Measured with 100 nodes on 2 cores: GOMAXPROCS=1 cut
// their steady CPU by a fifth (fewer threads handing work to each other),
// and GOGC=400 moved the first collection past start-up (each node then
// allocated a frame queue per peer as it started, which triggered GC assists
// that were a third of its boot CPU): 4.5 s instead of 6.1 s to boot, and
// 16 instead of 24 MB resident per node. GOMEMLIMIT caps what GOGC=400
// would let a heap grow to when a node's queues fill (in an election storm,
// 250 nodes grew to 70 MB each, 18 GB in all). asyncpreemptoff=1 spares
// booting nodes the preemption signals the runtime sends a goroutine that
// looks as if it ran 10 ms, which on an oversubscribed host is one that
// waited for a core: in five interleaved pairs of 250-node boots it used
// 0.1-0.9 s less each time. A node has no loop without function calls, so
// cooperative preemption is enough for it.
var NodeRuntimeEnv = []string{"GOMAXPROCS=1", "GOGC=400", "GOMEMLIMIT=64MiB", "GODEBUG=asyncpreemptoff=1"}

// nodeEnv returns this process's environment with NodeRuntimeEnv's
// variables added where unset.
func nodeEnv() []string {
	env := os.Environ()
	for _, kv := range NodeRuntimeEnv {
		k, _, _ := strings.Cut(kv, "=")
		if _, set := os.LookupEnv(k); !set {
			env = append(env, kv)
		}
	}
	return env
}

// Lab is a Testbed running a topology's nodes, a process each or all in a
// shared host, plus fault injection. Its methods are safe for concurrent use; faults are
// applied one at a time, in the order observers see them.
type Lab struct {
	tb      *netem.Testbed
	topo    *topologies.Topology
	opts    BootOptions
	peers   string // the peers file every node reads
	key     wire.Key
	keyFile string     // where key is, for the nodes' --cluster-key
	nodes   []*labNode // the nodes this lab runs, in topology order
	// all are every node of the topology: nodes, and in a Share the other
	// hosts' nodes too, in topology order.
	all     []*labNode
	byName  map[string]*labNode // all of them
	byID    map[uuid.UUID]*labNode
	times   Times
	tmpfs   bool // mounted a tmpfs on DataRoot(run)
	capture *Capture
	host    *sharedHost // runs the nodes when the topology's hosting is shared

	// ctx ends when Close begins, aborting waits in faults in progress.
	ctx    context.Context
	cancel context.CancelFunc

	// Set when the nodes boot while the testbed is built: nodeBuilt[i] is
	// closed once node i's part is, built once all of it is or the build
	// failed, with buildErr (written before built is closed).
	nodeBuilt []chan struct{}
	built     chan struct{}
	buildErr  error

	faultMu sync.Mutex // held while a fault is applied, and by Close

	mu        sync.Mutex // guards the fields below and labNode's mutable fields
	observers []func(fault.Fault)
	closed    bool
	// cut is the partition in force: receiver -> sources it drops.
	cut map[string]map[string]bool

	closeOnce sync.Once
	closeErr  error
}

// nodeProc is a node's running incarnation: its own process
// (*netem.Process), or a node in the lab's shared host (*hostedProc).
type nodeProc interface {
	PID() int
	Done() <-chan struct{}
}

type labNode struct {
	// host names the hosts entry that runs the node, when that is not
	// this lab's host (see Share): the lab only knows its address, and
	// the impairments of what it sends, which receivers here apply.
	host    string
	name    string
	index   int
	ns      string
	addr    netip.Addr
	listen  string // addr:port, where peers dial it
	id      uuid.UUID
	dataDir string
	// memberKey is the node's own member key, which it reads from keyFile
	// in its data dir; nil for another host's node. publicKey is its
	// public half, for the peers file; nil when the nodes have no member
	// keys.
	memberKey ed25519.PrivateKey
	publicKey ed25519.PublicKey
	keyFile   string
	control   string
	log       string
	argv      []string
	client    *node.ControlClient

	// Guarded by Lab.mu.
	proc     nodeProc
	crashed  bool // ended by a crash fault, not by itself
	left     bool // ended by itself after a leave fault
	join     bool // the next start announces the node with JOIN
	paused   bool
	isolated bool
	imp      *netem.Impairer // nil until an impairment is set
	fw       *netem.Firewall // nil until a partition cuts this node
	blocked  map[string]bool
	// link is the link-wide impairment in force: the topology's until a
	// fault changes it. pairs are per-peer impairments faults set, which
	// replace what the topology puts between the two.
	link  fault.Impairment
	pairs map[string]fault.Impairment
}

const (
	// readyPoll is how often a booting node's control socket is looked
	// for: short, as each boot waits for it.
	readyPoll = 2 * time.Millisecond
	// pollInterval is how often waits query control sockets and process
	// states: the resolution of every time a Lab measures.
	pollInterval = 5 * time.Millisecond
	// queryTimeout bounds one control-socket request; a node that cannot
	// answer in that time counts as not agreeing.
	queryTimeout = 2 * time.Second
	// queryWorkers bounds the concurrent control-socket requests of a poll.
	queryWorkers = 4
)

// Boot builds topo's testbed, applies the topology's impairments,
// starts one node per topology node and returns once every node's control
// socket answers. It does not wait for a leader: see WaitLeader. On error,
// or when ctx ends first, it removes everything it created.
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
	l.times = Times{Begin: begin, Built: time.Now()}
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
	if overlap {
		err = l.startBuilding(ctx)
	} else {
		err = l.startBuilt(ctx)
	}
	if err == nil && opts.Capture != nil && !opts.Capture.FromBoot {
		l.capture, err = l.startCapture(*opts.Capture)
	}
	if err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// withDefaults checks opts and topo and fills in the defaults.
func (opts BootOptions) withDefaults(topo *topologies.Topology) (BootOptions, error) {
	if opts.Binary == "" {
		return opts, errors.New("lab: no bullylab binary given")
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return opts, fmt.Errorf("lab: bullylab binary: %w", err)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	opts.hostEnv = opts.Env
	if opts.Env == nil {
		opts.Env = nodeEnv()
		// NodeRuntimeEnv is for one node a process; a shared host runs
		// them all on every core.
		opts.hostEnv = os.Environ()
	}
	if topo == nil || len(topo.Nodes) == 0 {
		return opts, errors.New("lab: topology has no nodes")
	}
	return opts, nil
}

// share returns the IDs of topo's nodes and the topology this host builds:
// topo, or its share when opts.Share is set.
func (opts BootOptions) share(topo *topologies.Topology) ([]uuid.UUID, *topologies.Topology, error) {
	s := opts.Share
	if s == nil {
		ids, err := node.NewIDs(len(topo.Nodes), opts.Seed)
		if err != nil {
			return nil, nil, fmt.Errorf("lab: node IDs: %w", err)
		}
		return ids, topo, nil
	}
	if len(s.IDs) != len(topo.Nodes) {
		return nil, nil, fmt.Errorf("lab: share of host %s: %d IDs for %d nodes", s.Host, len(s.IDs), len(topo.Nodes))
	}
	here, err := topo.Share(s.Host)
	if err != nil {
		return nil, nil, fmt.Errorf("lab: %w", err)
	}
	if len(here.Nodes) == 0 {
		return nil, nil, fmt.Errorf("lab: host %s of topology %s runs no node", s.Host, topo.Name)
	}
	return s.IDs, here, nil
}

// nodeKeys are the nodes' member keys, in topology order.
type nodeKeys struct {
	public  []ed25519.PublicKey  // nil: the nodes have none
	private []ed25519.PrivateKey // nil for another host's node
}

// memberKeys draws a member key for each of n nodes, or takes those of
// opts.Share. At some 20 µs a key, a lab of 1000 nodes spends 20 ms on them.
func (opts BootOptions) memberKeys(topo *topologies.Topology, n int) (nodeKeys, error) {
	if s := opts.Share; s != nil {
		if s.PublicKeys == nil {
			return nodeKeys{}, nil
		}
		if len(s.PublicKeys) != n || len(s.MemberKeys) != n {
			return nodeKeys{}, fmt.Errorf("lab: share of host %s: %d public and %d member keys for %d nodes", s.Host, len(s.PublicKeys), len(s.MemberKeys), n)
		}
		for i, tn := range topo.Nodes {
			if tn.Host == s.Host && s.MemberKeys[i] == nil {
				return nodeKeys{}, fmt.Errorf("lab: share of host %s: no member key for its node %s", s.Host, tn.Name)
			}
		}
		return nodeKeys{public: s.PublicKeys, private: s.MemberKeys}, nil
	}
	k := nodeKeys{public: make([]ed25519.PublicKey, n), private: make([]ed25519.PrivateKey, n)}
	for i := range n {
		priv, err := wire.NewMemberKey()
		if err != nil {
			return nodeKeys{}, fmt.Errorf("lab: %w", err)
		}
		k.private[i], k.public[i] = priv, priv.Public().(ed25519.PublicKey)
	}
	return k, nil
}

// key returns the cluster key opts give, or a new one.
func (opts BootOptions) key() (wire.Key, error) {
	if opts.Key != nil {
		return *opts.Key, nil
	}
	return wire.NewKey()
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
	l := &Lab{
		tb:      tb,
		topo:    topo,
		opts:    opts,
		peers:   filepath.Join(netem.StateDir(tb.Run()), "peers"),
		key:     key,
		keyFile: netem.KeyPath(tb.Run()),
		byName:  make(map[string]*labNode, len(topo.Nodes)),
		byID:    make(map[uuid.UUID]*labNode, len(topo.Nodes)),
		ctx:     lctx,
		cancel:  cancel,
	}
	for i := range topo.Nodes {
		tn := &topo.Nodes[i]
		priv, pub := keys.at(i)
		n := l.newNode(tn, ids[i], priv, pub)
		if opts.Share != nil && tn.Host != opts.Share.Host {
			n.host = tn.Host
		} else {
			l.nodes = append(l.nodes, n)
		}
		l.all = append(l.all, n)
		l.byName[n.name] = n
		l.byID[n.id] = n
	}
	return l
}

// at returns node i's keys: none when the nodes have no member keys.
func (k nodeKeys) at(i int) (ed25519.PrivateKey, ed25519.PublicKey) {
	if k.public == nil {
		return nil, nil
	}
	return k.private[i], k.public[i]
}

// MemberKeyName is the name of a lab node's member key file in its data
// dir.
const MemberKeyName = "member.key"

func (l *Lab) newNode(tn *topologies.Node, id uuid.UUID, priv ed25519.PrivateKey, pub ed25519.PublicKey) *labNode {
	run := l.tb.Run()
	n := &labNode{
		name:    tn.Name,
		index:   tn.Index,
		ns:      netem.NodeNamespace(run, tn.Name),
		addr:    tn.Addr,
		listen:  netip.AddrPortFrom(tn.Addr, uint16(l.topo.Port)).String(),
		id:      id,
		dataDir: filepath.Join(DataRoot(run), tn.Name),
		log:     netem.LogPath(run, tn.Name),
		blocked: map[string]bool{},
		pairs:   map[string]fault.Impairment{},
		link:    fromTopo(tn.Impair),

		memberKey: priv,
		publicKey: pub,
	}
	n.keyFile = filepath.Join(n.dataDir, MemberKeyName)
	if l.opts.LogDir != "" {
		n.log = filepath.Join(l.opts.LogDir, tn.Name+".log")
	}
	n.control = filepath.Join(n.dataDir, node.ControlSocketName)
	n.client = node.NewControlClient(n.control)
	n.argv = []string{l.opts.Binary, "node",
		"--id", n.id.String(),
		"--listen", n.listen,
		"--peers", l.peers,
		"--data-dir", n.dataDir,
		"--cluster-key", l.keyFile,
	}
	if priv != nil {
		n.argv = append(n.argv, "--member-key", n.keyFile)
	}
	n.argv = append(n.argv,
		"--heartbeat", tn.Settings.Heartbeat.String(),
		"--failure-timeout", tn.Settings.FailureTimeout.String(),
		"--election-timeout", tn.Settings.ElectionTimeout.String(),
		"--detection-stagger", tn.Settings.DetectionStagger.String(),
		"--log", "json",
	)
	return n
}

// publicKeys are the nodes' member keys by ID, as the peers file has
// them; nil when the nodes have none.
func (l *Lab) publicKeys() map[uuid.UUID]ed25519.PublicKey {
	var keys map[uuid.UUID]ed25519.PublicKey
	for _, n := range l.all {
		if n.publicKey != nil {
			if keys == nil {
				keys = make(map[uuid.UUID]ed25519.PublicKey, len(l.all))
			}
			keys[n.id] = n.publicKey
		}
	}
	return keys
}

// members lists the nodes as the peers file has them.
func (l *Lab) members() []wire.Member {
	members := make([]wire.Member, len(l.all))
	for i, n := range l.all {
		members[i] = wire.Member{ID: n.id, Addr: n.listen}
	}
	return members
}

// startBuilt boots the nodes on the testbed built in full, after starting
// a capture of the boot if one is asked for.
func (l *Lab) startBuilt(ctx context.Context) error {
	if c := l.opts.Capture; c != nil && c.FromBoot {
		var err error
		if l.capture, err = l.startCapture(*c); err != nil {
			return err
		}
	}
	return l.start(ctx)
}

// startBuilding builds the testbed and boots the nodes at once: each node
// boots once its namespace and links are up. The testbed builds the top
// node first and the rest in ascending order, the order they boot in.
func (l *Lab) startBuilding(ctx context.Context) error {
	n := len(l.nodes)
	order := make([]int, 0, n)
	order = append(order, n-1)
	for i := range n - 1 {
		order = append(order, i)
	}
	l.nodeBuilt = make([]chan struct{}, n)
	for i := range l.nodeBuilt {
		l.nodeBuilt[i] = make(chan struct{})
	}
	l.built = make(chan struct{})
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		err := l.tb.Construct(bctx, order, func(i int) { close(l.nodeBuilt[i]) })
		l.times.Built = time.Now()
		l.buildErr = err
		close(l.built)
	}()
	err := l.start(ctx)
	if err != nil {
		cancel()
	}
	<-l.built
	if err == nil {
		err = l.buildErr
	}
	return err
}

// awaitBuilt waits, while the testbed is being built, until node n's part
// is built and its links are up. Once the build is over it returns at once:
// a node restarted later may have its link down on purpose (isolate).
func (l *Lab) awaitBuilt(ctx context.Context, n *labNode) error {
	if l.nodeBuilt == nil {
		return nil
	}
	i, err := l.tb.NodeIndex(n.name)
	if err != nil {
		return err
	}
	select {
	case <-l.built:
		return l.buildErr
	default:
	}
	select {
	case <-l.built:
		return l.buildErr
	case <-l.nodeBuilt[i]:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.tb.WaitLinksUp(ctx, []int{i})
}

func (l *Lab) start(ctx context.Context) error {
	var buf bytes.Buffer
	if err := node.FormatPeersKeys(&buf, l.members(), l.publicKeys()); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if err := os.WriteFile(l.peers, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	mounted, err := netem.MountTmpfs(DataRoot(l.tb.Run()))
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	l.tmpfs = mounted
	for _, n := range l.nodes {
		if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
			return fmt.Errorf("lab: node %s: %w", n.name, err)
		}
		if n.memberKey != nil {
			if err := wire.WriteMemberKeyFile(n.keyFile, n.memberKey); err != nil {
				return fmt.Errorf("lab: node %s: %w", n.name, err)
			}
		}
	}
	if l.opts.LogDir != "" {
		if err := os.MkdirAll(l.opts.LogDir, 0o755); err != nil {
			return fmt.Errorf("lab: log dir: %w", err)
		}
	}
	// Impairments go in before the nodes start, so that the first election
	// already runs on the topology's network.
	if err := l.applyAll(l.nodes); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.topo.Hosting == topologies.HostingShared {
		log := netem.LogPath(l.tb.Run(), "host")
		if l.opts.LogDir != "" {
			log = filepath.Join(l.opts.LogDir, "host.log")
		}
		if l.host, err = startSharedHost(l.tb, l.opts.Binary, l.opts.hostEnv, log); err != nil {
			return err
		}
	}
	// The highest node boots first and becomes leader; the rest boot in
	// ascending order, so a booting node's ELECTION reaches only that
	// leader (which re-asserts itself: ANSWER and COORDINATOR) and nodes
	// not up yet (refused at once). Descending order made every follower
	// above a booting node start an election of its own ("bullied"): O(N^2)
	// messages per boot, O(N^3) in all, and 100 nodes never settled.
	top := l.nodes[len(l.nodes)-1]
	l.times.Started = time.Now()
	if err := l.boot(ctx, []*labNode{top}, true); err != nil {
		return err
	}
	if err := l.boot(ctx, l.nodes[:len(l.nodes)-1], true); err != nil {
		return err
	}
	l.times.Ready = time.Now()
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
func (l *Lab) boot(ctx context.Context, nodes []*labNode, pace bool) error {
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
					err = l.awaitBuilt(ctx, n)
				}
				if err == nil && pace {
					log, err = watchEvents(n.log)
				}
				if err == nil {
					err = l.startProc(n)
				}
				switch {
				case err != nil:
				case pace:
					err = l.waitBooted(ctx, n, log)
				default:
					err = l.waitReady(ctx, n)
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
	return l.tb.Flush()
}

// bootWindow is how many node processes boot at once: one per core, at
// least two so that a node blocked on I/O leaves the other core busy. On 2
// cores, 250 nodes booted in 12.0-14.7 s one at a time and 10.5-11.5 s
// three at a time, against 10.3-10.9 s two at a time: a third booting
// process made each use 10% more CPU.
func bootWindow() int { return max(2, runtime.NumCPU()) }

func (l *Lab) startProc(n *labNode) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return fmt.Errorf("node %s: lab %s is closed", n.name, l.tb.Run())
	}
	l.mu.Lock()
	argv, join := n.argv, n.join
	if join {
		argv = append(slices.Clone(argv), "--join")
	}
	l.mu.Unlock()
	var p nodeProc
	var err error
	if l.host != nil {
		p, err = l.host.start(l.ctx, n.name, l.hostedSpec(n, join))
	} else {
		p, err = l.tb.StartUnflushed(n.name, argv, l.opts.Env, n.log)
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	n.proc, n.crashed, n.left, n.paused, n.join = p, false, false, false, false
	l.mu.Unlock()
	return nil
}

// NodeFailure is a node that stopped although no fault stopped it.
type NodeFailure struct {
	Node string
	// Reason is the node's last words in its log ("bullylab: ..."),
	// or what the log lacks.
	Reason string
}

// Failed returns the nodes, lowest ID first, that were started and have
// exited by themselves: not crashed, and not after a leave fault. A node
// that stops on its own (its state could not be saved, say) is no longer
// measured, and an election among the others is not the one asked for.
func (l *Lab) Failed() []NodeFailure {
	l.mu.Lock()
	var out []NodeFailure
	for _, n := range l.nodes {
		if n.proc != nil && !n.left && l.procStateLocked(n) == ProcExited {
			out = append(out, NodeFailure{Node: n.name, Reason: n.log})
		}
	}
	l.mu.Unlock()
	for i := range out {
		out[i].Reason = lastWords(out[i].Reason)
	}
	return out
}

// lastWords returns the last line a node wrote to the log at path that is
// not an event record: where the node says why it stopped.
func lastWords(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("no log: %v", err)
	}
	defer f.Close()
	const tail = 16 << 10
	buf := make([]byte, tail)
	size, _ := f.Seek(0, io.SeekEnd)
	n, _ := f.ReadAt(buf, max(size-tail, 0))
	lines := strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "{") {
			return l
		}
	}
	return "exited without saying why (log " + path + ")"
}

// waitReady polls until n's control socket answers GET /status. The socket
// file appears once the node listens, so a stat, not a request, is what
// each poll costs until then.
func (l *Lab) waitReady(ctx context.Context, n *labNode) error {
	ctx, cancel := context.WithTimeout(ctx, l.opts.StartTimeout)
	defer cancel()
	l.mu.Lock()
	p := n.proc
	l.mu.Unlock()
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
			return fmt.Errorf("node %s: control socket not answering after %v (log: %s)", n.name, l.opts.StartTimeout, logTail(n.log, 2))
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
func (l *Lab) waitBooted(ctx context.Context, n *labNode, log *eventWatch) error {
	l.mu.Lock()
	p := n.proc
	l.mu.Unlock()
	tn, _ := l.topo.Node(n.name)
	deadline := time.Now().Add(l.opts.StartTimeout)
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
			return fmt.Errorf("node %s: not started after %v (log: %s)", n.name, l.opts.StartTimeout, logTail(n.log, 2))
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

// notifyGrowth returns a channel that receives when the file at path is
// written to, and a function that stops the watch. It uses inotify, so
// that a lab waiting for a booting node reads its log when the node
// writes it: polling it every 2 ms, two nodes at a time, was 1,000 wakeups
// and stat calls a second through a 250-node boot, on the same two cores
// as the nodes. Where inotify is not available (no instances left), grew
// is nil and poll ticks every readyPoll instead.
func notifyGrowth(path string) (grew <-chan struct{}, poll <-chan time.Time, stop func()) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err == nil {
		if _, err = unix.InotifyAddWatch(fd, path, unix.IN_MODIFY); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		tick := time.NewTicker(readyPoll)
		return nil, tick.C, tick.Stop
	}
	// Non-blocking, so os.File reads through the netpoller and Close
	// ends a pending Read.
	f := os.NewFile(uintptr(fd), "inotify")
	c := make(chan struct{}, 1)
	go func() {
		var buf [4096]byte
		for {
			if _, err := f.Read(buf[:]); err != nil {
				return
			}
			select {
			case c <- struct{}{}:
			default: // one pending wakeup covers every write before it
			}
		}
	}()
	return c, nil, func() { f.Close() }
}

// eventWatch reads the records a node appends to its JSON event log.
type eventWatch struct {
	path    string
	off     int64
	partial []byte
	started bool
	normal  bool
}

// watchEvents watches the records appended to path from now on: a log
// kept in a LogDir across runs or restarts holds older ones.
func watchEvents(path string) (*eventWatch, error) {
	w := &eventWatch{path: path}
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		w.off = fi.Size()
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	return w, nil
}

// scan reads what was appended and reports whether the node has started
// and whether it has been Normal.
func (w *eventWatch) scan() (started, normal bool, err error) {
	fi, err := os.Stat(w.path)
	if errors.Is(err, os.ErrNotExist) || err == nil && fi.Size() <= w.off {
		return w.started, w.normal, nil
	}
	if err != nil {
		return false, false, err
	}
	f, err := os.Open(w.path)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	buf := make([]byte, fi.Size()-w.off)
	k, err := f.ReadAt(buf, w.off)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, false, err
	}
	w.off += int64(k)
	data := append(w.partial, buf[:k]...)
	for {
		line, rest, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			break
		}
		data = rest
		var rec struct {
			Event string `json:"event"`
			To    string `json:"to"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue // not a record: a Go runtime message, say
		}
		switch {
		case rec.Event == "node_started":
			w.started = true
		case rec.Event == "status" && rec.To == node.StatusNormal.String():
			w.started, w.normal = true, true
		}
	}
	w.partial = slices.Clone(data)
	return w.started, w.normal, nil
}

// logTail returns the last lines of a log, joined by " | ".
func logTail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], " | ")
}

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

// Started returns when the first node process was started: the origin of
// the time to the first leader.
func (l *Lab) Started() time.Time { return l.times.Started }

// Times returns the milestones of Boot.
func (l *Lab) Times() Times { return l.times }

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
func (l *Lab) NodeName(id uuid.UUID) string {
	if n := l.byID[id]; n != nil {
		return n.name
	}
	return ""
}

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

// Backend returns the impairment backend faults use, and why. Before any
// node has an impairer it asks Probe; if the probe cannot run, name is
// "unknown" and why is the probe's error, which the first impairment will
// return too.
func (l *Lab) Backend() (name, why string) {
	l.mu.Lock()
	for _, n := range l.nodes {
		if n.imp != nil {
			l.mu.Unlock()
			return n.imp.Backend(), n.imp.Why()
		}
	}
	l.mu.Unlock()
	if l.opts.Backend != "" {
		return l.opts.Backend, "forced by the caller"
	}
	caps, err := netem.Probe()
	if err != nil {
		return "unknown", err.Error()
	}
	name = caps.Backend()
	if name == "" {
		name = "none"
	}
	return name, caps.Reason
}

// DelayerStats returns the NFQUEUE delayer's counters and lateness
// (netem.Impairer.Stats) of each node that was impaired, by name; they
// stay readable after Close, so a run can be judged after teardown.
func (l *Lab) DelayerStats() map[string]netem.DelayerStats {
	l.mu.Lock()
	imps := map[string]*netem.Impairer{}
	for _, n := range l.nodes {
		if n.imp != nil {
			imps[n.name] = n.imp
		}
	}
	l.mu.Unlock()
	out := make(map[string]netem.DelayerStats, len(imps))
	for name, im := range imps {
		out[name] = im.Stats()
	}
	return out
}

// OnFault registers f to be called with every fault once it is applied, in
// order, on the goroutine that applied it. f must not apply faults itself.
func (l *Lab) OnFault(f func(fault.Fault)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observers = append(l.observers, f)
}

func (l *Lab) emit(f fault.Fault) {
	l.mu.Lock()
	obs := slices.Clone(l.observers)
	l.mu.Unlock()
	for _, o := range obs {
		o(f)
	}
}

// node returns one of the nodes this lab runs.
func (l *Lab) node(name string) (*labNode, error) {
	n, err := l.anyNode(name)
	if err == nil && n.host != "" {
		return nil, fmt.Errorf("node %s runs on host %s, not in run %s", name, n.host, l.tb.Run())
	}
	return n, err
}

// anyNode returns any node of the topology, one of another host's too.
func (l *Lab) anyNode(name string) (*labNode, error) {
	n := l.byName[name]
	if n == nil {
		return nil, fmt.Errorf("run %s has no node %q", l.tb.Run(), name)
	}
	return n, nil
}

// nodesOf resolves names to nodes this lab runs.
func (l *Lab) nodesOf(names []string) ([]*labNode, error) {
	return l.resolve(names, l.node)
}

// anyNodesOf resolves names to nodes of the topology, wherever they run.
func (l *Lab) anyNodesOf(names []string) ([]*labNode, error) {
	return l.resolve(names, l.anyNode)
}

func (l *Lab) resolve(names []string, lookup func(string) (*labNode, error)) ([]*labNode, error) {
	if len(names) == 0 {
		return nil, errors.New("no node given")
	}
	out := make([]*labNode, 0, len(names))
	seen := map[string]bool{}
	for _, name := range names {
		n, err := lookup(name)
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("node %s is named twice", name)
		}
		seen[name] = true
		out = append(out, n)
	}
	return out, nil
}

// procStateLocked returns n's process state; l.mu must be held.
func (l *Lab) procStateLocked(n *labNode) string {
	if n.proc == nil {
		return ProcExited
	}
	select {
	case <-n.proc.Done():
		if n.crashed {
			return ProcCrashed
		}
		return ProcExited
	default:
	}
	if n.paused {
		return ProcPaused
	}
	return ProcRunning
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
		l.faultMu.Lock()
		defer l.faultMu.Unlock()
		l.mu.Lock()
		l.closed = true
		var procs []*netem.Process
		var imps []*netem.Impairer
		var fws []*netem.Firewall
		for _, n := range l.nodes {
			if p, ok := n.proc.(*netem.Process); ok {
				procs = append(procs, p)
			}
			if n.imp != nil {
				imps = append(imps, n.imp)
			}
			if n.fw != nil {
				fws = append(fws, n.fw)
			}
		}
		l.mu.Unlock()

		var errs []error
		if l.capture != nil {
			errs = append(errs, l.capture.stopOnClose())
		}
		errs = append(errs, netem.KillAll(procs))
		if l.host != nil {
			errs = append(errs, l.host.kill())
		}
		for _, im := range imps {
			errs = append(errs, im.Close())
		}
		for _, fw := range fws {
			errs = append(errs, fw.Close())
		}
		if l.tmpfs {
			errs = append(errs, netem.Unmount(DataRoot(l.tb.Run())))
		}
		errs = append(errs, l.tb.Close())
		if err := errors.Join(errs...); err != nil {
			l.closeErr = fmt.Errorf("lab %s: %s", l.tb.Run(), strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	})
	return l.closeErr
}
