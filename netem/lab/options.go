//go:build linux

package lab

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
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
	// HostProcesses is how many shared host processes run the nodes of a
	// topology with `hosting: shared`, dealt round-robin (HostProcessOf),
	// each with its own limit on open files; 0 is one. At most
	// MaxHostProcesses, and at most one per node. The bench sizes it
	// from its estimate of the files a scenario needs.
	HostProcesses int

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
	// Hold has Boot return once the share is built, joined and capturing,
	// its nodes not started: Lab.StartHeld starts them. Every host's
	// capture then starts before any host's first node, so that a merged
	// capture holds every boot election and every connection's HELLO.
	Hold bool
	// SpanBoot, with Hold and a shared topology, boots the hosts' nodes
	// in one held election, as Boot does on one host (bootAll): StartHeld
	// starts every node of the share held, the share's highest too, and
	// returns once they answer; once every host's do, Lab.Lead on the
	// host that runs the topology's highest node boots it, and Lab.Settle
	// on every host releases what its election missed. With each host
	// booting its own highest, 5 hosts of 1000 nodes would start 5
	// elections at once, each HALTing the 5000, and bully one another.
	// A process per node boots paced, as on one host, and ignores it.
	SpanBoot bool
}

// NodeRuntimeEnv tunes the Go runtime of node processes when BootOptions.Env
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
	if opts.HostProcesses < 0 || opts.HostProcesses > min(MaxHostProcesses, len(topo.Nodes)) {
		return opts, fmt.Errorf("lab: %d host processes for %d nodes: give 1 to %d", opts.HostProcesses, len(topo.Nodes), min(MaxHostProcesses, len(topo.Nodes)))
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

// at returns node i's keys: none when the nodes have no member keys.
func (k nodeKeys) at(i int) (ed25519.PrivateKey, ed25519.PublicKey) {
	if k.public == nil {
		return nil, nil
	}
	return k.private[i], k.public[i]
}

// key returns the cluster key opts give, or a new one.
func (opts BootOptions) key() (wire.Key, error) {
	if opts.Key != nil {
		return *opts.Key, nil
	}
	return wire.NewKey()
}
