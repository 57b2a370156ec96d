package node

import (
	"net"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// A warmed peer gets a connection and its HELLO, and no message; the
// frames sent to it later go on that connection, with no new HELLO.
func TestTCPWarmConnectsAhead(t *testing.T) {
	key := testClusterKey(t)
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})

	a.Warm([]uuid.UUID{b.id}, 0)
	waitFor(t, 5*time.Second, "HELLO received", func() bool { return b.counters.Received(wire.TypeHello) == 1 })
	if n := sumSent(&a.counters); n != 1 || a.counters.Sent(wire.TypeHello) != 1 {
		t.Fatalf("sent %d frames after Warm, want the HELLO alone", n)
	}
	for i := range 3 {
		a.Send(b.id, &wire.Message{Type: wire.TypeHalt, Epoch: uint64(i + 1), From: a.id})
	}
	recvN(t, b, 3, 5*time.Second)
	if s, r := a.counters.Sent(wire.TypeHello), b.counters.Received(wire.TypeHello); s != 1 || r != 1 {
		t.Errorf("HELLO sent %d, received %d; want the warm connection's 1 and 1", s, r)
	}
	if d := sumDropped(&a.counters); d != 0 {
		t.Errorf("dropped %d frames", d)
	}
}

// A peer that refuses the first rounds is warmed once it listens; a
// refusal is reported to nobody and starts no backoff.
func TestTCPWarmRetriesUntilPeerListens(t *testing.T) {
	key := testClusterKey(t)
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there until b does
	bid := uuid.New()
	a.SetPeers([]wire.Member{{ID: bid, Addr: addr}})

	a.Warm([]uuid.UUID{bid}, time.Millisecond)
	a.warmer.mu.Lock()
	first := a.warmer.timer
	a.warmer.mu.Unlock()
	// A round that found the peer cold schedules the next after it set a
	// writer dialling; once that writer is done, a dial was refused.
	waitFor(t, 5*time.Second, "a refused warm-up", func() bool {
		a.warmer.mu.Lock()
		next := a.warmer.timer != first
		a.warmer.mu.Unlock()
		a.mu.RLock()
		defer a.mu.RUnlock()
		p := a.peers[bid]
		if !next || p == nil {
			return false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.writing
	})
	select {
	case r := <-a.Refusals():
		t.Fatalf("a warm-up reported %+v", r)
	default:
	}
	a.mu.RLock()
	at := a.peers[bid].retryAt.Load()
	a.mu.RUnlock()
	if at != 0 {
		t.Fatalf("a refused warm-up backs off until %d", at)
	}
	b, err := ListenTCP(addr, bid, TCPConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	waitFor(t, 5*time.Second, "HELLO received once the peer listens", func() bool { return b.counters.Received(wire.TypeHello) == 1 })
}

// Without a cluster key a connection's first frame is a message, and one
// idle for HandshakeTimeout is closed: Warm does nothing.
func TestTCPWarmNeedsKey(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	a.Warm([]uuid.UUID{b.id}, 0)
	a.warmer.mu.Lock()
	scheduled := a.warmer.timer != nil
	a.warmer.mu.Unlock()
	if scheduled {
		t.Fatal("Warm without a key scheduled a warm-up round")
	}
	a.Flush(time.Second)
	a.mu.RLock()
	defer a.mu.RUnlock()
	if p := a.peers[b.id]; p != nil {
		t.Fatalf("Warm without a key made send state for the peer")
	}
}

// Frames written in Send's goroutine (writeQuick) to a peer that stops
// reading: what the full socket does not take is left to a writer, and
// every frame arrives whole, in order, counted once.
func TestTCPQuickWritesToStalledPeer(t *testing.T) {
	ln := listenRecvBuf(t, 4096)
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{SendBuffer: 4096, WriteTimeout: 30 * time.Second})
	bid := uuid.New()
	a.SetPeers([]wire.Member{{ID: bid, Addr: ln.Addr().String()}})
	const n = 300 // 60 KB: past what the sockets hold, within the queue
	payload := make([]byte, 200)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	for i := range n {
		a.Send(bid, &wire.Message{Type: wire.TypeMembers, Epoch: uint64(i), From: a.id, Payload: payload})
		// Idle between frames while the socket takes them, so that Send
		// writes them itself; stalled, the writer queues the rest.
		a.Flush(time.Millisecond)
	}
	c := <-accepted
	defer c.Close()
	r := wire.NewReader(c, wire.DefaultMaxFrame)
	for i := range n {
		var m wire.Message
		if err := r.Read(&m); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if m.Epoch != uint64(i) || len(m.Payload) != len(payload) {
			t.Fatalf("frame %d: epoch %d with %d bytes", i, m.Epoch, len(m.Payload))
		}
	}
	if !a.Flush(10 * time.Second) {
		t.Fatal("flush timed out")
	}
	if s, d := a.counters.Sent(wire.TypeMembers), sumDropped(&a.counters); s != n || d != 0 {
		t.Errorf("sent %d, dropped %d; want %d and 0", s, d, n)
	}
}
