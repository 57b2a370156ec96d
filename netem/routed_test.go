//go:build linux

package netem_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
	"github.com/google/uuid"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// cleanStar builds a star of n nodes and closes it when the test ends,
// checking that it left nothing behind.
func cleanStar(t *testing.T, n int) *netem.Testbed {
	t.Helper()
	netemtest.RequireRoot(t)
	topo, err := topologies.Star(n)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		run := netemtest.RunName(t)
		tb, err := netem.Build(t.Context(), topo, run)
		if errors.Is(err, netem.ErrRunExists) {
			continue
		}
		if err != nil {
			t.Fatalf("building %s: %v", topo.Name, err)
		}
		t.Cleanup(func() {
			if err := tb.Close(); err != nil {
				t.Errorf("tearing down %s: %v", run, err)
			}
			netemtest.RequireClean(t, run)
		})
		return tb
	}
	t.Fatal("building: every run ID drawn was taken")
	return nil
}

// TestSwitchRoutes checks that a node holds one neighbour entry whatever
// N, that TCP and isolation work through the switch, and that the switch
// routes to a node again once it is reconnected.
func TestSwitchRoutes(t *testing.T) {
	tb := cleanStar(t, 5)
	for _, nd := range tb.Nodes() {
		ns, err := netns.GetFromName(nd.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		nh, err := netlink.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		neighs, err := nh.NeighList(0, netlink.FAMILY_V4)
		nh.Close()
		if err != nil {
			t.Fatalf("node %s: listing neighbours: %v", nd.Name, err)
		}
		if len(neighs) != 1 || neighs[0].State != netlink.NUD_PERMANENT ||
			neighs[0].IP.String() != netem.SwitchGateway.String() || neighs[0].HardwareAddr.String() != netem.SwitchMAC.String() {
			t.Errorf("node %s: neighbours %v, want only %s at %s, permanent", nd.Name, neighs, netem.SwitchGateway, netem.SwitchMAC)
		}
	}
	testTCPBetweenNodes(t, tb)
	// Reconnected, n1 is reachable from every node: the switch's route
	// and neighbour entry for it are back.
	sw, err := netns.GetFromName(netem.SwitchNamespace(tb.Run()))
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	h, err := netlink.NewHandleAt(sw)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n1 := netip.MustParseAddr(tb.Nodes()[0].Addr)
	routes, err := h.RouteGet(n1.AsSlice())
	if err != nil || len(routes) != 1 {
		t.Fatalf("switch: route to n1 (%s): %v, %v", n1, routes, err)
	}
	if l, err := h.LinkByIndex(routes[0].LinkIndex); err != nil || l.Attrs().Name != tb.Nodes()[0].SwitchVeth {
		t.Errorf("switch: route to n1 leaves through %v (%v), want %s", l, err, tb.Nodes()[0].SwitchVeth)
	}
}

// TestSwitchCapture captures the switch as the lab does and checks that
// each frame is kept once, on the port of the node that sent it: the
// capture's filter drops the outgoing copy on the receiver's port.
func TestSwitchCapture(t *testing.T) {
	tb := cleanStar(t, 3)
	var nodes []capture.NodeInfo
	ports := map[int]capture.NodePort{}
	for _, sn := range tb.Nodes() {
		addr := netip.MustParseAddr(sn.Addr)
		nodes = append(nodes, capture.NodeInfo{Name: sn.Name, Index: sn.Index, ID: uuid.New(), Addr: addr, Port: tb.Topology().Port})
		ports[sn.Index] = capture.NodePort{Veth: sn.SwitchVeth, MAC: netem.NodeMAC(addr)}
	}
	var file bytes.Buffer
	w, err := capture.NewWriter(&file, capture.WriterOptions{Testbed: capture.TestbedInfo{Topology: tb.Topology().Name, Run: tb.Run(), Nodes: nodes}})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := netns.GetFromName(netem.SwitchNamespace(tb.Run()))
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	live, err := capture.StartLive(t.Context(), sw, ports, w)
	if err != nil {
		t.Fatal(err)
	}

	// n2 and n3 each send n1 lines it echoes.
	port := tb.Topology().Port
	var ln net.Listener
	tbInNode(t, tb, "n1", func() {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(tbAddr(t, tb, "n1"), uint16(port)).String())
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	const lines = 50
	for _, from := range []string{"n2", "n3"} {
		var c net.Conn
		tbInNode(t, tb, from, func() {
			c, err = net.DialTimeout("tcp", netip.AddrPortFrom(tbAddr(t, tb, "n1"), uint16(port)).String(), 2*time.Second)
		})
		if err != nil {
			t.Fatalf("%s -> n1: %v", from, err)
		}
		r := bufio.NewReader(c)
		for range lines {
			if _, err := c.Write([]byte("ping\n")); err != nil {
				t.Fatal(err)
			}
			if l, err := r.ReadString('\n'); err != nil || l != "ping\n" {
				t.Fatalf("%s: echo = %q, %v", from, l, err)
			}
		}
		c.Close()
	}
	st, err := live.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Drops != 0 || st.Unmatched != 0 || st.WrongSource != 0 {
		t.Errorf("capture counters: %+v", st)
	}

	rd, err := capture.NewReader(&file)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	payload := map[string]int{} // bytes of TCP payload by sending node
	for {
		p, err := rd.Next()
		if err != nil {
			break
		}
		if p.Record != nil || p.Iface.Events || len(p.Data) < 14+20 || p.Data[12] != 0x08 || p.Data[13] != 0x00 {
			continue
		}
		ip := p.Data[14:]
		src, _ := netip.AddrFromSlice(ip[12:16])
		if p.Iface.Node == nil || p.Iface.Node.Addr != src {
			t.Errorf("frame %d from %s captured on %v's port", p.Num, src, p.Iface.Node)
		}
		// A frame seen twice would repeat its IP header (ID, checksum)
		// and TCP header byte for byte.
		k := string(ip[:min(len(ip), 40)])
		if seen[k] {
			t.Errorf("frame %d from %s captured twice", p.Num, src)
		}
		seen[k] = true
		ihl := int(ip[0]&0x0f) * 4
		if len(ip) >= ihl+20 && ip[9] == 6 {
			tcp := ip[ihl:]
			payload[p.Iface.Node.Name] += int(binary.BigEndian.Uint16(ip[2:4])) - ihl - int(tcp[12]>>4)*4
		}
	}
	// Each side sent lines x 5 bytes, and n1 echoed them all.
	for node, want := range map[string]int{"n1": 2 * lines * 5, "n2": lines * 5, "n3": lines * 5} {
		if payload[node] != want {
			t.Errorf("%s sent %d bytes of payload in the capture, want %d", node, payload[node], want)
		}
	}
}

// TestSwitchPartition cuts n2 -> n1 with the receiver's firewall, as the
// lab partitions: the switch keeps source addresses, so the cut holds for
// n2 alone, and the sender sees no error.
func TestSwitchPartition(t *testing.T) {
	tb := cleanStar(t, 3)
	udp := func(node string) *net.UDPConn {
		var c *net.UDPConn
		var err error
		tbInNode(t, tb, node, func() {
			c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tbAddr(t, tb, node), 0)))
		})
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	u1, u2, u3 := udp("n1"), udp("n2"), udp("n3")
	// count sends 20 datagrams tagged tag from src to n1 and returns how
	// many n1 received; it waits 300 ms past the last for stragglers.
	count := func(src *net.UDPConn, tag byte) int {
		to := u1.LocalAddr().(*net.UDPAddr)
		for range 20 {
			if _, err := src.WriteToUDP([]byte{tag}, to); err != nil {
				t.Fatalf("UDP send: %v (a sender must see no error)", err)
			}
		}
		got := 0
		buf := make([]byte, 16)
		for {
			_ = u1.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			m, err := u1.Read(buf)
			if err != nil {
				return got
			}
			if m == 1 && buf[0] == tag {
				got++
			}
		}
	}
	ns, err := tb.NamespaceHandle("n1")
	if err != nil {
		t.Fatal(err)
	}
	fw, err := netem.NewFirewall(ns, tb.Run())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := fw.Close(); err != nil {
			t.Errorf("closing firewall: %v", err)
		}
	}()
	if got := count(u2, 1); got != 20 {
		t.Errorf("connected: n1 got %d of 20 from n2", got)
	}
	if err := fw.Block(tbAddr(t, tb, "n2")); err != nil {
		t.Fatal(err)
	}
	if got := count(u2, 2); got != 0 {
		t.Errorf("cut: n1 got %d of 20 from n2, want 0", got)
	}
	if got := count(u3, 3); got != 20 {
		t.Errorf("cut: n1 got %d of 20 from n3, want 20", got)
	}
	if err := fw.Unblock(tbAddr(t, tb, "n2")); err != nil {
		t.Fatal(err)
	}
	if got := count(u2, 4); got != 20 {
		t.Errorf("healed: n1 got %d of 20 from n2", got)
	}
}
