//go:build linux

package lab

import (
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// impair changes, with change, the links of nodes (no peers) or their
// pairs with each of peers, and checks what they then hold. It returns
// what the first node's link or first pair now gets, and a function that
// puts back what was, which it has called already if it returns an error.
func (nw *network) impair(nodes []*labNode, peerNames []string, change func(*fault.Impairment)) (fault.Impairment, func(), error) {
	type saved struct {
		link  fault.Impairment
		pairs map[string]fault.Impairment
	}
	old := map[*labNode]saved{}
	var rec fault.Impairment // what the first node's link or first pair now gets
	nw.mu.Lock()
	for i, n := range nodes {
		old[n] = saved{n.net.link, cloneImpairs(n.net.pairs)}
		if len(peerNames) == 0 {
			change(&n.net.link)
			if i == 0 {
				rec = n.net.link
			}
			continue
		}
		for j, p := range peerNames {
			imp := nw.pairImpairmentLocked(n, p)
			change(&imp)
			n.net.pairs[p] = imp
			if i == 0 && j == 0 {
				rec = imp
			}
		}
	}
	nw.mu.Unlock()
	restore := func() {
		nw.mu.Lock()
		for n, o := range old {
			n.net.link, n.net.pairs = o.link, o.pairs
		}
		nw.mu.Unlock()
	}
	if err := nw.validateImpairments(nodes); err != nil {
		restore()
		return fault.Impairment{}, nil, err
	}
	return rec, restore, nil
}

// validateImpairments checks what the nodes' links and pairs now hold.
func (nw *network) validateImpairments(nodes []*labNode) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, n := range nodes {
		if err := n.net.link.Validate(); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		for p, imp := range n.net.pairs {
			if err := imp.Validate(); err != nil {
				return fmt.Errorf("node %s to %s: %w", n.name, p, err)
			}
		}
	}
	return nil
}

// applyAll brings the nodes' Impairers, and every receiver's loss, in line
// with their links and pairs.
func (nw *network) applyAll(nodes []*labNode) error {
	for _, n := range nodes {
		if err := nw.applyImpairments(n); err != nil {
			return err
		}
	}
	return nw.applyLoss()
}

