package node

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func listenTCPT(t *testing.T, addr string, cfg TCPConfig) *TCPTransport {
	t.Helper()
	tr, err := ListenTCP(addr, uuid.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// recvN reads n messages from tr or fails at the deadline.
func recvN(t *testing.T, tr Transport, n int, timeout time.Duration) []wire.Message {
	t.Helper()
	deadline := time.After(timeout)
	var got []wire.Message
	for len(got) < n {
		select {
		case m := <-tr.Recv():
			got = append(got, m)
		case <-deadline:
			t.Fatalf("received %d of %d messages within %v", len(got), n, timeout)
		}
	}
	return got
}

func sumSent(c *Counters) (n uint64) {
	for _, t := range wire.Types {
		n += c.Sent(t)
	}
	return n
}

func sumDropped(c *Counters) (n uint64) {
	for _, t := range wire.Types {
		n += c.Dropped(t)
	}
	return n
}

func sumReceived(c *Counters) (n uint64) {
	for _, t := range wire.Types {
		n += c.Received(t)
	}
	return n
}

func TestTCPInOrderAndCountersExact(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}, {ID: a.id, Addr: a.LocalAddr()}})

	const n = 3000 // more than a queue holds: the writer must keep up
	types := []wire.Type{wire.TypeHeartbeat, wire.TypeElection, wire.TypeJoin, wire.TypeMembers}
	want := map[wire.Type]uint64{}
	go func() {
		for i := range n {
			m := wire.Message{Type: types[i%len(types)], Epoch: uint64(i), From: a.id}
			switch m.Type {
			case wire.TypeJoin:
				m.Payload = []byte("127.0.0.1:1")
			case wire.TypeMembers:
				m.Payload = wire.AppendMembers(nil, []wire.Member{{ID: a.id, Addr: "x:1"}})
			}
			a.Send(b.id, &m)
			if i%500 == 499 {
				a.Flush(5 * time.Second) // keep within the queue: this test is about order
			}
		}
	}()
	for i := range n {
		want[types[i%len(types)]]++
	}
	got := recvN(t, b, n, 10*time.Second)
	for i, m := range got {
		if m.Epoch != uint64(i) || m.From != a.id || m.Type != types[i%len(types)] {
			t.Fatalf("message %d: got %v, want epoch %d", i, m, i)
		}
	}
	if string(got[2].Payload) != "127.0.0.1:1" {
		t.Errorf("JOIN payload %q", got[2].Payload)
	}
	if !a.Flush(5 * time.Second) {
		t.Fatal("flush timed out")
	}
	for _, typ := range wire.Types {
		if s, r := a.counters.Sent(typ), b.counters.Received(typ); s != want[typ] || r != want[typ] {
			t.Errorf("%v: sent %d received %d, want %d", typ, s, r, want[typ])
		}
		if d := a.counters.Dropped(typ); d != 0 {
			t.Errorf("%v: dropped %d", typ, d)
		}
	}
}

func TestTCPDropsWhenPeerDown(t *testing.T) {
	dead := deadAddr(t)
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{BackoffMin: time.Hour, BackoffMax: time.Hour})
	peer := uuid.New()
	a.SetPeers([]wire.Member{{ID: peer, Addr: dead}})
	for i := range 20 {
		a.Send(peer, &wire.Message{Type: wire.TypeElection, Epoch: uint64(i), From: a.id})
	}
	if !a.Flush(5 * time.Second) {
		t.Fatal("flush timed out")
	}
	// Sent after the failed dial: backing off, so dropped at once.
	a.Send(peer, &wire.Message{Type: wire.TypeHaltAck, From: a.id})
	a.Send(uuid.New(), &wire.Message{Type: wire.TypeHalt, From: a.id})

	c := &a.counters
	if got := c.Dropped(wire.TypeElection); got != 20 {
		t.Errorf("ELECTION dropped %d, want 20", got)
	}
	if c.Dropped(wire.TypeHaltAck) != 1 || c.Dropped(wire.TypeHalt) != 1 {
		t.Errorf("HALT_ACK dropped %d, HALT dropped %d, want 1 and 1", c.Dropped(wire.TypeHaltAck), c.Dropped(wire.TypeHalt))
	}
	if s := sumSent(c); s != 0 {
		t.Errorf("sent %d, want 0", s)
	}
	if u, p := c.DroppedFor(DropUnreachable), c.DroppedFor(DropUnknownPeer); u != 21 || p != 1 {
		t.Errorf("dropped unreachable %d unknown_peer %d, want 21 and 1", u, p)
	}
	snap := c.Snapshot()
	if snap.Dropped["ELECTION"] != 20 || snap.DroppedBy["unreachable"] != 21 || Total(snap.Dropped) != 22 {
		t.Errorf("snapshot %+v", snap)
	}
}

