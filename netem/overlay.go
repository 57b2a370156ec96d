//go:build linux

package netem

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Overlay joins a testbed's switch on one host to its switches on the
// other hosts: a VXLAN device (RFC 7348) made in the host's own namespace,
// so that its UDP socket rides the hosts' network, then moved into the
// switch namespace, as containerlab's vxlan-stitch and Docker's overlay
// networks do; nothing needs multicast on the hosts' network. As on one
// host, every address is known in advance: each peer switch's device has
// a permanent forwarding entry (its MAC at its host) and a permanent
// neighbour entry (its overlay address at that MAC), so nothing is
// flooded or learned.
type Overlay struct {
	// Name is the device's name, with the run's prefix.
	Name string
	// VNI is the testbed's VXLAN network identifier, 1..2^24-1, the same
	// on every host.
	VNI uint32
	// Port is the UDP port on every host; 0 is IANA's 4789.
	Port int
	// Local is this host's address on the hosts' network.
	Local netip.Addr
	// Peers are the switches of the other hosts.
	Peers []OverlayPeer
	// Addr, when valid, is the switch's own address on the overlay, and
	// MAC, when set, its device's.
	Addr netip.Prefix
	MAC  net.HardwareAddr
}

// OverlayPeer is another host's switch on the overlay.
type OverlayPeer struct {
	Underlay netip.Addr // its host's address on the hosts' network
	Addr     netip.Addr // its address on the overlay
	MAC      net.HardwareAddr
}

// DefaultVXLANPort is IANA's VXLAN port.
const DefaultVXLANPort = 4789

// maxVNI is the largest 24-bit VXLAN network identifier.
const maxVNI = 1<<24 - 1

func (o Overlay) validate() error {
	switch {
	case o.Name == "" || len(o.Name) > unix.IFNAMSIZ-1:
		return fmt.Errorf("overlay device name %q: want 1..%d bytes", o.Name, unix.IFNAMSIZ-1)
	case o.VNI < 1 || o.VNI > maxVNI:
		return fmt.Errorf("overlay %s: VNI %d is not 1..%d", o.Name, o.VNI, maxVNI)
	case o.Port < 0 || o.Port > 65535:
		return fmt.Errorf("overlay %s: port %d is not 1..65535", o.Name, o.Port)
	case !o.Local.IsValid():
		return fmt.Errorf("overlay %s: no local underlay address", o.Name)
	}
	for _, p := range o.Peers {
		if len(p.MAC) != 6 || !p.Addr.IsValid() {
			return fmt.Errorf("overlay %s: peer at %s needs a MAC and an overlay address", o.Name, p.Underlay)
		}
		if r := p.Underlay; !r.IsValid() || r == o.Local || r.Is4() != o.Local.Is4() {
			return fmt.Errorf("overlay %s: remote %s is not another host's address of the family of %s", o.Name, r, o.Local)
		}
	}
	return nil
}

// AddOverlay makes o's device in namespace underlay ("" for this
// process's own), moves it into namespace sw, addresses it and brings it
// up there, and adds a forwarding entry for each remote. A kernel without
// VXLAN yields an error wrapping ErrNotSupported.
func AddOverlay(underlay, sw string, o Overlay) error {
	if err := o.validate(); err != nil {
		return err
	}
	port := o.Port
	if port == 0 {
		port = DefaultVXLANPort
	}
	under, err := handleIn(underlay)
	if err != nil {
		return err
	}
	defer under.Close()
	swNS, err := netns.GetFromName(sw)
	if err != nil {
		return fmt.Errorf("overlay %s: namespace %s: %w", o.Name, sw, err)
	}
	defer swNS.Close()
	vx := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: o.Name, HardwareAddr: o.MAC},
		VxlanId:   int(o.VNI),
		SrcAddr:   net.IP(o.Local.AsSlice()),
		Port:      port,
		// Addresses come from the forwarding entries below, not from
		// what arrives: a host cannot be talked into sending a switch's
		// frames elsewhere.
		Learning: false,
	}
	if err := under.LinkAdd(vx); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("overlay %s: %w: %w (no vxlan module)", o.Name, ErrNotSupported, err)
		}
		return fmt.Errorf("overlay %s: %w", o.Name, classify(err))
	}
	link, err := under.LinkByName(o.Name)
	if err == nil {
		err = under.LinkSetNsFd(link, int(swNS))
	}
	if err != nil {
		under.LinkDel(vx)
		return fmt.Errorf("overlay %s: moving it into %s: %w", o.Name, sw, err)
	}
	h, err := netlink.NewHandleAt(swNS)
	if err != nil {
		return fmt.Errorf("overlay %s: %w", o.Name, err)
	}
	defer h.Close()
	if err := o.configure(h); err != nil {
		if l, lerr := h.LinkByName(o.Name); lerr == nil {
			h.LinkDel(l)
		}
		return err
	}
	return nil
}

