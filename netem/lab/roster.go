//go:build linux

package lab

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// labNode is one node of a lab's topology: what it is, where its files
// are and how it starts. Only run and net change, each under the lock of
// the part that owns it.
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

	run nodeRun // guarded by nodeProcs.mu
	net nodeNet // guarded by network.mu
}

// roster is a lab's nodes and the files they share. It is fixed once the
// lab is described, so every part of the lab reads it without a lock.
type roster struct {
	run   string
	topo  *topologies.Topology
	peers string // the peers file every node reads
	// keyFile is the cluster key's file, for the nodes' --cluster-key.
	keyFile string
	nodes   []*labNode // the nodes this lab runs, in topology order
	// all are every node of the topology: nodes, and in a Share the other
	// hosts' nodes too, in topology order.
	all    []*labNode
	byName map[string]*labNode // all of them
	byID   map[uuid.UUID]*labNode
}

// newRoster describes the nodes of topo in run, with the IDs ids, and the
// command lines they start with.
func newRoster(run string, topo *topologies.Topology, opts BootOptions, ids []uuid.UUID, keys nodeKeys) *roster {
	r := &roster{
		run:     run,
		topo:    topo,
		peers:   filepath.Join(netem.StateDir(run), "peers"),
		keyFile: netem.KeyPath(run),
		byName:  make(map[string]*labNode, len(topo.Nodes)),
		byID:    make(map[uuid.UUID]*labNode, len(topo.Nodes)),
	}
	for i := range topo.Nodes {
		tn := &topo.Nodes[i]
		priv, pub := keys.at(i)
		n := r.newNode(tn, opts, ids[i], priv, pub)
		if opts.Share != nil && tn.Host != opts.Share.Host {
			n.host = tn.Host
		} else {
			r.nodes = append(r.nodes, n)
		}
		r.all = append(r.all, n)
		r.byName[n.name] = n
		r.byID[n.id] = n
	}
	return r
}

// MemberKeyName is the name of a lab node's member key file in its data
// dir.
const MemberKeyName = "member.key"

func (r *roster) newNode(tn *topologies.Node, opts BootOptions, id uuid.UUID, priv ed25519.PrivateKey, pub ed25519.PublicKey) *labNode {
	run := r.run
	n := &labNode{
		name:    tn.Name,
		index:   tn.Index,
		ns:      netem.NodeNamespace(run, tn.Name),
		addr:    tn.Addr,
		listen:  netip.AddrPortFrom(tn.Addr, uint16(r.topo.Port)).String(),
		id:      id,
		dataDir: filepath.Join(DataRoot(run), tn.Name),
		log:     netem.LogPath(run, tn.Name),
		net: nodeNet{
			blocked: map[string]fault.CutMode{},
			pairs:   map[string]fault.Impairment{},
			link:    fromTopo(tn.Impair),
		},

		memberKey: priv,
		publicKey: pub,
	}
	n.keyFile = filepath.Join(n.dataDir, MemberKeyName)
	if opts.LogDir != "" {
		n.log = filepath.Join(opts.LogDir, tn.Name+".log")
	}
	n.control = filepath.Join(n.dataDir, node.ControlSocketName)
	n.client = node.NewControlClient(n.control)
	n.argv = []string{opts.Binary, "node",
		"--id", n.id.String(),
		"--listen", n.listen,
		"--peers", r.peers,
		"--data-dir", n.dataDir,
		"--cluster-key", r.keyFile,
	}
	if priv != nil {
		n.argv = append(n.argv, "--member-key", n.keyFile)
	}
	n.argv = append(n.argv,
		"--heartbeat", tn.Settings.Heartbeat.String(),
		"--failure-timeout", tn.Settings.FailureTimeout.String(),
		"--election-timeout", tn.Settings.ElectionTimeout.String(),
		"--detection-stagger", tn.Settings.DetectionStagger.String(),
		"--algorithm", nodeAlgorithm(r.topo),
		"--log", "json",
	)
	if limit := memberLimit(len(r.topo.Nodes)); limit > 0 {
		n.argv = append(n.argv, "--max-members", strconv.Itoa(limit))
	}
	return n
}

// nodeAlgorithm is the election topo's nodes run: its Algorithm, or Bully
// for a Topology not parsed from a file.
func nodeAlgorithm(topo *topologies.Topology) string {
	if topo.Algorithm == "" {
		return topologies.DefaultAlgorithm
	}
	return topo.Algorithm
}

// publicKeys are the nodes' member keys by ID, as the peers file has
// them; nil when the nodes have none.
func (r *roster) publicKeys() map[uuid.UUID]ed25519.PublicKey {
	var keys map[uuid.UUID]ed25519.PublicKey
	for _, n := range r.all {
		if n.publicKey != nil {
			if keys == nil {
				keys = make(map[uuid.UUID]ed25519.PublicKey, len(r.all))
			}
			keys[n.id] = n.publicKey
		}
	}
	return keys
}

// members lists the nodes as the peers file has them.
func (r *roster) members() []wire.Member {
	members := make([]wire.Member, len(r.all))
	for i, n := range r.all {
		members[i] = wire.Member{ID: n.id, Addr: n.listen}
	}
	return members
}

// node returns one of the nodes this lab runs.
func (r *roster) node(name string) (*labNode, error) {
	n, err := r.anyNode(name)
	if err == nil && n.host != "" {
		return nil, fmt.Errorf("node %s runs on host %s, not in run %s", name, n.host, r.run)
	}
	return n, err
}

// anyNode returns any node of the topology, one of another host's too.
func (r *roster) anyNode(name string) (*labNode, error) {
	n := r.byName[name]
	if n == nil {
		return nil, fmt.Errorf("run %s has no node %q", r.run, name)
	}
	return n, nil
}

// nodesOf resolves names to nodes this lab runs.
func (r *roster) nodesOf(names []string) ([]*labNode, error) {
	return r.resolve(names, r.node)
}

// anyNodesOf resolves names to nodes of the topology, wherever they run.
func (r *roster) anyNodesOf(names []string) ([]*labNode, error) {
	return r.resolve(names, r.anyNode)
}

func (r *roster) resolve(names []string, lookup func(string) (*labNode, error)) ([]*labNode, error) {
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

// nodeName returns the name of the node with ID id, or "" if none has it.
func (r *roster) nodeName(id uuid.UUID) string {
	if n := r.byID[id]; n != nil {
		return n.name
	}
	return ""
}

func (r *roster) cmpNames(a, b string) int { return r.byName[a].index - r.byName[b].index }
