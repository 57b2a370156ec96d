//go:build linux

package netem_test

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
	"github.com/bullylab/bullylab/topologies"
)

// Two stand-in hosts' switches joined by the overlay reach each other over
// the hosts' network: a TCP connection crosses from one to the other.
func TestOverlay(t *testing.T) {
	hs := remotetest.StartHosts(t, 2)
	var addrs []netip.Prefix
	for i := range hs.Hosts {
		sw := fmt.Sprintf("%s-s%d", hs.Run, i+1)
		if out, err := exec.Command("ip", "netns", "add", sw).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", sw, err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", sw).Run() })
		addr := netip.MustParsePrefix(fmt.Sprintf("10.251.0.%d/24", i+1))
		addrs = append(addrs, addr)
		o := netem.Overlay{
			Name: fmt.Sprintf("%sx%d", hs.Run, i+1), VNI: 4242, Local: hs.Underlay[i], Addr: addr, MAC: overlayMAC(i),
			Peers: []netem.OverlayPeer{{Underlay: hs.Underlay[1-i], Addr: netip.MustParseAddr(fmt.Sprintf("10.251.0.%d", 2-i)), MAC: overlayMAC(1 - i)}},
		}
		if err := netem.AddOverlay(hs.Namespaces[i], sw, o); err != nil {
			t.Fatal(err)
		}
	}
	remotetest.Connect(t, hs.Run+"-s1", hs.Run+"-s2", addrs[1].Addr())
	// Nothing is left in the hosts' own namespaces: the devices moved.
	for _, ns := range hs.Namespaces {
		out, _ := exec.Command("ip", "-n", ns, "-o", "link", "show", "type", "vxlan").CombinedOutput()
		if strings.TrimSpace(string(out)) != "" {
			t.Errorf("vxlan devices left in %s: %s", ns, out)
		}
	}
	if err := netem.AddOverlay(hs.Namespaces[0], hs.Run+"-s1", netem.Overlay{Name: "x", VNI: 1 << 24, Local: hs.Underlay[0]}); err == nil || !strings.Contains(err.Error(), "VNI 16777216 is not 1..16777215") {
		t.Errorf("VNI out of range: %v", err)
	}
}

// A topology split over two stand-in hosts, each building its share and
// joining the overlay, is one network: a node on one host connects to a
// node on the other at its address in the topology.
func TestOverlayShares(t *testing.T) {
	hs := remotetest.StartHosts(t, 2)
	topo, err := topologies.Parse("two-hosts.yaml", []byte("nodes: 4\nhosts: [{name: a, ssh: 192.0.2.1}, {name: b, ssh: 192.0.2.2}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	overlayAddr := func(k int) netip.Addr { return netip.AddrFrom4([4]byte{169, 254, 1, byte(k + 1)}) }
	runs := []string{hs.Run + "a", hs.Run + "b"}
	for k, h := range topo.Hosts {
		share, err := topo.Share(h.Name)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := netem.Build(t.Context(), share, runs[k])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := tb.Close(); err != nil {
				t.Errorf("closing %s: %v", runs[k], err)
			}
		})
		other := 1 - k
		var remote []netem.RemoteNode
		for _, n := range topo.Nodes {
			if n.Host != h.Name {
				remote = append(remote, netem.RemoteNode{Addr: n.Addr, Via: overlayAddr(other)})
			}
		}
		o := netem.Overlay{
			Name: runs[k] + "vx", VNI: 77, Local: hs.Underlay[k],
			Addr: netip.PrefixFrom(overlayAddr(k), 24), MAC: overlayMAC(k),
			Peers: []netem.OverlayPeer{{Underlay: hs.Underlay[other], Addr: overlayAddr(other), MAC: overlayMAC(other)}},
		}
		if err := tb.JoinOverlay(hs.Namespaces[k], o, remote); err != nil {
			t.Fatal(err)
		}
	}
	n1, _ := topo.Node("n1")
	n2, _ := topo.Node("n2")
	if n1.Host == n2.Host {
		t.Fatalf("n1 and n2 both on %s", n1.Host)
	}
	remotetest.Connect(t, netem.NodeNamespace(runs[0], "n1"), netem.NodeNamespace(runs[1], "n2"), n2.Addr)
}

// overlayMAC is stand-in host k's overlay device's MAC.
func overlayMAC(k int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x76, 0, 0, 0, byte(k + 1)} }
