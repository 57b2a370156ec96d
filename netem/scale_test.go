package netem_test

import (
	"net/netip"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestBuild500 builds 500 nodes, whose 499 neighbour entries each once
// overflowed the receive buffer of the socket that added them in one
// batch, and checks that the first and last nodes have every peer's.
func TestBuild500(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 500 namespaces")
	}
	tb := netemtest.Star(t, 500)
	nodes := tb.Nodes()
	for _, nd := range []netem.StateNode{nodes[0], nodes[len(nodes)-1]} {
		ns, err := netns.GetFromName(nd.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		nh, err := netlink.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		eth0, err := nh.LinkByName(netem.NodeVeth)
		if err != nil {
			nh.Close()
			t.Fatalf("node %s: %v", nd.Name, err)
		}
		neighs, err := nh.NeighList(eth0.Attrs().Index, netlink.FAMILY_V4)
		nh.Close()
		if err != nil {
			t.Fatalf("node %s: listing neighbours: %v", nd.Name, err)
		}
		perm := map[netip.Addr]bool{}
		for _, ne := range neighs {
			a, _ := netip.AddrFromSlice(ne.IP.To4())
			if ne.State == netlink.NUD_PERMANENT && ne.HardwareAddr.String() == netem.NodeMAC(a).String() {
				perm[a] = true
			}
		}
		for _, p := range nodes {
			if a := netip.MustParseAddr(p.Addr); p.Name != nd.Name && !perm[a] {
				t.Errorf("node %s: no permanent neighbour entry for %s (%s); %d of %d", nd.Name, p.Name, a, len(perm), len(nodes)-1)
				break
			}
		}
	}
}
