package remote

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies"
)

// shareBuildTimeout bounds building a host's share.
const shareBuildTimeout = 5 * time.Minute

// HostShares builds this host's share of a testbed with netem, one at a
// time: an agent serves one controller.
type HostShares struct {
	mu sync.Mutex
	tb *netem.Testbed
}

var _ Shares = (*HostShares)(nil)

// Build builds r's share: the host's nodes as netem builds any topology,
// its switch joined to the other hosts' by the overlay, and a route to
// every node of another host through that host's switch.
func (s *HostShares) Build(r ShareRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tb != nil {
		return fmt.Errorf("share %s is built already", s.tb.Run())
	}
	topo, err := topologies.Parse(r.Source, r.Topology)
	if err != nil {
		return err
	}
	k := slices.IndexFunc(topo.Hosts, func(h topologies.Host) bool { return h.Name == r.Host })
	if k < 0 {
		return fmt.Errorf("topology %s has no host %q", topo.Name, r.Host)
	}
	if len(r.Switches) != len(topo.Hosts) {
		return fmt.Errorf("%d overlay switches for %d hosts", len(r.Switches), len(topo.Hosts))
	}
	switches, err := parseSwitches(r.Switches)
	if err != nil {
		return err
	}
	share, err := topo.Share(r.Host)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareBuildTimeout)
	defer cancel()
	tb, err := netem.Build(ctx, share, r.Run)
	if err != nil {
		return err
	}
	o := netem.Overlay{Name: r.Run + "vx", VNI: r.VNI, Port: r.Port,
		Local: switches[k].Underlay, Addr: netip.PrefixFrom(switches[k].Addr, OverlayBits), MAC: switches[k].MAC}
	for j, sw := range switches {
		if j != k {
			o.Peers = append(o.Peers, sw)
		}
	}
	var remote []netem.RemoteNode
	for _, n := range topo.Nodes {
		if n.Host != r.Host {
			j := slices.IndexFunc(topo.Hosts, func(h topologies.Host) bool { return h.Name == n.Host })
			remote = append(remote, netem.RemoteNode{Addr: n.Addr, Via: switches[j].Addr})
		}
	}
	if err := tb.JoinOverlay("", o, remote); err != nil {
		tb.Close()
		return err
	}
	s.tb = tb
	return nil
}

func parseSwitches(in []OverlaySwitch) ([]netem.OverlayPeer, error) {
	out := make([]netem.OverlayPeer, len(in))
	for i, sw := range in {
		u, err := netip.ParseAddr(sw.Underlay)
		if err != nil {
			return nil, fmt.Errorf("switch %d: underlay: %w", i+1, err)
		}
		a, err := netip.ParseAddr(sw.Addr)
		if err != nil {
			return nil, fmt.Errorf("switch %d: overlay address: %w", i+1, err)
		}
		mac, err := net.ParseMAC(sw.MAC)
		if err != nil {
			return nil, fmt.Errorf("switch %d: %w", i+1, err)
		}
		out[i] = netem.OverlayPeer{Underlay: u, Addr: a, MAC: mac}
	}
	return out, nil
}

// Down tears the share down, if there is one.
func (s *HostShares) Down() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tb == nil {
		return nil
	}
	err := s.tb.Close()
	s.tb = nil
	return err
}
