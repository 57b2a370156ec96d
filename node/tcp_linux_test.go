package node

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"golang.org/x/sys/unix"
)

func TestTCPSetsUserTimeoutAndNoDelay(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{UserTimeout: 1500 * time.Millisecond})
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, From: a.id})
	recvN(t, b, 1, 5*time.Second)

	a.mu.RLock()
	c := a.peers[b.id].cur.Load()
	a.mu.RUnlock()
	if c == nil {
		t.Fatal("no connection")
	}
	raw, err := c.Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ut, nd int
	var uerr, nerr error
	raw.Control(func(fd uintptr) {
		ut, uerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
		nd, nerr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
	})
	if uerr != nil || ut != 1500 {
		t.Errorf("TCP_USER_TIMEOUT = %d, %v; want 1500", ut, uerr)
	}
	if nerr != nil || nd == 0 {
		t.Errorf("TCP_NODELAY = %d, %v; want set", nd, nerr)
	}
}

// sendQueued returns the bytes in c's send queue, not yet acknowledged.
func sendQueued(t *testing.T, c net.Conn) int {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		t.Fatalf("SIOCOUTQ: %v %v", err, ierr)
	}
	return n
}

// connEnded sees a peer's FIN or reset before any goroutine reads it, and
// nothing on a connection the peer keeps open.
func TestConnEnded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, reset := range []bool{false, true} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if connEnded(c) {
			t.Fatalf("reset %v: ended while the peer holds it open", reset)
		}
		if reset {
			s.(*net.TCPConn).SetLinger(0)
		}
		s.Close()
		waitFor(t, 5*time.Second, "the end seen", func() bool { return connEnded(c) })
	}
}
