//go:build linux

package netem_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TestTCPTimestampsFollowMonotonicClock checks what the capture analysis
// reads send times from: TSval of every segment between two nodes, in
// the unit the testbed reports, plus the monotonic clock's offset, is the
// time the segment was sent, a little before the switch captured it. The
// second testbed is built as on a kernel that refuses microsecond
// timestamps, and must fall back to milliseconds on every node.
func TestTCPTimestampsFollowMonotonicClock(t *testing.T) {
	t.Run("as-built", func(t *testing.T) {
		tb := netemtest.Star(t, 2)
		tsCheckTestbed(t, tb, tb.TCPTimestampUnit())
	})
	t.Run("microseconds-refused", func(t *testing.T) {
		restore := netem.RefuseMicrosecondTimestamps()
		tb := netemtest.Star(t, 2)
		restore()
		if unit := tb.TCPTimestampUnit(); unit != time.Millisecond && unit != 0 {
			t.Fatalf("a testbed whose kernel refused the route feature reports TSval in %v, want 1ms", unit)
		}
		tsCheckTestbed(t, tb, tb.TCPTimestampUnit())
	})
}

// tsCheckTestbed checks tb's node namespaces and the timestamps of a
// connection between two of its nodes against unit.
func tsCheckTestbed(t *testing.T, tb *netem.Testbed, unit time.Duration) {
	t.Helper()
	if unit == 0 {
		err := tb.TimestampOffsetError()
		if errors.Is(err, os.ErrNotExist) {
			t.Skipf("the kernel has no per-namespace net.ipv4.tcp_timestamps (Linux 4.15): %v", err)
		}
		t.Fatalf("the testbed reports no timestamp unit: %v", err)
	}
	if unit != time.Microsecond && unit != time.Millisecond {
		t.Fatalf("timestamp unit %v, want 1µs or 1ms", unit)
	}
	t.Logf("the nodes' TSval counts %v", unit)
	tsCheckNodes(t, tb, unit)

	path := filepath.Join(t.TempDir(), "ts.pcapng")
	tsCapture(t, tb, path, func() { tsExchange(t, tb, "n1", "n2", 5) })

	offset, offsetErr, err := netem.MonotonicOffset()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := capture.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	period := int64(unit) << 32 // TSval wraps: 71 minutes in microseconds
	from := map[string]int{}
	var worst time.Duration
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Record != nil {
			continue
		}
		pkt := gopacket.NewPacket(p.Data, layers.LayerTypeEthernet, gopacket.NoCopy)
		tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if tcp == nil || ip == nil {
			continue
		}
		tsval, ok := tsVal(tcp)
		if !ok {
			t.Errorf("packet %d from %s: no timestamp option (flags %s)", p.Num, ip.SrcIP, tsFlags(tcp))
			continue
		}
		from[ip.SrcIP.String()]++
		captured := p.CI.Timestamp.UnixNano()
		// Unwrapped to the period nearest the capture: TSval holds only
		// the clock's low 32 bits.
		ticks := int64(tsval) * int64(unit)
		mono := captured - offset.Nanoseconds()
		k := (mono - ticks + period/2) / period
		sent := ticks + k*period + offset.Nanoseconds()
		lo := captured - 2*int64(unit) - int64(time.Millisecond) - offsetErr.Nanoseconds()
		hi := captured + offsetErr.Nanoseconds()
		if sent < lo || sent > hi {
			t.Errorf("packet %d from %s (flags %s): TSval %d says sent at %v, captured at %v: %v apart, want within [-%v, 0]",
				p.Num, ip.SrcIP, tsFlags(tcp), tsval, time.Unix(0, sent).UTC().Format(time.RFC3339Nano),
				p.CI.Timestamp.UTC().Format(time.RFC3339Nano), time.Duration(sent-captured), 2*unit+time.Millisecond)
		}
		worst = max(worst, time.Duration(captured-sent))
	}
	for _, n := range []string{"n1", "n2"} {
		if a := tbAddr(t, tb, n).String(); from[a] < 5 {
			t.Errorf("the capture holds %d segments with timestamps from %s (%s), want at least 5", from[a], n, a)
		}
	}
	t.Logf("segments with timestamps: %v; latest capture after the TSval's send time: %v; offset %v ± %v", from, worst, offset, offsetErr)
}

