package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func testClusterKey(t testing.TB) *wire.Key {
	t.Helper()
	k, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return &k
}

// waitIssue waits until tr counted n issues of kind, or fails.
func waitIssue(t *testing.T, tr *TCPTransport, kind PeerIssue, n uint64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for tr.counters.Issues(kind) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s counted %d times within %v, want %d", kind, tr.counters.Issues(kind), timeout, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitClosed waits until the transport closes c (EOF or reset), or fails.
func waitClosed(t *testing.T, c net.Conn, timeout time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(timeout))
	_, err := c.Read(make([]byte, 1))
	if err == nil || errors.Is(err, io.ErrNoProgress) || (!errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset")) {
		t.Fatalf("read on a connection the transport should close: %v", err)
	}
}

func dialT(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sealedConn returns the bytes an authenticated connection from `from` to
// `to` would carry: the HELLO stamped at, then msgs.
func sealedConn(key *wire.Key, from, to uuid.UUID, at time.Time, msgs ...wire.Message) []byte {
	s, b := wire.NewSealer(nil, key, from, wire.Hello{To: to, Time: at.UnixNano(), Nonce: [16]byte{byte(at.UnixNano())}})
	for i := range msgs {
		b = s.Seal(b, wire.Append(nil, &msgs[i]))
	}
	return b
}

func TestTCPAuthenticatedExchange(t *testing.T) {
	key := testClusterKey(t)
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	for i := range 5 {
		a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: uint64(i), From: a.id})
	}
	got := recvN(t, b, 5, 5*time.Second)
	for i, m := range got {
		if m.Epoch != uint64(i) || m.From != a.id || m.Flags&wire.FlagAuth != 0 || m.Tag != nil {
			t.Errorf("message %d: %v, want a plain HEARTBEAT of epoch %d", i, m, i)
		}
	}
	if !a.Flush(5 * time.Second) {
		t.Fatal("flush timed out")
	}
	if s, r := a.counters.Sent(wire.TypeHello), b.counters.Received(wire.TypeHello); s != 1 || r != 1 {
		t.Errorf("HELLO sent %d, received %d; want 1 and 1", s, r)
	}
	if s, r := a.counters.Sent(wire.TypeHeartbeat), b.counters.Received(wire.TypeHeartbeat); s != 5 || r != 5 {
		t.Errorf("HEARTBEAT sent %d, received %d; want 5 and 5", s, r)
	}
	for i := range numPeerIssues {
		if n := b.counters.Issues(i); n != 0 {
			t.Errorf("%s counted %d times", i, n)
		}
	}
}

func TestTCPRefusesWrongKeyAndMixedModes(t *testing.T) {
	cases := []struct {
		name           string
		sender, target *wire.Key
		want           PeerIssue
	}{
		{"other key", testClusterKey(t), testClusterKey(t), IssueAuth},
		{"insecure sender", nil, testClusterKey(t), IssueAuth},
		{"insecure receiver", testClusterKey(t), nil, IssueAuth},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: c.sender})
			b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: c.target})
			a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
			a.Send(b.id, &wire.Message{Type: wire.TypeCoordinator, Epoch: 9, From: a.id})
			waitIssue(t, b, c.want, 1, 5*time.Second)
			select {
			case m := <-b.Recv():
				t.Fatalf("delivered %v", m)
			default:
			}
		})
	}
}