func TestTCPReconnectsAfterPeerRestart(t *testing.T) {
	cfg := TCPConfig{BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond}
	a := listenTCPT(t, "127.0.0.1:0", cfg)
	b, err := ListenTCP("127.0.0.1:0", uuid.New(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, bid := b.LocalAddr(), b.id
	a.SetPeers([]wire.Member{{ID: bid, Addr: addr}})

	handed := 0
	send := func() {
		handed++
		a.Send(bid, &wire.Message{Type: wire.TypeHeartbeat, Epoch: uint64(handed), From: a.id})
	}
	send()
	recvN(t, b, 1, 5*time.Second)
	b.Close()

	// While b is down, frames are dropped (or written into the closing
	// socket: TCP accepts those, and so does a capture).
	for range 10 {
		send()
	}
	a.Flush(5 * time.Second)

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("rebind %s: %v", addr, err)
	}
	b2 := NewTCPTransport(ln, bid, cfg)
	defer b2.Close()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for received := false; !received; {
		send()
		select {
		case <-b2.Recv():
			received = true
		case <-tick.C:
			if time.Now().After(deadline) {
				t.Fatal("no frame reached the restarted peer")
			}
		}
	}
	a.Flush(5 * time.Second)
	c := &a.counters
	if s, d := sumSent(c), sumDropped(c); s+d != uint64(handed) {
		t.Errorf("sent %d + dropped %d != %d handed to Send", s, d, handed)
	}
	if r1, r2, s := sumReceived(&b.counters), sumReceived(&b2.counters), sumSent(c); r1+r2 > s {
		t.Errorf("received %d+%d, more than the %d sent", r1, r2, s)
	}
	if sumDropped(c) == 0 {
		t.Error("no frame dropped while the peer was down")
	}
}

// A peer that accepts but never reads fills its socket buffers; then the
// queue fills, the write times out, and queued frames expire. Every frame
// must still be counted exactly once.
func TestTCPStalledPeerQueueFullAndExpiry(t *testing.T) {
	// Both ends' buffers are set, so that a write blocks until its deadline
	// whatever the host's tcp_wmem and tcp_rmem: left to grow up to a
	// tcp_wmem maximum of 16 MiB, the send buffer took the stalled write
	// in after 110-180 ms, within WriteTimeout.
	const sendBuf, recvBuf = 64 << 10, 64 << 10
	ln := listenRecvBuf(t, recvBuf)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{QueueLen: 4, WriteTimeout: 300 * time.Millisecond,
		FrameTTL: 50 * time.Millisecond, SendBuffer: sendBuf})
	peer := uuid.New()
	a.SetPeers([]wire.Member{{ID: peer, Addr: ln.Addr().String()}})
	big := make([]byte, 60<<10)
	sent := 0
	send := func() {
		a.Send(peer, &wire.Message{Type: wire.TypeMembers, Epoch: uint64(sent), From: a.id, Payload: big})
		sent++
	}
	// The peer never reads: the writer fills the socket buffers until a
	// write stalls, which a Flush that cannot finish shows while the send
	// queue holds a full buffer (a Flush alone also fails on a writer that
	// a loaded host, or the race detector, merely slowed down). 400
	// frames are 24 MB, far more than the buffers set above hold.
	var c *tcpConn
	stalled := false
	for !stalled && sent < 400 {
		send()
		if a.Flush(20 * time.Millisecond) {
			continue
		}
		a.mu.RLock()
		c = a.peers[peer].cur.Load()
		a.mu.RUnlock()
		stalled = c != nil && sendQueued(t, c.Conn) >= sendBuf
	}
	if !stalled {
		t.Fatalf("writes of %d frames of 60 KiB to a peer that never reads did not stall", sent)
	}
	if got := sockoptInt(t, c.Conn, syscall.SO_SNDBUF); got > 2*sendBuf {
		t.Fatalf("SO_SNDBUF of the transport's connection is %d, want at most %d: SendBuffer was not applied", got, 2*sendBuf)
	}
	// With the writer stuck in a write, twice the queue's length at once
	// overflows the queue; what it holds expires before the stalled write
	// times out (WriteTimeout > FrameTTL).
	for range 8 {
		send()
	}
	n := uint64(sent)
	if !a.Flush(10 * time.Second) {
		t.Fatal("flush timed out")
	}
	cs := &a.counters
	if s, d := cs.Sent(wire.TypeMembers), cs.Dropped(wire.TypeMembers); s+d != n {
		t.Errorf("sent %d + dropped %d != %d", s, d, n)
	}
	if cs.DroppedFor(DropQueueFull) == 0 {
		t.Error("no queue_full drops")
	}
	if cs.DroppedFor(DropWriteError) == 0 {
		t.Error("no write_error drop from the stalled write")
	}
	if cs.DroppedFor(DropExpired) == 0 {
		t.Error("no expired drops after the stalled write")
	}
	select {
	case conn := <-accepted:
		if got := sockoptInt(t, conn, syscall.SO_RCVBUF); got > 2*recvBuf {
			t.Errorf("SO_RCVBUF of the accepted connection is %d, want at most %d", got, 2*recvBuf)
		}
		conn.Close()
	case <-time.After(5 * time.Second):
		t.Error("the stalled peer accepted no connection")
	}
}

