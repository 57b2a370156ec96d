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

// BenchmarkScale builds stars of 100 to 1000 nodes (namespaces and links,
// no processes) with the bridge (Build) and the routed switch
// (BuildRouted) in turn, and reports per build: ms/build, ms/teardown,
// slab-KiB/node (the growth of Slab in /proc/meminfo over the build, per
// node; other work on the machine adds noise), neigh/node (IPv4 neighbour
// entries in the node namespaces, per node) and neigh-switch (in the
// switch namespace). Run it with -benchtime=1x: a 1000-node bridge holds a
// million neighbour entries.
func BenchmarkScale(b *testing.B) {
	const settle = 2 * time.Second
	for _, n := range []int{100, 250, 500, 1000} {
		for _, design := range []string{"bridge", "routed"} {
			b.Run(fmt.Sprintf("%s/%d", design, n), func(b *testing.B) {
				netemtest.RequireRoot(b)
				topo, err := topologies.Star(n)
				if err != nil {
					b.Fatal(err)
				}
				build := netem.Build
				if design == "routed" {
					build = netem.BuildRouted
				}
				var built, torn time.Duration
				var slab, neigh, swNeigh float64
				for range b.N {
					time.Sleep(settle) // the kernel frees the last run's namespaces asynchronously
					run := netemtest.RunID(b)
					before := meminfoKiB(b, "Slab")
					start := time.Now()
					tb, err := build(b.Context(), topo, run)
					if err != nil {
						b.Fatal(err)
					}
					built += time.Since(start)
					slab += float64(meminfoKiB(b, "Slab")-before) / float64(n)
					for _, nd := range tb.Nodes() {
						neigh += float64(countNeighbours(b, nd.Namespace)) / float64(n)
					}
					swNeigh += float64(countNeighbours(b, netem.SwitchNamespace(run)))
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

// countNeighbours returns how many IPv4 neighbour entries namespace ns
// holds, as `ip -n NS neigh | wc -l` would count them.
func countNeighbours(b *testing.B, ns string) int {
	b.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		b.Fatal(err)
	}
	defer nh.Close()
	neighs, err := nh.NeighList(0, netlink.FAMILY_V4)
	if err != nil {
		b.Fatalf("%s: listing neighbours: %v", ns, err)
	}
	return len(neighs)
}
