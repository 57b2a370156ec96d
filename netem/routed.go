//go:build linux

package netem

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The switch namespace routes between the nodes rather than bridging
// them, which keeps each node's kernel state constant in N: the node has
// one neighbour entry, the switch's, and one route, the subnet via the
// switch. IPv4 forwarding is on in the switch namespace (a per-namespace
// sysctl: the host's is untouched), every switch-side veth carries the
// same MAC (SwitchMAC), and the switch holds one /32 route and one
// permanent neighbour entry per node, the O(N) state a switch needs
// anyway. No ARP is sent on the testbed at all. There is no bridge and so
// no limit of 1023 ports (doc.go has the measurements that chose this).
//
// A frame enters the switch on its sender's port, unchanged (the node's
// MAC as source), and leaves on the receiver's port as an outgoing frame,
// so the capture keeps exactly one copy, the incoming one on the sender's
// port. Partitions (nftables on source addresses at the receivers) and
// impairments (egress in the node namespaces) see the nodes' addresses,
// which the switch does not change. The frame the receiver gets has the
// switch's MAC as source and a TTL one lower. Frames to a node whose port
// is down meet a blackhole route for the subnet and are dropped silently,
// as a real network would, rather than answered with ICMP unreachable;
// and taking a switch port down (node isolation) deletes its route and
// neighbour entry, which SetNodeLink puts back when it brings the port up.

// SwitchMAC is the hardware address of every switch-side veth: locally administered, 02:73 ('s'), distinct from any NodeMAC
// (02:62).
var SwitchMAC = net.HardwareAddr{0x02, 0x73, 0, 0, 0, 1}

// SwitchGateway is the address through which the nodes reach their
// subnet. It is never configured on any interface: each node holds a
// permanent neighbour entry mapping it to SwitchMAC, and the route is
// on-link, so it only has to be outside the topology's subnet (Build
// checks).
var SwitchGateway = netip.MustParseAddr("169.254.0.1")

// RoutedSwitch is RunState.Switch of every run this version builds. An
// empty Switch is a run recorded by an older version, whose switch was a
// bridge: Attach refuses it, and Clean removes it by its namespaces.
const RoutedSwitch = "routed"

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

// addSwitchRoute gives the switch (sw) its route and permanent neighbour
// entry for the node at addr behind the switch-side veth ifindex.
func addSwitchRoute(sw *netlink.Handle, ifindex int, addr netip.Addr) error {
	ne := &netlink.Neigh{
		LinkIndex:    ifindex,
		Family:       unix.AF_INET,
		State:        netlink.NUD_PERMANENT,
		IP:           addr.AsSlice(),
		HardwareAddr: NodeMAC(addr),
	}
	if err := sw.NeighSet(ne); err != nil {
		return fmt.Errorf("neighbour entry for %s: %w", addr, err)
	}
	route := &netlink.Route{
		LinkIndex: ifindex,
		Dst:       &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)},
		Scope:     netlink.SCOPE_LINK,
		Protocol:  unix.RTPROT_STATIC,
	}
	if err := sw.RouteReplace(route); err != nil {
		return fmt.Errorf("route to %s: %w", addr, err)
	}
	return nil
}

// addSwitchBlackhole makes the switch (sw) drop, silently, what it has no
// node's route for: a node whose port is down. Without it the switch
// answered with ICMP unreachable and the sender's connect failed at once,
// where a real network is silent.
func addSwitchBlackhole(sw *netlink.Handle, subnet netip.Prefix) error {
	subnet = subnet.Masked()
	route := &netlink.Route{
		Dst:      &net.IPNet{IP: subnet.Addr().AsSlice(), Mask: net.CIDRMask(subnet.Bits(), 32)},
		Type:     unix.RTN_BLACKHOLE,
		Protocol: unix.RTPROT_STATIC,
		Table:    unix.RT_TABLE_MAIN,
	}
	if err := sw.RouteAdd(route); err != nil {
		return fmt.Errorf("blackhole route for %s: %w", subnet, err)
	}
	return nil
}

// gatewayNeighbour is a node's one neighbour entry, on its eth0 (ifindex):
// the switch's gateway at SwitchMAC, permanent, so the node never asks.
func gatewayNeighbour(ifindex int) *netlink.Neigh {
	return &netlink.Neigh{
		LinkIndex:    ifindex,
		Family:       unix.AF_INET,
		State:        netlink.NUD_PERMANENT,
		IP:           SwitchGateway.AsSlice(),
		HardwareAddr: SwitchMAC,
	}
}

// gatewayRoute is the subnet route of the node at addr on eth0 (ifindex):
// through the switch's gateway, on-link since no address of the node's
// covers the gateway.
func gatewayRoute(subnet netip.Prefix, ifindex int, addr netip.Addr) *netlink.Route {
	subnet = subnet.Masked()
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