// listenRecvBuf listens on 127.0.0.1 with SO_RCVBUF set to size before
// listen(2), so that the connections it accepts inherit it: set on an
// accepted socket, it would come after the handshake had offered a window
// sized from net.ipv4.tcp_rmem.
func listenRecvBuf(t *testing.T, size int) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, size)
		}); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// sockoptInt reads the SOL_SOCKET option opt of c.
func sockoptInt(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatalf("getsockopt: %v", gerr)
	}
	return v
}

func TestTCPRejectsOversizedFrame(t *testing.T) {
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{MaxFrame: 100})
	conn, err := net.Dial("tcp", b.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ok := wire.Append(nil, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: uuid.New()})
	tooBig := wire.Append(nil, &wire.Message{Type: wire.TypeJoin, From: uuid.New(), Payload: make([]byte, 200)})
	if _, err := conn.Write(append(ok, tooBig...)); err != nil {
		t.Fatal(err)
	}
	recvN(t, b, 1, 5*time.Second)
	// The transport hangs up on the stream that broke the limit.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read after oversized frame: %v, want EOF", err)
	}
	if got := b.counters.rxErrors.Load(); got != 1 {
		t.Errorf("rx_errors %d, want 1", got)
	}
	if got := b.counters.Received(wire.TypeJoin); got != 0 {
		t.Errorf("JOIN received %d, want 0", got)
	}
}

