//go:build linux

package netem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The fault tests build their own small testbed (independent of Build,
// but wired as it wires, with routed.go's helpers): a switch namespace that
// routes and n node namespaces, each joined to it by a veth, addressed
// fixtureSubnet.x. Traffic never leaves these namespaces.

var fixtureSubnet = netip.MustParsePrefix("10.213.0.0/24")

type fixtureNode struct {
	name string
	ns   netns.NsHandle
	addr netip.Addr
}

type fixture struct {
	run   string
	nodes []*fixtureNode
}

// requireRoot skips the test when this process may not create
// network namespaces or the kernel has none, and fails it when creating
// one fails otherwise.
func requireRoot(t testing.TB) {
	t.Helper()
	ns, err := newScratchNS()
	if err != nil {
		requireAvailable(t, fmt.Errorf("creating a network namespace: %w", classify(err)))
		return
	}
	ns.Close()
}

// requireAvailable ends the test if err is not nil. It skips it, with a
// sentence naming what is missing, when err wraps ErrNotPermitted (the
// process is not root) or ErrNotSupported (the kernel lacks a feature),
// and fails it otherwise: a probe or helper that could not run is a
// failure, not a reason to skip. It is netemtest.RequireRoot's rule for
// this package's own tests, which cannot import netemtest.
func requireAvailable(t testing.TB, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, ErrNotPermitted):
		t.Skipf("fault tests need root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (euid %d): %v", os.Geteuid(), err)
	case errors.Is(err, ErrNotSupported):
		t.Skipf("the kernel lacks a feature this test needs: %v", err)
	default:
		t.Fatal(err)
	}
}

// probedCaps returns Probe's capabilities, or ends the test as
// requireAvailable does when the probe cannot run.
func probedCaps(t testing.TB) Capabilities {
	t.Helper()
	caps, err := Probe()
	requireAvailable(t, err)
	return caps
}