// tsCheckNodes checks each node's namespace: timestamps without offsets,
// and a subnet route asking for microseconds exactly when the testbed
// says it got them.
func tsCheckNodes(t *testing.T, tb *netem.Testbed, unit time.Duration) {
	t.Helper()
	subnet := tb.Topology().Subnet.Masked().String()
	for _, nd := range tb.Nodes() {
		ns, err := netns.GetFromName(nd.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if v := tbSysctlIn(t, ns, "/proc/sys/net/ipv4/tcp_timestamps"); v != "2" {
			t.Errorf("node %s: net.ipv4.tcp_timestamps = %s, want 2", nd.Name, v)
		}
		h, err := netlink.NewHandleAt(ns)
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		routes, err := h.RouteList(nil, netlink.FAMILY_V4)
		h.Close()
		if err != nil {
			t.Fatalf("node %s: %v", nd.Name, err)
		}
		found := 0
		for _, r := range routes {
			if r.Dst == nil || r.Dst.String() != subnet {
				continue
			}
			found++
			usec := r.Features&unix.RTAX_FEATURE_TCP_USEC_TS != 0
			if usec != (unit == time.Microsecond) {
				t.Errorf("node %s: route to %s has features %#x, unit %v", nd.Name, subnet, r.Features, unit)
			}
			if r.Src.String() != nd.Addr || r.Gw.String() != netem.SwitchGateway.String() {
				t.Errorf("node %s: route to %s from %s via %s, want from %s via the switch's %s", nd.Name, subnet, r.Src, r.Gw, nd.Addr, netem.SwitchGateway)
			}
		}
		if found != 1 {
			t.Errorf("node %s: %d routes to %s, want 1", nd.Name, found, subnet)
		}
	}
}

// tsCapture captures tb's switch into path while traffic runs.
func tsCapture(t *testing.T, tb *netem.Testbed, path string, traffic func()) {
	t.Helper()
	var info capture.TestbedInfo
	ports := map[int]capture.NodePort{}
	for _, nd := range tb.Nodes() {
		addr := netip.MustParseAddr(nd.Addr)
		info.Nodes = append(info.Nodes, capture.NodeInfo{Name: nd.Name, Index: nd.Index, Addr: addr, Port: tb.Topology().Port})
		ports[nd.Index] = capture.NodePort{Veth: nd.SwitchVeth, MAC: netem.NodeMAC(addr)}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := capture.NewWriter(f, capture.WriterOptions{Testbed: info})
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
	traffic()
	stats, err := live.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if stats.Drops != 0 {
		t.Errorf("the capture dropped %d frames", stats.Drops)
	}
}

// tsExchange connects client to server's port and has them exchange lines
// rounds times, each way, then close.
func tsExchange(t *testing.T, tb *netem.Testbed, server, client string, rounds int) {
	t.Helper()
	to := netip.AddrPortFrom(tbAddr(t, tb, server), uint16(tb.Topology().Port)).String()
	var ln net.Listener
	var err error
	tbInNode(t, tb, server, func() { ln, err = net.Listen("tcp", to) })
	if err != nil {
		t.Fatalf("node %s: %v", server, err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(c, c)
		served <- err
	}()
	var c net.Conn
	tbInNode(t, tb, client, func() { c, err = net.DialTimeout("tcp", to, 5*time.Second) })
	if err != nil {
		t.Fatalf("node %s -> %s: %v", client, to, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	for i := range rounds {
		msg := strings.Repeat("x", i+1) + "\n"
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != msg {
			t.Fatalf("round %d: echo %q, %v", i, line, err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("node %s: %v", server, err)
	}
}

// tsVal returns the segment's TSval.
func tsVal(tcp *layers.TCP) (uint32, bool) {
	for _, o := range tcp.Options {
		if o.OptionType == layers.TCPOptionKindTimestamps && len(o.OptionData) == 8 {
			return binary.BigEndian.Uint32(o.OptionData), true
		}
	}
	return 0, false
}

func tsFlags(tcp *layers.TCP) string {
	var f []string
	for _, x := range []struct {
		on   bool
		name string
	}{{tcp.SYN, "SYN"}, {tcp.ACK, "ACK"}, {tcp.PSH, "PSH"}, {tcp.FIN, "FIN"}, {tcp.RST, "RST"}} {
		if x.on {
			f = append(f, x.name)
		}
	}
	return strings.Join(f, "|")
}