// configure addresses the device in the switch's namespace through h,
// adds its forwarding entries and brings it up.
func (o Overlay) configure(h *netlink.Handle) error {
	link, err := h.LinkByName(o.Name)
	if err != nil {
		return fmt.Errorf("overlay %s: %w", o.Name, err)
	}
	if o.Addr.IsValid() {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(o.Addr.Addr().AsSlice()), Mask: net.CIDRMask(o.Addr.Bits(), o.Addr.Addr().BitLen())}}
		if err := h.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("overlay %s: address %s: %w", o.Name, o.Addr, err)
		}
	}
	index := link.Attrs().Index
	for _, p := range o.Peers {
		fdb := &netlink.Neigh{LinkIndex: index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT | netlink.NUD_NOARP, IP: net.IP(p.Underlay.AsSlice()), HardwareAddr: p.MAC}
		if err := h.NeighAppend(fdb); err != nil {
			return fmt.Errorf("overlay %s: forwarding entry for host %s: %w", o.Name, p.Underlay, err)
		}
		ne := &netlink.Neigh{LinkIndex: index, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
			IP: net.IP(p.Addr.AsSlice()), HardwareAddr: p.MAC}
		if err := h.NeighSet(ne); err != nil {
			return fmt.Errorf("overlay %s: neighbour entry for %s: %w", o.Name, p.Addr, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("overlay %s: %w", o.Name, err)
	}
	return nil
}

// handleIn returns a netlink handle in the named namespace, or in this
// process's own for "".
func handleIn(name string) (*netlink.Handle, error) {
	if name == "" {
		return netlink.NewHandle()
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", name, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}

// RemoteNode is a node of another host, reached through that host's
// switch on the overlay.
type RemoteNode struct {
	Addr netip.Addr // the node's address in the topology's subnet
	Via  netip.Addr // its host's switch's overlay address
}

// JoinOverlay joins the switch of tb, the share of a topology that one
// host builds (topologies.Topology.Share), to the other hosts' switches
// through o (see AddOverlay; underlay is the namespace of the hosts'
// network, "" for this process's) and routes each remote node through its
// host's switch. The nodes' own routes stay as they are: through their
// switch, which now knows the remote nodes too.
func (tb *Testbed) JoinOverlay(underlay string, o Overlay, remote []RemoteNode) error {
	sw := SwitchNamespace(tb.run)
	if err := AddOverlay(underlay, sw, o); err != nil {
		return err
	}
	link, err := tb.sw.LinkByName(o.Name)
	if err != nil {
		return fmt.Errorf("overlay %s: %w", o.Name, err)
	}
	for _, r := range remote {
		route := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       &net.IPNet{IP: net.IP(r.Addr.AsSlice()), Mask: net.CIDRMask(32, 32)},
			Gw:        net.IP(r.Via.AsSlice()),
			Protocol:  unix.RTPROT_STATIC,
		}
		if err := tb.sw.RouteReplace(route); err != nil {
			return fmt.Errorf("overlay %s: route to %s via %s: %w", o.Name, r.Addr, r.Via, err)
		}
	}
	return nil
}
