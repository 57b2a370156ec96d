package netem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/bullylab/bullylab/topologies"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A routed switch (BuildRouted, a prototype beside Build) keeps each
// node's kernel state constant in N: the node has one neighbour entry,
// the switch's, and one route, the subnet via the switch. The switch
// namespace has no bridge: IPv4 forwarding is on in it (a per-namespace
// sysctl), every switch-side veth carries the same MAC (SwitchMAC), and it
// holds one /32 route and one permanent neighbour entry per node, the
// O(N) state a switch needs anyway. Without a bridge there is no limit of
// 1023 ports.
//
// What stays as with the bridge: a frame enters the switch on its
// sender's port, unchanged (the node's MAC as source), and leaves on the
// receiver's port as an outgoing frame, so the capture's filter (not
// outgoing, not on the bridge device) still keeps exactly one copy on the
// sender's port. Partitions (nftables on source addresses at the
// receivers) and impairments (egress in the node namespaces) see the same
// addresses. What differs: the frame the receiver gets has the switch's
// MAC as source and a TTL one lower; frames to a node whose port is down
// meet a blackhole route for the subnet, dropped as silently as on a
// bridge rather than answered with ICMP unreachable; and taking a switch port down (node
// isolation) deletes its route and neighbour entry, which SetNodeLink puts
// back when it brings the port up.

// SwitchMAC is the hardware address of every switch-side veth of a routed
// switch: locally administered, 02:73 ('s'), distinct from any NodeMAC
// (02:62).
var SwitchMAC = net.HardwareAddr{0x02, 0x73, 0, 0, 0, 1}

// SwitchGateway is the address through which nodes of a routed switch
// reach their subnet. It is never configured on any interface: each node
// holds a permanent neighbour entry mapping it to SwitchMAC, and the
// route is on-link, so it only has to be outside every topology's subnet.
var SwitchGateway = netip.MustParseAddr("169.254.0.1")

// RoutedSwitch is RunState.Switch for a routed switch; "" is a bridge.
const RoutedSwitch = "routed"

// BuildRouted is Build with a routed switch instead of a bridge.
func BuildRouted(ctx context.Context, topo *topologies.Topology, run string) (*Testbed, error) {
	if topo != nil && topo.Subnet.Contains(SwitchGateway) {
		return nil, fmt.Errorf("build %s: topology %s: subnet %s holds the switch's gateway %s", run, topo.Name, topo.Subnet, SwitchGateway)
	}
	tb, err := newTestbed(topo, run, RoutedSwitch)
	if err != nil {
		return nil, err
	}
	if err := tb.Construct(ctx, nil, nil); err != nil {
		return nil, errors.Join(err, tb.Close())
	}
	return tb, nil
}

// routed reports whether the testbed's switch routes rather than bridges.
func (tb *Testbed) routed() bool { return tb.state.Switch == RoutedSwitch }

// routerSysctls turns the calling thread's namespace into a router:
// forwarding on, no reverse-path filter (a new namespace may inherit the
// host's), no ICMP redirects. Per namespace: the host's are untouched.
func routerSysctls() error {
	for _, f := range []struct{ path, value string }{
		{"/proc/sys/net/ipv4/ip_forward", "1"},
		{"/proc/sys/net/ipv4/conf/all/rp_filter", "0"},
		{"/proc/sys/net/ipv4/conf/default/rp_filter", "0"},
		{"/proc/sys/net/ipv4/conf/all/send_redirects", "0"},
		{"/proc/sys/net/ipv4/conf/default/send_redirects", "0"},
	} {
		if err := os.WriteFile(f.path, []byte(f.value), 0); err != nil {
			return err
		}
	}
	return nil
}

// addSwitchRoute gives a routed switch its route and permanent neighbour
// entry for node i on the switch-side veth ifindex.
func (tb *Testbed) addSwitchRoute(sw *netlink.Handle, i, ifindex int) error {
	sn := tb.state.Nodes[i]
	addr, err := netip.ParseAddr(sn.Addr)
	if err != nil {
		return fmt.Errorf("node %s: address %q: %w", sn.Name, sn.Addr, err)
	}
	ne := &netlink.Neigh{
		LinkIndex:    ifindex,
		Family:       unix.AF_INET,
		State:        netlink.NUD_PERMANENT,
		IP:           addr.AsSlice(),
		HardwareAddr: NodeMAC(addr),
	}
	if err := sw.NeighSet(ne); err != nil {
		return fmt.Errorf("node %s: neighbour entry on %s: %w", sn.Name, sn.SwitchVeth, err)
	}
	route := &netlink.Route{
		LinkIndex: ifindex,
		Dst:       &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Scope:     netlink.SCOPE_LINK,
		Protocol:  unix.RTPROT_STATIC,
	}
	if err := sw.RouteReplace(route); err != nil {
		return fmt.Errorf("node %s: route to %s on %s: %w", sn.Name, addr, sn.SwitchVeth, err)
	}
	return nil
}

// switchBlackhole makes a routed switch drop, silently, what it has no
// node's route for: a node whose port is down. Without it the switch
// answered with ICMP unreachable and the sender's connect failed at once,
// where a real network (and the bridge) is silent.
func (tb *Testbed) switchBlackhole() error {
	subnet := tb.topo.Subnet.Masked()
	route := &netlink.Route{
		Dst:      &net.IPNet{IP: subnet.Addr().AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)},
		Type:     unix.RTN_BLACKHOLE,
		Protocol: unix.RTPROT_STATIC,
		Table:    unix.RT_TABLE_MAIN,
	}
	if err := tb.sw.RouteAdd(route); err != nil {
		return fmt.Errorf("blackhole route for %s in %s: %w", subnet, SwitchNamespace(tb.run), err)
	}
	return nil
}

// gatewayRoute is the subnet route of a node behind a routed switch.
func (tb *Testbed) gatewayRoute(ifindex int, addr netip.Addr) *netlink.Route {
	subnet := tb.topo.Subnet.Masked()
	return &netlink.Route{
		LinkIndex: ifindex,
		Dst:       &net.IPNet{IP: subnet.Addr().AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)},
		Gw:        SwitchGateway.AsSlice(),
		Flags:     int(netlink.FLAG_ONLINK),
		Src:       addr.AsSlice(),
		Scope:     netlink.SCOPE_UNIVERSE,
		Protocol:  unix.RTPROT_STATIC,
		Table:     unix.RT_TABLE_MAIN,
		Type:      unix.RTN_UNICAST,
	}
}