func newFaultsFixture(t testing.TB, n int) *fixture {
	t.Helper()
	requireRoot(t)
	f := &fixture{run: NewRunID()}
	swName := SwitchNamespace(f.run)
	var sw netns.NsHandle
	names := []string{swName}

	t.Cleanup(func() {
		for _, nd := range f.nodes {
			nd.ns.Close()
		}
		sw.Close()
		for _, name := range names {
			if err := netns.DeleteNamed(name); err != nil && !os.IsNotExist(err) {
				t.Errorf("deleting namespace %s: %v", name, err)
			}
		}
	})

	err := onLockedThread(func() error {
		var err error
		if sw, err = netns.NewNamed(swName); err != nil {
			return fmt.Errorf("switch namespace: %w", err)
		}
		// NewNamed left this thread in the switch namespace.
		if err := routerSysctls(); err != nil {
			return fmt.Errorf("switch namespace: %w", err)
		}
		for i := range n {
			node := fmt.Sprintf("n%03d", i+1)
			name := NodeNamespace(f.run, node)
			ns, err := netns.NewNamed(name)
			if err != nil {
				return fmt.Errorf("node namespace %s: %w", name, err)
			}
			names = append(names, name)
			a := fixtureSubnet.Addr().As4()
			a[3] = byte(i + 1)
			f.nodes = append(f.nodes, &fixtureNode{name: node, ns: ns, addr: netip.AddrFrom4(a)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	hsw, err := netlink.NewHandleAt(sw)
	if err != nil {
		t.Fatal(err)
	}
	defer hsw.Close()
	if err := addSwitchBlackhole(hsw, fixtureSubnet); err != nil {
		t.Fatal(err)
	}
	for i, nd := range f.nodes {
		// Creating the veth from the switch side with the peer placed
		// straight into the node namespace avoids a slow move later.
		v := &netlink.Veth{
			LinkAttrs:        netlink.LinkAttrs{Name: SwitchVeth(f.run, i+1), HardwareAddr: SwitchMAC},
			PeerName:         NodeVeth,
			PeerNamespace:    netlink.NsFd(nd.ns),
			PeerHardwareAddr: NodeMAC(nd.addr),
		}
		if err := hsw.LinkAdd(v); err != nil {
			t.Fatalf("adding veth for %s: %v", nd.name, err)
		}
		if err := hsw.LinkSetUp(v); err != nil {
			t.Fatal(err)
		}
		if err := addSwitchRoute(hsw, v.Index, nd.addr); err != nil {
			t.Fatalf("%s: %v", nd.name, err)
		}
		h, err := netlink.NewHandleAt(nd.ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, ifname := range []string{"lo", NodeVeth} {
			l, err := h.LinkByName(ifname)
			if err != nil {
				h.Close()
				t.Fatal(err)
			}
			if ifname == NodeVeth {
				addr := &netlink.Addr{IPNet: &net.IPNet{IP: nd.addr.AsSlice(), Mask: net.CIDRMask(fixtureSubnet.Bits(), 32)}}
				if err := h.AddrAdd(l, addr); err != nil {
					h.Close()
					t.Fatal(err)
				}
			}
			if err := h.LinkSetUp(l); err != nil {
				h.Close()
				t.Fatal(err)
			}
			if ifname == NodeVeth {
				if err := h.NeighSet(gatewayNeighbour(l.Attrs().Index)); err != nil {
					h.Close()
					t.Fatalf("%s: gateway neighbour: %v", nd.name, err)
				}
				if err := h.RouteReplace(gatewayRoute(fixtureSubnet, l.Attrs().Index, nd.addr)); err != nil {
					h.Close()
					t.Fatalf("%s: gateway route: %v", nd.name, err)
				}
			}
		}
		h.Close()
	}
	f.waitOperUp(t, hsw)
	return f
}

// waitOperUp waits until every veth end is operationally up. Carrier changes
// reach the device through linkwatch, which may defer them up to a second;
// until then the device transmits through the noop qdisc and drops, so the
// first ARP request vanishes and a UDP burst sent at once is lost whole.
func (f *fixture) waitOperUp(t testing.TB, hsw *netlink.Handle) {
	t.Helper()
	up := func(h *netlink.Handle, name string) bool {
		l, err := h.LinkByName(name)
		return err == nil && l.Attrs().OperState == netlink.OperUp
	}
	deadline := time.Now().Add(5 * time.Second)
	for i, nd := range f.nodes {
		h, err := netlink.NewHandleAt(nd.ns)
		if err != nil {
			t.Fatal(err)
		}
		for !up(h, NodeVeth) || !up(hsw, SwitchVeth(f.run, i+1)) {
			if time.Now().After(deadline) {
				h.Close()
				t.Fatalf("veth of %s not operationally up after 5 s", nd.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		h.Close()
	}
}

// ---- sockets inside namespaces ----

func listenTCP(t *testing.T, nd *fixtureNode) net.Listener {
	t.Helper()
	var ln net.Listener
	err := inNamespace(nd.ns, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(nd.addr, 0).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func dialTCP(t *testing.T, from *fixtureNode, to net.Addr) net.Conn {
	t.Helper()
	var c net.Conn
	err := inNamespace(from.ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", to.String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func udpConn(t testing.TB, nd *fixtureNode) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := inNamespace(nd.ns, func() (err error) {
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(nd.addr, 0)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// Force a big receive buffer (root may exceed rmem_max) so bursts are
	// not dropped by the socket, which would blur measured loss: with the
	// default, how many are depends on the host's rmem_default.
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
	}); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatalf("SO_RCVBUFFORCE: %v", serr)
	}
	return c
}

// tcpPair returns an established connection from a to b and b's end.
func tcpPair(t *testing.T, a, b *fixtureNode) (aEnd, bEnd net.Conn) {
	t.Helper()
	ln := listenTCP(t, b)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	aEnd = dialTCP(t, a, ln.Addr())
	bEnd, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { bEnd.Close() })
	return aEnd, bEnd
}

// rtt measures n TCP round trips of 16-byte messages from a to b and
// back (after a short warm-up), returning the sorted samples.
func measureRTT(t *testing.T, a, b *fixtureNode, n int) []time.Duration {
	t.Helper()
	aEnd, bEnd := tcpPair(t, a, b)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(bEnd, bEnd) // echo until a closes
	}()
	defer func() {
		aEnd.Close()
		wg.Wait()
	}()

	msg := make([]byte, 16)
	buf := make([]byte, 16)
	var out []time.Duration
	for i := range n + 3 {
		binary.BigEndian.PutUint64(msg, uint64(i))
		_ = aEnd.SetDeadline(time.Now().Add(10 * time.Second))
		start := time.Now()
		if _, err := aEnd.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(aEnd, buf); err != nil {
			t.Fatal(err)
		}
		if i >= 3 {
			out = append(out, time.Since(start))
		}
	}
	slices.Sort(out)
	return out
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

func msText(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// udpBurst sends n numbered datagrams from a to b and returns how many
// copies of each number arrived and, per arrival, the one-way time.
func udpBurst(t *testing.T, a, b *fixtureNode, n int) (copies map[uint32]int, oneWay []time.Duration) {
	t.Helper()
	src, dst := udpConn(t, a), udpConn(t, b)
	base := time.Now()
	type arrival struct {
		seq uint32
		d   time.Duration
	}
	got := make(chan []arrival, 1)
	go func() {
		var out []arrival
		buf := make([]byte, 64)
		for {
			// Stop once nothing has come for a while: long enough for any
			// delay the tests configure, short enough to keep tests quick.
			_ = dst.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			m, err := dst.Read(buf)
			if err != nil {
				got <- out
				return
			}
			if m >= 12 {
				sent := time.Duration(binary.BigEndian.Uint64(buf[4:12]))
				out = append(out, arrival{binary.BigEndian.Uint32(buf), time.Since(base) - sent})
			}
		}
	}()
	to := net.UDPAddrFromAddrPort(dst.LocalAddr().(*net.UDPAddr).AddrPort())
	msg := make([]byte, 64)
	for i := range n {
		binary.BigEndian.PutUint32(msg, uint32(i))
		binary.BigEndian.PutUint64(msg[4:], uint64(time.Since(base)))
		if _, err := src.WriteToUDP(msg, to); err != nil {
			t.Fatalf("send %d: %v (a sender must see no error)", i, err)
		}
	}
	copies = map[uint32]int{}
	for _, a := range <-got {
		copies[a.seq]++
		oneWay = append(oneWay, a.d)
	}
	return copies, oneWay
}

// nftTables lists the nftables tables of our run in nd's namespace.
func nftTables(t *testing.T, nd *fixtureNode, run string) []string {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(nd.ns)))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := conn.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tb := range tables {
		if tb.Name == NftTable(run) {
			out = append(out, tb.Name)
		}
	}
	return out
}

// boundQueues returns the NFQUEUE numbers bound in nd's namespace.
func boundQueues(t *testing.T, nd *fixtureNode) []string {
	t.Helper()
	var data []byte
	err := inNamespace(nd.ns, func() (err error) {
		// thread-self: /proc/net follows the reading thread's namespace.
		data, err = os.ReadFile("/proc/thread-self/net/netfilter/nfnetlink_queue")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// noLeak fails if goroutines started during the test outlive it.
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf[:runtime.Stack(buf, true)])
		}
	})
}
