package node

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// countingSocket is a TCPConfig.Socket that makes plain sockets and counts
// them.
func countingSocket(n *atomic.Int64) SocketFunc {
	return func(domain, typ, proto int) (int, error) {
		n.Add(1)
		return unix.Socket(domain, typ, proto)
	}
}

// Both transports make every socket through their Socket: the listener
// and the dial, and frames flow both ways on them.
func TestTCPSocketFunc(t *testing.T) {
	var na, nb atomic.Int64
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Socket: countingSocket(&na)})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Socket: countingSocket(&nb)})
	members := []wire.Member{{ID: a.id, Addr: a.LocalAddr()}, {ID: b.id, Addr: b.LocalAddr()}}
	a.SetPeers(members)
	b.SetPeers(members)
	for i := range 5 {
		a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: uint64(i), From: a.id})
		b.Send(a.id, &wire.Message{Type: wire.TypeAnswer, Epoch: uint64(i), From: b.id})
	}
	recvN(t, b, 5, 10*time.Second)
	recvN(t, a, 5, 10*time.Second)
	// One listener and one dial each; a redial would add more.
	if na.Load() < 2 || nb.Load() < 2 {
		t.Errorf("sockets made through Socket: %d and %d, want at least 2 each (listener, dial)", na.Load(), nb.Load())
	}
}

// A refused dial through Socket is reported as one through socket(2) is.
func TestTCPSocketFuncRefused(t *testing.T) {
	var n atomic.Int64
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{Socket: countingSocket(&n)})
	peer := uuid.New()
	a.SetPeers([]wire.Member{{ID: peer, Addr: deadAddr(t)}})
	a.Send(peer, &wire.Message{Type: wire.TypeHalt, Epoch: 7, From: a.id})
	select {
	case r := <-a.Refusals():
		if want := (Refusal{Peer: peer, Type: wire.TypeHalt, Epoch: 7}); r != want {
			t.Errorf("refusal %+v, want %+v", r, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no refusal reported for a HALT to a port nobody listens on")
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d sockets made through Socket, want 2 (listener, the refused dial)", got)
	}
}

// A connect the kernel does not settle at once is waited for on the socket
// Socket made, up to the timeout, or until the context ends.
func TestDialViaPending(t *testing.T) {
	_, port := fullListener(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var n atomic.Int64
	_, err := dialVia(t.Context(), countingSocket(&n), addr, 50*time.Millisecond, 0)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("dial to a full accept queue: %v, want a timeout", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := dialVia(ctx, countingSocket(&n), addr, time.Minute, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("dial with a cancelled context: %v, want context.Canceled", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d sockets made for 2 dials", got)
	}
}

// dialVia connects as net.Dialer does, TCP_USER_TIMEOUT set.
func TestDialViaConnects(t *testing.T) {
	ln, err := listenVia(countingSocket(new(atomic.Int64)), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := dialVia(t.Context(), countingSocket(new(atomic.Int64)), ln.Addr().String(), time.Second, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := unix.GetsockoptInt(fdOf(c), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); err != nil || got != 1500 {
		t.Errorf("TCP_USER_TIMEOUT %d (%v), want 1500", got, err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
}

// With Socket, names cannot be resolved: the error names the address.
func TestSocketFuncNeedsAddresses(t *testing.T) {
	_, err := ListenTCP("localhost:0", uuid.New(), TCPConfig{Socket: countingSocket(new(atomic.Int64))})
	if err == nil || !strings.Contains(err.Error(), "localhost:0 is not an IP address and port") {
		t.Errorf("listen on a name with Socket: %v", err)
	}
}

// Connection attempts the kernel does not settle at once take a slot each,
// MaxDialing at most; a frame whose slot does not come before it expires is
// dropped as expired, without a dial or a backoff.
func TestTCPMaxDialing(t *testing.T) {
	_, port := fullListener(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var sockets atomic.Int64
	const slots, peers = 2, 5
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{
		Socket: countingSocket(&sockets), MaxDialing: slots,
		DialTimeout: 2 * time.Second, FrameTTL: 200 * time.Millisecond,
	})
	members := []wire.Member{{ID: a.id, Addr: a.LocalAddr()}}
	for range peers {
		members = append(members, wire.Member{ID: uuid.New(), Addr: addr})
	}
	a.SetPeers(members)
	sockets.Store(0) // the listener's
	for _, m := range members[1:] {
		a.Send(m.ID, &wire.Message{Type: wire.TypeElection, Epoch: 1, From: a.id})
	}
	c := a.Counters()
	waitFor(t, 5*time.Second, "frames expired waiting for a slot", func() bool { return c.DroppedFor(DropExpired) == peers-slots })
	waitFor(t, 10*time.Second, "dials timed out", func() bool { return c.DroppedFor(DropUnreachable) == slots })
	// One quick connect per peer, closed when the SYN went unanswered, and
	// one waited-for dial per slot.
	if got, want := sockets.Load(), int64(peers+slots); got != want {
		t.Errorf("%d sockets made, want %d: %d quick connects and %d dials", got, want, peers, slots)
	}
	if got := c.DroppedFor(DropExpired) + c.DroppedFor(DropUnreachable); got != peers {
		t.Errorf("%d frames dropped, want %d", got, peers)
	}
}
