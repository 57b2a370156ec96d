//go:build linux

package netem

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

func firewall(t *testing.T, f *fixture, nd *fixtureNode) *Firewall {
	t.Helper()
	fw, err := NewFirewall(nd.ns, f.run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fw.Close(); err != nil {
			t.Errorf("closing firewall: %v", err)
		}
	})
	return fw
}

// udpCount sends n datagrams tagged with tag from src to dst and
// counts how many dst receives; the sender must see no error.
func udpCount(t *testing.T, src, dst *net.UDPConn, tag byte, n int) int {
	t.Helper()
	to := dst.LocalAddr().(*net.UDPAddr)
	for range n {
		if _, err := src.WriteToUDP([]byte{tag}, to); err != nil {
			t.Fatalf("UDP send: %v (a sender must see no error)", err)
		}
	}
	got := 0
	buf := make([]byte, 16)
	for {
		_ = dst.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		m, err := dst.Read(buf)
		if err != nil {
			return got
		}
		if m == 1 && buf[0] == tag {
			got++
		}
	}
}

func tcpSend(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("TCP write: %v (a sender must see no error)", err)
	}
}

// tcpRecv reads msg from c within timeout and returns how long it took.
func tcpRecv(c net.Conn, msg string, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(timeout))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, err
	}
	if !bytes.Equal(buf, []byte(msg)) {
		return 0, errors.New("got " + string(buf) + ", want " + msg)
	}
	return time.Since(start), nil
}

func tcpSilent(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s: read %q, %v; want nothing", what, buf[:n], err)
	}
}

func TestPartition(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 2)
	a, b := f.nodes[0], f.nodes[1]
	fa, fb := firewall(t, f, a), firewall(t, f, b)
	ua, ub := udpConn(t, a), udpConn(t, b)
	ta, tb := tcpPair(t, a, b)

	bothWays := func(phase string, tag byte, wantAB, wantBA int) {
		t.Helper()
		ab := udpCount(t, ua, ub, tag, 20)
		ba := udpCount(t, ub, ua, tag+1, 20)
		t.Logf("%s: UDP a→b %d/20, b→a %d/20", phase, ab, ba)
		if ab != wantAB || ba != wantBA {
			t.Errorf("%s: UDP a→b %d, b→a %d; want %d, %d", phase, ab, ba, wantAB, wantBA)
		}
	}
	mustRecv := func(c net.Conn, msg string, timeout time.Duration) time.Duration {
		t.Helper()
		d, err := tcpRecv(c, msg, timeout)
		if err != nil {
			t.Fatalf("TCP %q: %v", msg, err)
		}
		return d
	}

	bothWays("connected", 1, 20, 20)
	tcpSend(t, ta, "hello")
	mustRecv(tb, "hello", time.Second)

	// One-way cut: b drops what a sends; b→a still flows.
	start := time.Now()
	if err := fb.Block(a.addr); err != nil {
		t.Fatal(err)
	}
	t.Logf("Block took %v", time.Since(start))
	if got := fb.Blocked(); !slices.Equal(got, []netip.Addr{a.addr}) {
		t.Errorf("Blocked() = %v", got)
	}
	bothWays("one-way cut a→b", 3, 0, 20)
	tcpSend(t, ta, "lost1")
	tcpSilent(t, tb, "TCP a→b during the one-way cut")
	tcpSend(t, tb, "back1")
	mustRecv(ta, "back1", time.Second) // fresh b→a data still arrives; only a's ACKs are lost

	start = time.Now()
	if err := fb.Unblock(a.addr); err != nil {
		t.Fatal(err)
	}
	t.Logf("Unblock took %v", time.Since(start))
	d := mustRecv(tb, "lost1", 10*time.Second)
	t.Logf("TCP a→b recovered %v after heal (next retransmission)", d)
	bothWays("healed", 5, 20, 20)
	tcpSend(t, ta, "after1")
	mustRecv(tb, "after1", time.Second)
	tcpSend(t, tb, "after2")
	mustRecv(ta, "after2", time.Second)

	// Symmetric cut.
	if err := fa.Block(b.addr); err != nil {
		t.Fatal(err)
	}
	if err := fb.Block(a.addr); err != nil {
		t.Fatal(err)
	}
	bothWays("symmetric cut", 7, 0, 0)
	tcpSend(t, ta, "lost2")
	tcpSend(t, tb, "lost3")
	tcpSilent(t, tb, "TCP a→b during the symmetric cut")
	tcpSilent(t, ta, "TCP b→a during the symmetric cut")

	if err := fa.Clear(); err != nil {
		t.Fatal(err)
	}
	if err := fb.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := fb.Blocked(); len(got) != 0 {
		t.Errorf("Blocked() after Clear = %v", got)
	}
	dab := mustRecv(tb, "lost2", 10*time.Second)
	dba := mustRecv(ta, "lost3", 10*time.Second)
	t.Logf("symmetric heal: TCP a→b recovered after %v, b→a after %v", dab, dba)
	bothWays("healed again", 9, 20, 20)
}