func TestTCPRemovedPeerAndClose(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, From: a.id})
	recvN(t, b, 1, 5*time.Second)
	a.SetPeers(nil)
	a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, From: a.id})
	if got := a.counters.DroppedFor(DropUnknownPeer); got != 1 {
		t.Errorf("unknown_peer drops %d, want 1", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, From: a.id})
	if got := a.counters.DroppedFor(DropClosed); got != 1 {
		t.Errorf("closed drops %d, want 1", got)
	}
	if err := a.Close(); !errors.Is(err, ErrTransportClosed) {
		t.Errorf("second Close: %v", err)
	}
}

func TestListenTCPAddressInUse(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	_, err := ListenTCP(a.LocalAddr(), uuid.New(), TCPConfig{})
	want := "listen " + a.LocalAddr() + ": address already in use"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestTCPReportsRefusals(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	dead := deadAddr(t)
	peer := uuid.New()
	a.SetPeers([]wire.Member{{ID: peer, Addr: dead}})
	a.Send(peer, &wire.Message{Type: wire.TypeHalt, Epoch: 7, From: a.id})
	select {
	case r := <-a.Refusals():
		if want := (Refusal{Peer: peer, Type: wire.TypeHalt, Epoch: 7}); r != want {
			t.Errorf("refusal %+v, want %+v", r, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no refusal reported for a HALT to a port nobody listens on")
	}
	if got := a.Counters().Snapshot().Dropped["HALT"]; got != 1 {
		t.Errorf("HALT dropped %d times, want 1", got)
	}
}

// A peer that comes up while a dial to it fails (its process listens just
// after the SYN was refused) and sends a frame meanwhile is dialled again
// at once: the frames queued for it, such as the ANSWER to that frame,
// must not be dropped and the peer not backed off.
func TestTCPRedialsPeerHeardDuringFailedDial(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	sock := refusing(t) // refused until the hook brings the peer up
	bID := uuid.New()
	a.SetPeers([]wire.Member{{ID: bID, Addr: sock.addr}})

	var b *TCPTransport
	hook := func() {
		testHookDialFailed.Store(nil)
		b = NewTCPTransport(sock.Listen(t), bID, TCPConfig{})
		t.Cleanup(func() { b.Close() })
		a.markAlive(bID) // b's first frame reached a during the dial
	}
	testHookDialFailed.Store(&hook)
	t.Cleanup(func() { testHookDialFailed.Store(nil) })
	a.Send(bID, &wire.Message{Type: wire.TypeAnswer, Epoch: 3, From: a.id})
	got := recvN(t, b, 1, 5*time.Second)
	if got[0].Type != wire.TypeAnswer || got[0].From != a.id {
		t.Errorf("b got %v from %s, want the ANSWER from a", got[0].Type, got[0].From)
	}
	if d := a.Counters().Snapshot().Dropped["ANSWER"]; d != 0 {
		t.Errorf("a dropped %d ANSWERs", d)
	}
	select {
	case r := <-a.Refusals():
		t.Errorf("a reported refusal %+v for a peer that came up", r)
	default:
	}
}

// A frame from a peer that arrives after a failed dial to it was found not
// to have heard from the peer, but before its backoff starts, still ends
// the backoff: the next frame to the peer is dialled, not dropped at once.
func TestTCPHeardAsBackoffStarts(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{BackoffMin: time.Minute, BackoffMax: time.Minute})
	peer := uuid.New()
	a.SetPeers([]wire.Member{{ID: peer, Addr: deadAddr(t)}})
	hook := func() {
		testHookBackoff.Store(nil)
		a.markAlive(peer) // the peer's first frame, just as the dial failed
	}
	testHookBackoff.Store(&hook)
	t.Cleanup(func() { testHookBackoff.Store(nil) })
	for epoch := uint64(7); epoch <= 8; epoch++ {
		a.Send(peer, &wire.Message{Type: wire.TypeHalt, Epoch: epoch, From: a.id})
		select {
		case r := <-a.Refusals():
			if r.Epoch != epoch {
				t.Fatalf("refusal of epoch %d, want %d", r.Epoch, epoch)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the HALT of epoch %d was not dialled: a backoff the peer's frame ended held", epoch)
		}
	}
}
