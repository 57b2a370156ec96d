//go:build linux

package lab

import (
	"fmt"
	"maps"
	"net/netip"
	"sync"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies/fault"
)

// nodeNet is what faults made of a node's network.
type nodeNet struct {
	isolated bool
	isoMode  fault.CutMode            // how the isolation severs, when isolated
	imp      *netem.Impairer          // nil until an impairment is set
	fw       *netem.Firewall          // nil until a partition cuts this node
	blocked  map[string]fault.CutMode // source -> how its Firewall cuts it
	// link is the link-wide impairment in force: the topology's until a
	// fault changes it. pairs are per-peer impairments faults set, which
	// replace what the topology puts between the two.
	link  fault.Impairment
	pairs map[string]fault.Impairment
}

// network keeps a lab's network as partitions, cuts, isolation and
// impairments leave it: the receivers' Firewalls, which drop (or reject)
// what is cut or lost, and the senders' Impairers, which delay what they
// send.
type network struct {
	*roster
	tb            *netem.Testbed
	forcedBackend string // BootOptions.Backend

	mu sync.Mutex // guards cut, links and every node's net
	// cut is the partition in force and links the cut of node pairs:
	// receiver -> sources it cuts, and how.
	cut, links blockMap
}

// blockMap is, per receiver, the sources it cuts and how.
type blockMap map[string]map[string]fault.CutMode

// add cuts what src sends to rcv. Where two faults cut the same pair, a
// drop wins over a reset: what is dropped never reaches the side that
// would answer it.
func (m blockMap) add(rcv, src string, mode fault.CutMode) {
	mode = mode.OrDrop()
	if m[rcv] == nil {
		m[rcv] = map[string]fault.CutMode{}
	}
	if cur, ok := m[rcv][src]; !ok || cur == fault.ModeReset {
		m[rcv][src] = mode
	}
}

// isolate isolates nodes (severing as mode says), or reconnects them, and
// puts back what was if it cannot.
func (nw *network) isolate(nodes []*labNode, isolate bool, mode fault.CutMode) error {
	type was struct {
		isolated bool
		mode     fault.CutMode
	}
	nw.mu.Lock()
	old := map[*labNode]was{}
	for _, n := range nodes {
		old[n] = was{n.net.isolated, n.net.isoMode}
		n.net.isolated = isolate
		n.net.isoMode = ""
		if isolate {
			n.net.isoMode = mode.OrDrop()
		}
	}
	nw.mu.Unlock()
	if err := nw.setBlocked(nw.wantBlocked()); err != nil {
		nw.mu.Lock()
		for n, w := range old {
			n.net.isolated, n.net.isoMode = w.isolated, w.mode
		}
		nw.mu.Unlock()
		return err
	}
	return nil
}

// partition replaces the partition in force with want, and puts back
// what was if it cannot.
func (nw *network) partition(want blockMap) error {
	return nw.replace(&nw.cut, want)
}

// cutLinks replaces the cut of node pairs in force with want, and puts
// back what was if it cannot.
func (nw *network) cutLinks(want blockMap) error {
	return nw.replace(&nw.links, want)
}

func (nw *network) replace(field *blockMap, want blockMap) error {
	nw.mu.Lock()
	old := *field
	*field = want
	nw.mu.Unlock()
	if err := nw.setBlocked(nw.wantBlocked()); err != nil {
		nw.mu.Lock()
		*field = old
		nw.mu.Unlock()
		return err
	}
	return nil
}

// heal removes the partition, the cut of node pairs and every isolation,
// and returns the nodes that were cut.
func (nw *network) heal() ([]string, error) {
	var healed []string
	nw.mu.Lock()
	for _, n := range nw.nodes {
		if len(n.net.blocked) > 0 || n.net.isolated {
			healed = append(healed, n.name)
		}
		n.net.isolated, n.net.isoMode = false, ""
	}
	nw.cut, nw.links = nil, nil
	nw.mu.Unlock()
	return healed, nw.setBlocked(nil)
}

// wantBlocked returns, per receiver, the sources its Firewall must cut and
// how: the partition's cut, the cut node pairs, and every packet to or
// from an isolated node.
func (nw *network) wantBlocked() blockMap {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	want := blockMap{}
	for _, m := range []blockMap{nw.cut, nw.links} {
		for rcv, srcs := range m {
			for src, mode := range srcs {
				want.add(rcv, src, mode)
			}
		}
	}
	for _, a := range nw.nodes {
		if !a.net.isolated {
			continue
		}
		for _, b := range nw.nodes {
			if a != b {
				want.add(a.name, b.name, a.net.isoMode)
				want.add(b.name, a.name, a.net.isoMode)
			}
		}
	}
	return want
}

// setBlocked makes every node cut exactly the sources want gives it, as
// it says. All Firewalls needed are created first, so that the cut itself
// is a quick series of set updates.
func (nw *network) setBlocked(want blockMap) error {
	for name, srcs := range want {
		if len(srcs) == 0 || nw.byName[name].host != "" {
			continue // another host's lab cuts at its nodes
		}
		if err := nw.ensureFirewall(nw.byName[name]); err != nil {
			return err
		}
	}
	for _, n := range nw.nodes {
		nw.mu.Lock()
		fw, cur := n.net.fw, maps.Clone(n.net.blocked)
		nw.mu.Unlock()
		if fw == nil {
			continue
		}
		var block, reject, unblock []netip.Addr
		for src, mode := range want[n.name] {
			if cur[src] != mode {
				if mode == fault.ModeReset {
					reject = append(reject, nw.byName[src].addr)
				} else {
					block = append(block, nw.byName[src].addr)
				}
			}
		}
		for src := range cur {
			if _, ok := want[n.name][src]; !ok {
				unblock = append(unblock, nw.byName[src].addr)
			}
		}
		if err := fw.Unblock(unblock...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		if err := fw.Block(block...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		if err := fw.Reject(reject...); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		next := maps.Clone(want[n.name])
		if next == nil {
			next = map[string]fault.CutMode{}
		}
		nw.mu.Lock()
		n.net.blocked = next
		nw.mu.Unlock()
	}
	return nil
}

func (nw *network) ensureFirewall(n *labNode) error {
	nw.mu.Lock()
	have := n.net.fw != nil
	nw.mu.Unlock()
	if have {
		return nil
	}
	ns, err := nw.tb.NamespaceHandle(n.name)
	if err != nil {
		return err
	}
	fw, err := netem.NewFirewall(ns, nw.run)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	nw.mu.Lock()
	n.net.fw = fw
	nw.mu.Unlock()
	return nil
}

// closing returns the Impairers and Firewalls to close, for Close.
func (nw *network) closing() ([]*netem.Impairer, []*netem.Firewall) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var imps []*netem.Impairer
	var fws []*netem.Firewall
	for _, n := range nw.nodes {
		if n.net.imp != nil {
			imps = append(imps, n.net.imp)
		}
		if n.net.fw != nil {
			fws = append(fws, n.net.fw)
		}
	}
	return imps, fws
}