func cloneImpairs(m map[string]fault.Impairment) map[string]fault.Impairment {
	out := make(map[string]fault.Impairment, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// clear restores the topology's impairments on the nodes' links.
func (nw *network) clear(nodes []*labNode) error {
	for _, n := range nodes {
		tn, _ := nw.topo.Node(n.name)
		nw.mu.Lock()
		n.net.link = fromTopo(tn.Impair)
		clear(n.net.pairs)
		nw.mu.Unlock()
	}
	return nw.applyAll(nodes)
}

// clearPairs restores the topology's impairments of what each of nodes
// sends to each of peers: their pairs fall back on the node's own link,
// which must be the topology's.
func (nw *network) clearPairs(nodes []*labNode, peers []string) error {
	nw.mu.Lock()
	for _, n := range nodes {
		tn, _ := nw.topo.Node(n.name)
		if n.net.link != fromTopo(tn.Impair) {
			nw.mu.Unlock()
			return fmt.Errorf("what %s sends to everyone is impaired (%s): clear %s restores it, a pair of it cannot be exempt", n.name, n.net.link, n.name)
		}
	}
	for _, n := range nodes {
		for _, p := range peers {
			delete(n.net.pairs, p)
		}
	}
	nw.mu.Unlock()
	return nw.applyAll(nodes)
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
// own link, else n's own link. nw.mu must be held.
func (nw *network) pairImpairmentLocked(n *labNode, peer string) fault.Impairment {
	if imp, ok := n.net.pairs[peer]; ok {
		return imp
	}
	if pi, ok := nw.topo.PairImpair(n.name, peer); ok {
		return combine(n.net.link, fromTopo(pi))
	}
	return n.net.link
}

// wantedPairsLocked returns the per-peer impairments n's Impairer must hold.
// nw.mu must be held.
func (nw *network) wantedPairsLocked(n *labNode) map[netip.Addr]fault.Impairment {
	out := map[netip.Addr]fault.Impairment{}
	for _, pi := range nw.topo.PairImpairs {
		peer := pi.B
		if pi.B == n.name {
			peer = pi.A
		} else if pi.A != n.name {
			continue
		}
		out[nw.byName[peer].addr] = nw.pairImpairmentLocked(n, peer)
	}
	for peer, imp := range n.net.pairs {
		out[nw.byName[peer].addr] = imp
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

// applyImpairments brings n's Impairer in line with n.net.link and n.net.pairs,
// creating it on first need: a lab that never impairs a node costs that
// node nothing. Loss is left out: the receivers apply it (applyLoss).
func (nw *network) applyImpairments(n *labNode) error {
	if n.host != "" {
		return nil // its own host's lab impairs what it sends
	}
	nw.mu.Lock()
	link, pairs, imp := withoutLoss(n.net.link), nw.wantedPairsLocked(n), n.net.imp
	nw.mu.Unlock()
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
		ns, err := nw.tb.NamespaceHandle(n.name)
		if err != nil {
			return err
		}
		if imp, err = netem.NewImpairer(ns, nw.run, netem.NodeVeth, netem.ImpairerOptions{Backend: nw.forcedBackend, TCPTimestampUnit: nw.tb.TCPTimestampUnit()}); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
		nw.mu.Lock()
		n.net.imp = imp
		nw.mu.Unlock()
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
func (nw *network) applyLoss() error {
	for _, r := range nw.nodes {
		nw.mu.Lock()
		loss := map[netip.Addr]float64{}
		for _, s := range nw.all {
			if s == r {
				continue
			}
			if p := nw.pairImpairmentLocked(s, r.name).Loss; p > 0 {
				loss[s.addr] = p
			}
		}
		fw := r.net.fw
		nw.mu.Unlock()
		if fw == nil && len(loss) == 0 {
			continue
		}
		if err := nw.ensureFirewall(r); err != nil {
			return err
		}
		nw.mu.Lock()
		fw = r.net.fw
		nw.mu.Unlock()
		if err := fw.SetLoss(loss); err != nil {
			return fmt.Errorf("node %s: %w", r.name, err)
		}
	}
	return nil
}

// lossy is Faults.Lossy.
func (nw *network) lossy() bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, s := range nw.all {
		for _, r := range nw.all {
			if s != r && nw.pairImpairmentLocked(s, r.name).Loss > 0 {
				return true
			}
		}
	}
	return false
}

// maxDelay is Faults.MaxDelay.
func (nw *network) maxDelay() time.Duration {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var d time.Duration
	for _, s := range nw.all {
		for _, r := range nw.all {
			if s != r {
				imp := nw.pairImpairmentLocked(s, r.name)
				d = max(d, imp.Delay+imp.Jitter)
			}
		}
	}
	return d
}

// describeLocked renders what n's link does, e.g. "delay 50ms; to n4:
// delay 80ms". nw.mu must be held.
func (nw *network) describeLocked(n *labNode) string {
	pairs := nw.wantedPairsLocked(n)
	if n.net.link.IsZero() && len(pairs) == 0 {
		return ""
	}
	var parts []string
	if !n.net.link.IsZero() {
		parts = append(parts, n.net.link.String())
	}
	// Peers with the same impairment share one entry.
	byImp := map[fault.Impairment][]string{}
	var order []fault.Impairment
	for _, p := range nw.all {
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

// backend is Faults.Backend.
func (nw *network) backend() (name, why string) {
	nw.mu.Lock()
	for _, n := range nw.nodes {
		if n.net.imp != nil {
			nw.mu.Unlock()
			return n.net.imp.Backend(), n.net.imp.Why()
		}
	}
	nw.mu.Unlock()
	if nw.forcedBackend != "" {
		return nw.forcedBackend, "forced by the caller"
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

// delayerStats is Faults.DelayerStats.
func (nw *network) delayerStats() map[string]netem.DelayerStats {
	nw.mu.Lock()
	imps := map[string]*netem.Impairer{}
	for _, n := range nw.nodes {
		if n.net.imp != nil {
			imps[n.name] = n.net.imp
		}
	}
	nw.mu.Unlock()
	out := make(map[string]netem.DelayerStats, len(imps))
	for name, im := range imps {
		out[name] = im.Stats()
	}
	return out
}
