//go:build linux

package lab

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies/fault"
)

// nodeNet is what faults made of a node's network.
type nodeNet struct {
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

// network keeps a lab's network as partitions, isolation and impairments
// leave it: the receivers' Firewalls, which drop what is cut or lost, and
// the senders' Impairers, which delay what they send.
type network struct {
	*roster
	tb            *netem.Testbed
	forcedBackend string // BootOptions.Backend

	mu sync.Mutex // guards cut and every node's net
	// cut is the partition in force: receiver -> sources it drops.
	cut map[string]map[string]bool
}

// isolate isolates nodes, or reconnects them, and puts back what was if it
// cannot.
func (nw *network) isolate(nodes []*labNode, isolate bool) error {
	nw.mu.Lock()
	was := map[*labNode]bool{}
	for _, n := range nodes {
		was[n] = n.net.isolated
		n.net.isolated = isolate
	}
	nw.mu.Unlock()
	if err := nw.setBlocked(nw.wantBlocked()); err != nil {
		nw.mu.Lock()
		for n, w := range was {
			n.net.isolated = w
		}
		nw.mu.Unlock()
		return err
	}
	return nil
}

// partition replaces the partition in force with want (receiver ->
// sources it drops), and puts back what was if it cannot.
func (nw *network) partition(want map[string]map[string]bool) error {
	nw.mu.Lock()
	old := nw.cut
	nw.cut = want
	nw.mu.Unlock()
	if err := nw.setBlocked(nw.wantBlocked()); err != nil {
		nw.mu.Lock()
		nw.cut = old
		nw.mu.Unlock()
		return err
	}
	return nil
}

// heal removes the partition and every isolation, and returns the nodes
// that were cut.
func (nw *network) heal() ([]string, error) {
	var healed []string
	nw.mu.Lock()
	for _, n := range nw.nodes {
		if len(n.net.blocked) > 0 || n.net.isolated {
			healed = append(healed, n.name)
		}
		n.net.isolated = false
	}
	nw.cut = nil
	nw.mu.Unlock()
	return healed, nw.setBlocked(nil)
}

// wantBlocked returns, per receiver, the sources its Firewall must drop:
// the partition's cut, and every packet to or from an isolated node.
func (nw *network) wantBlocked() map[string]map[string]bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	want := map[string]map[string]bool{}
	add := func(rcv, src string) {
		if want[rcv] == nil {
			want[rcv] = map[string]bool{}
		}
		want[rcv][src] = true
	}
	for rcv, srcs := range nw.cut {
		for src := range srcs {
			add(rcv, src)
		}
	}
	for _, a := range nw.nodes {
		if !a.net.isolated {
			continue
		}
		for _, b := range nw.nodes {
			if a != b {
				add(a.name, b.name)
				add(b.name, a.name)
			}
		}
	}
	return want
}

// setBlocked makes every node drop exactly the sources want gives it. All
// Firewalls needed are created first, so that the cut itself is a quick
// series of set updates.
func (nw *network) setBlocked(want map[string]map[string]bool) error {
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
		fw, cur := n.net.fw, cloneSet(n.net.blocked)
		nw.mu.Unlock()
		if fw == nil {
			continue
		}
		var block, unblock []netip.Addr
		for src := range want[n.name] {
			if !cur[src] {
				block = append(block, nw.byName[src].addr)
			}
		}
		for src := range cur {
			if !want[n.name][src] {
				unblock = append(unblock, nw.byName[src].addr)
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
		nw.mu.Lock()
		n.net.blocked = next
		nw.mu.Unlock()
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