func TestTCPRefusesReplayAndStaleHello(t *testing.T) {
	key := testClusterKey(t)
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, MaxClockSkew: time.Minute})
	from := uuid.New()
	hb := wire.Message{Type: wire.TypeHeartbeat, Epoch: 3, From: from}
	recorded := sealedConn(key, from, b.id, time.Now(), hb)

	c := dialT(t, b.LocalAddr())
	c.Write(recorded)
	recvN(t, b, 1, 5*time.Second)

	// The same bytes again, on a new connection: the recorded HELLO is not
	// newer than the one accepted.
	replay := dialT(t, b.LocalAddr())
	replay.Write(recorded)
	waitIssue(t, b, IssueReplay, 1, 5*time.Second)
	waitClosed(t, replay, 5*time.Second)

	// A HELLO stamped outside the skew, from a sender never seen before.
	old := dialT(t, b.LocalAddr())
	old.Write(sealedConn(key, uuid.New(), b.id, time.Now().Add(-2*time.Minute), hb))
	waitIssue(t, b, IssueReplay, 2, 5*time.Second)
	waitClosed(t, old, 5*time.Second)

	// A HELLO addressed to another node.
	other := dialT(t, b.LocalAddr())
	other.Write(sealedConn(key, uuid.New(), uuid.New(), time.Now(), hb))
	waitIssue(t, b, IssueAuth, 1, 5*time.Second)
	waitClosed(t, other, 5*time.Second)

	select {
	case m := <-b.Recv():
		t.Fatalf("delivered %v from a refused connection", m)
	default:
	}
}

func TestTCPDropsFramesOfAnotherSender(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		t.Run(map[bool]string{true: "key", false: "insecure"}[keyed], func(t *testing.T) {
			var key *wire.Key
			if keyed {
				key = testClusterKey(t)
			}
			b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
			me, victim := uuid.New(), uuid.New()
			msgs := []wire.Message{
				{Type: wire.TypeHeartbeat, Epoch: 1, From: me},
				{Type: wire.TypeLeave, Epoch: 1, From: victim}, // forged
				{Type: wire.TypeHeartbeat, Epoch: 2, From: me},
			}
			var stream []byte
			if keyed {
				stream = sealedConn(key, me, b.id, time.Now(), msgs...)
			} else {
				for i := range msgs {
					stream = wire.Append(stream, &msgs[i])
				}
			}
			c := dialT(t, b.LocalAddr())
			c.Write(stream)
			got := recvN(t, b, 2, 5*time.Second)
			if got[0].From != me || got[1].From != me || got[1].Epoch != 2 {
				t.Errorf("delivered %v and %v, want both HEARTBEATs of %s", got[0], got[1], me)
			}
			waitIssue(t, b, IssueWrongSender, 1, 5*time.Second)
		})
	}
}

func TestTCPTamperedFrameEndsConnection(t *testing.T) {
	key := testClusterKey(t)
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	from := uuid.New()
	hello := sealedConn(key, from, b.id, time.Now())
	// A frame sealed for a different session: its tag cannot verify.
	bad := sealedConn(key, from, b.id, time.Now().Add(time.Second), wire.Message{Type: wire.TypeCoordinator, Epoch: 7, From: from})
	bad = bad[len(hello):]
	c := dialT(t, b.LocalAddr())
	c.Write(append(hello, bad...))
	waitIssue(t, b, IssueAuth, 1, 5*time.Second)
	waitClosed(t, c, 5*time.Second)
}

func TestTCPHandshakeAndFrameTimeouts(t *testing.T) {
	key := testClusterKey(t)
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, HandshakeTimeout: 100 * time.Millisecond, FrameTimeout: 100 * time.Millisecond})
	from := uuid.New()

	silent := dialT(t, b.LocalAddr())
	waitClosed(t, silent, 5*time.Second)
	waitIssue(t, b, IssueHandshakeTimeout, 1, time.Second)

	// Half a HELLO, then nothing: still the handshake's deadline.
	hello := sealedConn(key, from, b.id, time.Now())
	half := dialT(t, b.LocalAddr())
	half.Write(hello[:20])
	waitClosed(t, half, 5*time.Second)
	waitIssue(t, b, IssueHandshakeTimeout, 2, time.Second)

	// A good HELLO, then a connection idle for longer than both timeouts
	// is fine; a frame begun and not finished is not.
	stream := sealedConn(key, from, b.id, time.Now(), wire.Message{Type: wire.TypeHeartbeat, From: from}, wire.Message{Type: wire.TypeHeartbeat, From: from})
	idle := dialT(t, b.LocalAddr())
	frame1 := len(stream) - (wire.MinFrameLen + wire.TagLen)
	idle.Write(stream[:frame1])
	recvN(t, b, 1, 5*time.Second)
	// Three times both timeouts without a byte: the connection must stay
	// open, which the read's own deadline, not a close, ends.
	idle.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an idle authenticated connection was closed: %v", err)
	}
	idle.Write(stream[frame1 : frame1+10])
	waitClosed(t, idle, 5*time.Second)
	waitIssue(t, b, IssueFrameTimeout, 1, time.Second)
}

