package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

func TestQuickDialRefused(t *testing.T) {
	addr := deadAddr(t)
	c, done, err := quickDial(addr, time.Second, nil)
	if !done || c != nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("quickDial(%s) = %v, done %v, %v; want a refusal", addr, c, done, err)
	}
	// The message reads as net.Dialer's does.
	if want := "dial tcp " + addr + ": connect: connection refused"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestQuickDialConnects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, done, err := quickDial(ln.Addr().String(), 1500*time.Millisecond, nil)
	if !done || err != nil {
		t.Fatalf("quickDial = done %v, %v; want a connection", done, err)
	}
	defer c.Close()
	if c.RemoteAddr().String() != ln.Addr().String() {
		t.Errorf("RemoteAddr %v, want %v", c.RemoteAddr(), ln.Addr())
	}
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ut int
	rc.Control(func(fd uintptr) { ut, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT) })
	if err != nil || ut != 1500 {
		t.Errorf("TCP_USER_TIMEOUT %d ms (%v), want 1500", ut, err)
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

// A connect the kernel cannot settle at once (here: a listener whose
// accept queue is full drops the SYN) is left to net.Dialer.
func TestQuickDialLeavesPendingConnects(t *testing.T) {
	_, port := fullListener(t) // it fails unless a quickDial was left pending
	if _, done, _ := quickDial(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 0, nil); done {
		t.Fatal("a connect to a listener with a full accept queue completed at once")
	}
}

// fullListener returns a listening socket on 127.0.0.1 whose accept queue
// is full, so that the SYNs of further connects are dropped, and its port.
// quickDial fills it: with a backlog of 0 the queue holds one connection,
// and the first connect left pending shows that it is full.
func fullListener(t *testing.T) (fd, port int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	port = sa.(*unix.SockaddrInet4).Port
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range 8 {
		c, done, err := quickDial(addr, 0, nil)
		if !done {
			return fd, port
		}
		if err != nil {
			t.Fatalf("quickDial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatalf("8 connects to a listener with a backlog of 0 all completed at once")
	return
}

// tcpPair returns the two ends of a loopback TCP connection, closed by
// the test's cleanup (closing one again is harmless). The dialled end's
// send buffer and the accepted end's receive buffer are set to 64 KiB
// (the kernel doubles it), so that how much a write to a peer that does
// not read takes in does not depend on the host's tcp_wmem and tcp_rmem:
// with maxima of 16 MiB, 16 MiB were taken in at once.
func tcpPair(t *testing.T) (dialled, accepted net.Conn) {
	t.Helper()
	const bufSize = 64 << 10
	ln := listenRecvBuf(t, bufSize)
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.(*net.TCPConn).SetWriteBuffer(bufSize); err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c, s
}

func TestRawReader(t *testing.T) {
	c, s := tcpPair(t)
	r := newConnReader(s)
	if _, ok := r.(rawReader); !ok {
		t.Fatalf("newConnReader(%T) = %T, want rawReader", s, r)
	}
	// The transport reads an accepted connection wrapped in an
	// inboundConn, which must not hide the descriptor.
	ir := (&inboundConn{Conn: s}).payloadReader()
	if _, ok := ir.(rawReader); !ok {
		t.Fatalf("an accepted connection's frames are read with %T, want rawReader", ir)
	}
	go func() {
		c.Write([]byte("frame"))
		c.Close()
	}()
	got, err := io.ReadAll(r) // ReadAll stops at io.EOF
	if err != nil || string(got) != "frame" {
		t.Fatalf("read %q, %v; want \"frame\" then EOF", got, err)
	}
	s.Close()
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after Close: %v, want net.ErrClosed", err)
	}
}

func TestRawWriter(t *testing.T) {
	c, s := tcpPair(t)
	w := newConnWriter(c)
	if _, ok := w.(rawWriter); !ok {
		t.Fatalf("newConnWriter(%T) = %T, want rawWriter", c, w)
	}

	// More than the socket buffers hold: the writer must wait for the
	// reader, through EAGAIN, and write every byte once, in order.
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(s, int64(len(big))))
		got <- b
	}()
	if n, err := w.Write(big); n != len(big) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the reader got %d bytes, not what was written", len(b))
	}

	// Nobody reads now: the deadline ends the wait for buffer space.
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := w.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(big) {
		t.Fatalf("Write to a peer that does not read = %d, %v; want fewer than %d bytes and a deadline error", n, err, len(big))
	}
	c.SetWriteDeadline(time.Time{})

	s.Close()
	for range 100 { // the reset arrives after the first write to a closed peer
		if _, err = w.Write([]byte("x")); err != nil {
			break
		}
	}
	if err == nil {
		t.Error("writes to a peer that closed the connection kept succeeding")
	}
}

// A dial whose SYN is lost (here: dropped by a listener whose accept queue
// is full, as a testbed drops it to a node whose namespace is not built
// yet) hangs until DialTimeout. A frame from the peer meanwhile proves it
// reachable: the transport abandons that dial and dials again at once,
// instead of keeping what is queued for the peer waiting for the timeout.
func TestTCPAbandonsHungDialWhenPeerHeard(t *testing.T) {
	lfd, port := fullListener(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{DialTimeout: time.Minute, UserTimeout: time.Minute})
	b := uuid.New()
	a.SetPeers([]wire.Member{{ID: b, Addr: addr}})
	a.Send(b, &wire.Message{Type: wire.TypeAnswer, Epoch: 5, From: a.id})
	a.mu.RLock()
	p := a.peers[b]
	a.mu.RUnlock()
	for deadline := time.Now().Add(10 * time.Second); p.abandonDial.Load() == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the transport is not dialling the peer with net.Dialer")
		}
		time.Sleep(time.Millisecond)
	}
	hung := waitSynSent(t, port, func(ports []int) bool { return len(ports) == 1 })[0]

	a.markAlive(b) // the peer's first frame
	waitSynSent(t, port, func(ports []int) bool { return len(ports) == 1 && ports[0] != hung })

	// Room in the accept queue: the new dial's SYN, retransmitted, is
	// accepted.
	nfd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(nfd)
	nfd, _, err = unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(nfd), "accepted")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var m wire.Message
	if err := wire.NewReader(c, wire.DefaultMaxFrame).Read(&m); err != nil {
		t.Fatalf("reading the frame: %v", err)
	}
	if m.Type != wire.TypeAnswer || m.Epoch != 5 {
		t.Fatalf("got %v epoch %d, want the ANSWER of epoch 5", m.Type, m.Epoch)
	}
}

// waitSynSent waits until the local ports of the sockets connecting to
// 127.0.0.1:port (SYN_SENT in /proc/net/tcp) satisfy ok, and returns them.
func waitSynSent(t *testing.T, port int, ok func([]int) bool) []int {
	t.Helper()
	want := fmt.Sprintf("0100007F:%04X", port)
	var ports []int
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		ports = ports[:0]
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && f[2] == want && f[3] == "02" { // TCP_SYN_SENT
				_, lp, _ := strings.Cut(f[1], ":")
				n, _ := strconv.ParseInt(lp, 16, 32)
				ports = append(ports, int(n))
			}
		}
		if ok(ports) {
			return ports
		}
		if time.Now().After(deadline) {
			t.Fatalf("sockets connecting to port %d: from ports %v, not what the test waits for", port, ports)
		}
		time.Sleep(time.Millisecond)
	}
}
