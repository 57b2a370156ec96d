//go:build linux

package netem_test

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestBuild500 builds 500 nodes and checks the state that stays constant
// per node as N grows: the first and last nodes hold the gateway's
// neighbour entry alone, and the switch one permanent entry per node, with
// the node's MAC, on the node's port.
func TestBuild500(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 500 namespaces")
	}
	tb := netemtest.Star(t, 500)
	nodes := tb.Nodes()
	for _, nd := range []netem.StateNode{nodes[0], nodes[len(nodes)-1]} {
		neighs := listNeighbours(t, nd.Namespace)
		if len(neighs) != 1 || neighs[0].State != netlink.NUD_PERMANENT ||
			neighs[0].IP.String() != netem.SwitchGateway.String() || neighs[0].HardwareAddr.String() != netem.SwitchMAC.String() {
			t.Errorf("node %s: neighbours %v, want only %s at %s, permanent", nd.Name, neighs, netem.SwitchGateway, netem.SwitchMAC)
		}
	}
	sw := map[netip.Addr]netlink.Neigh{}
	for _, ne := range listNeighbours(t, netem.SwitchNamespace(tb.Run())) {
		a, _ := netip.AddrFromSlice(ne.IP.To4())
		sw[a] = ne
	}
	if len(sw) != len(nodes) {
		t.Errorf("switch: %d neighbour entries, want %d", len(sw), len(nodes))
	}
	for _, nd := range nodes {
		a := netip.MustParseAddr(nd.Addr)
		ne, ok := sw[a]
		if !ok || ne.State != netlink.NUD_PERMANENT || ne.HardwareAddr.String() != netem.NodeMAC(a).String() {
			t.Errorf("switch: entry for %s (%s) is %+v, want permanent at %s", nd.Name, a, ne, netem.NodeMAC(a))
			break
		}
	}
}

// listNeighbours returns the IPv4 neighbour entries of namespace ns.
func listNeighbours(t testing.TB, ns string) []netlink.Neigh {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	neighs, err := nh.NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		t.Fatalf("%s: listing neighbours: %v", ns, err)
	}
	return neighs
}

// meminfoKiB returns a field of /proc/meminfo in KiB.
func meminfoKiB(b *testing.B, field string) int64 {
	b.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("/proc/meminfo: %s: %v", field, err)
			}
			return v
		}
	}
	b.Fatalf("/proc/meminfo has no %s", field)
	return 0
}