func TestTCPInboundLimits(t *testing.T) {
	t.Run("per host", func(t *testing.T) {
		b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: testClusterKey(t), MaxInbound: 200, HandshakeTimeout: time.Minute})
		for range MaxUnauthenticatedPerHost {
			dialT(t, b.LocalAddr())
		}
		waitFor(t, 5*time.Second, "connections accepted", func() bool {
			b.inMu.Lock()
			defer b.inMu.Unlock()
			return len(b.inbound) == MaxUnauthenticatedPerHost
		})
		// One more from the same host, without a HELLO: refused at once.
		extra := dialT(t, b.LocalAddr())
		waitClosed(t, extra, 5*time.Second)
		waitIssue(t, b, IssueTooManyConnections, 1, time.Second)
		// Another host is not affected.
		dialFromT(t, "127.0.0.9", b.LocalAddr())
		waitFor(t, 5*time.Second, "the other host's connection accepted", func() bool {
			b.inMu.Lock()
			defer b.inMu.Unlock()
			return b.unbound["127.0.0.9"] == 1
		})
	})
	t.Run("oldest unauthenticated makes room", func(t *testing.T) {
		const maxInbound = 20
		b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: testClusterKey(t), MaxInbound: maxInbound, HandshakeTimeout: time.Minute})
		var conns []net.Conn
		for i := range maxInbound / unboundShare {
			conns = append(conns, dialFromT(t, fmt.Sprintf("127.0.0.%d", 10+i), b.LocalAddr()))
			waitFor(t, 5*time.Second, "accepted", func() bool {
				b.inMu.Lock()
				defer b.inMu.Unlock()
				return len(b.inbound) == i+1
			})
		}
		// A member dialling now gets in, and the oldest stall is closed.
		from := uuid.New()
		member := dialT(t, b.LocalAddr())
		member.Write(sealedConn(b.cfg.Key, from, b.id, time.Now(), wire.Message{Type: wire.TypeHeartbeat, From: from}))
		recvN(t, b, 1, 5*time.Second)
		waitClosed(t, conns[0], 5*time.Second)
		waitIssue(t, b, IssueTooManyConnections, 1, time.Second)
	})
}

// dialFromT connects to addr from the loopback address local, as from
// another host.
func dialFromT(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds, or fails naming what.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHelloClock(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	h := helloClock{skew: time.Minute, max: 3, last: map[uuid.UUID]int64{}}
	a := uuid.New()
	at := now.UnixNano()
	if err := h.accept(a, at, now); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int64{at, at - 1} {
		if err := h.accept(a, bad, now); err == nil || !strings.Contains(err.Error(), "replay") {
			t.Errorf("HELLO at %d after %d: %v", bad, at, err)
		}
	}
	if err := h.accept(a, at+1, now); err != nil {
		t.Errorf("a newer HELLO: %v", err)
	}
	if err := h.accept(uuid.New(), now.Add(2*time.Minute).UnixNano(), now); err == nil || !strings.Contains(err.Error(), "synchronised") {
		t.Errorf("HELLO from the future: %v", err)
	}
	// The table stays within max: entries past the skew make room.
	for i := range 10 {
		later := now.Add(time.Duration(i) * 2 * time.Minute)
		if err := h.accept(uuid.New(), later.UnixNano(), later); err != nil {
			t.Fatal(err)
		}
		if len(h.last) > h.max {
			t.Fatalf("table holds %d entries, max %d", len(h.last), h.max)
		}
	}
}