func TestFirewallAPI(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 2)
	a, b := f.nodes[0], f.nodes[1]
	fw := firewall(t, f, a)
	if err := fw.Block(b.addr, b.addr); err != nil {
		t.Fatalf("blocking twice in one call: %v", err)
	}
	if err := fw.Block(b.addr); err != nil {
		t.Fatalf("blocking again: %v", err)
	}
	if err := fw.Unblock(netip.MustParseAddr("10.213.0.99")); err != nil {
		t.Fatalf("unblocking an address never blocked: %v", err)
	}
	if err := fw.Block(netip.MustParseAddr("fd00::1")); err == nil {
		t.Error("IPv6 address accepted")
	}
	if got := fw.Blocked(); !slices.Equal(got, []netip.Addr{b.addr}) {
		t.Errorf("Blocked() = %v", got)
	}
	if _, err := NewFirewall(a.ns, "No-pe"); err == nil {
		t.Error("invalid run name accepted")
	}
}

// TestReceiverLoss checks the Firewall's loss: a share of what one
// source sends is dropped on arrival, other sources lose nothing, and the
// sender sees no error.
func TestReceiverLoss(t *testing.T) {
	noLeak(t)
	f := newFaultsFixture(t, 3)
	a, b, c := f.nodes[0], f.nodes[1], f.nodes[2]
	fb := firewall(t, f, b)
	ua, ub, uc := udpConn(t, a), udpConn(t, b), udpConn(t, c)
	if err := fb.SetLoss(map[netip.Addr]float64{a.addr: 50}); err != nil {
		t.Fatal(err)
	}
	const n = 400
	fromA := udpCount(t, ua, ub, 1, n)
	fromC := udpCount(t, uc, ub, 2, n)
	t.Logf("50%% loss from a: %d/%d arrived; from c: %d/%d", fromA, n, fromC, n)
	// Binomial(400, 0.5) has a standard deviation of 10: 200 ± 50 is
	// five of them (170 arrived once, three below).
	if fromA < 150 || fromA > 250 {
		t.Errorf("from a: %d/%d arrived, want about half", fromA, n)
	}
	if fromC != n {
		t.Errorf("from c: %d/%d arrived, want all", fromC, n)
	}
	if err := fb.SetLoss(nil); err != nil {
		t.Fatal(err)
	}
	if got := udpCount(t, ua, ub, 3, n); got != n {
		t.Errorf("after SetLoss(nil): %d/%d arrived", got, n)
	}
	if err := fb.SetLoss(map[netip.Addr]float64{a.addr: 120}); err == nil {
		t.Error("SetLoss accepted 120%")
	}
}

// dialErr dials to from from within timeout and returns the error, if
// any, and how long it took.
func dialErr(t *testing.T, from *fixtureNode, to net.Addr, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	err := inNamespace(from.ns, func() error {
		c, err := net.DialTimeout("tcp4", to.String(), timeout)
		if err == nil {
			c.Close()
		}
		return err
	})
	return time.Since(start), err
}

