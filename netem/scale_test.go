package netem_test

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
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

// BenchmarkScale builds stars of 100 to 1000 nodes (namespaces and links,
// no processes) and reports per build: ms/build, ms/teardown,
// slab-KiB/node (the growth of Slab in /proc/meminfo over the build, per
// node; other work on the machine adds noise), neigh/node (IPv4 neighbour
// entries in the node namespaces, per node) and neigh-switch (in the
// switch namespace). Run it with -benchtime=1x. doc.go keeps what it
// measured when it also built the bridge the switch replaced.
func BenchmarkScale(b *testing.B) {
	const settle = 2 * time.Second
	for _, n := range []int{100, 250, 500, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			netemtest.RequireRoot(b)
			netemtest.SkipAboveMaxNodes(b, n)
			topo, err := topologies.Star(n)
			if err != nil {
				b.Fatal(err)
			}
			var built, torn time.Duration
			var slab, neigh, swNeigh float64
			for range b.N {
				time.Sleep(settle) // the kernel frees the last run's namespaces asynchronously
				run := netemtest.RunID(b)
				before := meminfoKiB(b, "Slab")
				start := time.Now()
				tb, err := netem.Build(b.Context(), topo, run)
				if err != nil {
					b.Fatal(err)
				}
				built += time.Since(start)
				slab += float64(meminfoKiB(b, "Slab")-before) / float64(n)
				for _, nd := range tb.Nodes() {
					neigh += float64(len(listNeighbours(b, nd.Namespace))) / float64(n)
				}
				swNeigh += float64(len(listNeighbours(b, netem.SwitchNamespace(run))))
				start = time.Now()
				if err := tb.Close(); err != nil {
					b.Fatal(err)
				}
				torn += time.Since(start)
				netemtest.RequireClean(b, run)
			}
			per := float64(b.N)
			b.ReportMetric(float64(built.Microseconds())/1e3/per, "ms/build")
			b.ReportMetric(float64(torn.Microseconds())/1e3/per, "ms/teardown")
			b.ReportMetric(slab/per, "slab-KiB/node")
			b.ReportMetric(neigh/per, "neigh/node")
			b.ReportMetric(swNeigh/per, "neigh-switch")
		})
	}
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
