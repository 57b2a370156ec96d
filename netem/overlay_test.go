package netem_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
	"github.com/bullylab/bullylab/topologies"
)

// Two stand-in hosts' switches joined by the overlay reach each other over
// the hosts' network: a TCP connection crosses from one to the other.
func TestOverlay(t *testing.T) {
	hs := remotetest.Start(t, 2)
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
			Name: fmt.Sprintf("%sx%d", hs.Run, i+1), VNI: 4242,
			Local: hs.Underlay[i], Remotes: []netip.Addr{hs.Underlay[1-i]}, Addr: addr,
		}
		// Flooded to the one other host, as a peer without a MAC.
		if err := netem.AddOverlay(hs.Namespaces[i], sw, o); err != nil {
			t.Fatal(err)
		}
	}
	ln := listenIn(t, hs.Run+"-s2", addrs[1].Addr())
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c := dialIn(t, hs.Run+"-s1", netip.AddrPortFrom(addrs[1].Addr(), uint16(ln.Addr().(*net.TCPAddr).Port)))
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
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

// listenIn listens on addr, port 0, in namespace ns.
func listenIn(t *testing.T, ns string, addr netip.Addr) net.Listener {
	t.Helper()
	fd := socketIn(t, ns)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: addr.As4()}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 8); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// dialIn connects to ap from namespace ns.
func dialIn(t *testing.T, ns string, ap netip.AddrPort) net.Conn {
	t.Helper()
	fd := socketIn(t, ns)
	tv := unix.Timeval{Sec: 5}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		unix.Close(fd)
		t.Fatalf("connecting to %s from %s across the overlay: %v", ap, ns, err)
	}
	f := os.NewFile(uintptr(fd), "conn")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func socketIn(t *testing.T, ns string) int {
	t.Helper()
	socket, release, err := netem.NamespaceSocket(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	fd, err := socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// A topology split over two stand-in hosts, each building its share and
// joining the overlay, is one network: a node on one host connects to a
// node on the other at its address in the topology.
func TestOverlayShares(t *testing.T) {
	hs := remotetest.Start(t, 2)
	topo, err := topologies.Parse("two-hosts.yaml", []byte("nodes: 4\nhosts: [{name: a, ssh: 192.0.2.1}, {name: b, ssh: 192.0.2.2}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	overlayAddr := func(k int) netip.Addr { return netip.AddrFrom4([4]byte{169, 254, 1, byte(k + 1)}) }
	mac := func(k int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x76, 0, 0, 0, byte(k + 1)} }
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
			Addr: netip.PrefixFrom(overlayAddr(k), 24), MAC: mac(k),
			Peers: []netem.OverlayPeer{{Underlay: hs.Underlay[other], Addr: overlayAddr(other), MAC: mac(other)}},
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
	ln := listenIn(t, netem.NodeNamespace(runs[1], "n2"), n2.Addr)
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != n1.Addr.String() {
				err = fmt.Errorf("connection from %s, want n1's %s", got, n1.Addr)
			}
			c.Close()
		}
		accepted <- err
	}()
	c := dialIn(t, netem.NodeNamespace(runs[0], "n1"), netip.AddrPortFrom(n2.Addr, uint16(ln.Addr().(*net.TCPAddr).Port)))
	c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}