// wantReset writes to c and waits for c to report the connection reset,
// which a reset cut does at the segment's arrival.
func wantReset(t *testing.T, c net.Conn, what string) {
	t.Helper()
	tcpSend(t, c, "doomed")
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(5 * time.Second))
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("%s: read %q, %v; want the connection reset", what, buf[:n], err)
		return
	}
	t.Logf("%s: reset %v after the write", what, time.Since(start))
}

// TestPartitionReset checks a Firewall's rejected sources: across a reset
// cut a SYN is refused and an established connection resets at its next
// segment, both ways of a symmetric cut, while a drop cut stays silent.
// The impairment backends sit on the path the resets take back (the
// receiver's egress), so each must let them through alike.
func TestPartitionReset(t *testing.T) {
	for _, backend := range []string{"", BackendNetem, BackendNFQueue} {
		name := backend
		if name == "" {
			name = "unimpaired"
		}
		t.Run(name, func(t *testing.T) { testPartitionReset(t, backend) })
	}
}

func testPartitionReset(t *testing.T, backend string) {
	noLeak(t)
	f := newFaultsFixture(t, 2)
	a, b := f.nodes[0], f.nodes[1]
	if backend != "" {
		for _, nd := range []*fixtureNode{a, b} {
			im := impairer(t, f, nd, backend)
			applyOrSkip(t, func() error { return im.Set(fault.Impairment{Delay: time.Millisecond}) })
		}
	}
	fa, fb := firewall(t, f, a), firewall(t, f, b)
	lnA, lnB := listenTCP(t, a), listenTCP(t, b)
	go acceptAll(lnA)
	go acceptAll(lnB)
	abA, _ := tcpPair(t, a, b) // a's end of a connection a made
	_, baB := tcpPair(t, a, b) // b's end of another
	drA, drB := tcpPair(t, a, b)

	// A drop cut: a SYN times out, data vanishes, nothing resets.
	if err := fb.Block(a.addr); err != nil {
		t.Fatal(err)
	}
	if d, err := dialErr(t, a, lnB.Addr(), 1500*time.Millisecond); !isTimeout(err) {
		t.Errorf("dial a→b across a drop cut: %v after %v; want a timeout", err, d)
	}
	tcpSend(t, drA, "lost")
	tcpSilent(t, drB, "TCP a→b across a drop cut")
	tcpSilent(t, drA, "a's end across a drop cut") // no reset either

	// The same source moves to the rejected set in one step.
	if err := fb.Reject(a.addr); err != nil {
		t.Fatal(err)
	}
	if err := fa.Reject(b.addr); err != nil {
		t.Fatal(err)
	}
	if got := fb.Rejected(); !slices.Equal(got, []netip.Addr{a.addr}) {
		t.Errorf("Rejected() = %v", got)
	}
	if got := fb.Blocked(); !slices.Equal(got, []netip.Addr{a.addr}) {
		t.Errorf("Blocked() = %v, want the rejected source too", got)
	}
	for _, dir := range []struct {
		what     string
		from, to *fixtureNode
		ln       net.Listener
	}{{"a→b", a, b, lnB}, {"b→a", b, a, lnA}} {
		d, err := dialErr(t, dir.from, dir.ln.Addr(), 5*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("dial %s across a reset cut: %v after %v; want it refused", dir.what, err, d)
		} else {
			t.Logf("dial %s across a reset cut: refused after %v", dir.what, d)
		}
	}
	wantReset(t, abA, "a's connection, a writing")
	wantReset(t, baB, "a's connection, b writing")

	// Healed, connections open again.
	if err := fb.Unblock(a.addr); err != nil {
		t.Fatal(err)
	}
	if err := fa.Clear(); err != nil {
		t.Fatal(err)
	}
	if got := append(fa.Blocked(), fb.Blocked()...); len(got) != 0 {
		t.Errorf("still cut after heal: %v", got)
	}
	for _, dir := range []struct {
		what string
		from *fixtureNode
		ln   net.Listener
	}{{"a→b", a, lnB}, {"b→a", b, lnA}} {
		if d, err := dialErr(t, dir.from, dir.ln.Addr(), 5*time.Second); err != nil {
			t.Errorf("dial %s after heal: %v after %v", dir.what, err, d)
		}
	}
}

func acceptAll(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
