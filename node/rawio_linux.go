package node

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The transport's socket calls that cannot block (reads and writes on
// non-blocking sockets, and the calls of a non-blocking connect) are made
// as raw system calls, bypassing the runtime's syscall bookkeeping: an
// ordinary syscall wakes the runtime's sysmon thread when it sleeps, and
// sysmon takes the P from a syscall that spans two of its 20 us ticks, as
// a write or a refused connect through a testbed's veths and bridge can
// (the kernel carries the segment to the receiving socket, and the reset
// back, within the call). An idle follower's heartbeat cost four more
// context switches with ordinary reads, most of its CPU; a refused
// connect costs 13% less CPU raw (BenchmarkTCPSendRefused).

// rawReader reads a connection with raw read(2) calls between netpoller
// waits.
type rawReader struct {
	rc syscall.RawConn
}

// rawWriter writes a connection with raw write(2) calls between netpoller
// waits; the connection's write deadline bounds the waits.
type rawWriter struct {
	rc syscall.RawConn
}

// newConnReader returns a reader for c's payload: raw reads where c
// exposes its descriptor, c itself otherwise.
func newConnReader(c net.Conn) io.Reader {
	if rc := rawConn(c); rc != nil {
		return rawReader{rc: rc}
	}
	return c
}

// newConnWriter returns a writer for c: raw writes where c exposes its
// descriptor, c itself otherwise.
func newConnWriter(c net.Conn) io.Writer {
	if rc := rawConn(c); rc != nil {
		return rawWriter{rc: rc}
	}
	return c
}

func rawConn(c net.Conn) syscall.RawConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

func (r rawReader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var (
		n    int
		rerr error
	)
	err := r.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = rawRW(unix.SYS_READ, int(fd), b)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: rerr}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b unless an error or the deadline stops it.
func (w rawWriter) Write(b []byte) (int, error) {
	var (
		done int
		werr error
	)
	err := w.rc.Write(func(fd uintptr) bool {
		for done < len(b) {
			n, e := rawRW(unix.SYS_WRITE, int(fd), b[done:])
			switch e {
			case nil:
				done += n
			case unix.EINTR:
			case unix.EAGAIN:
				return false // wait until writable
			default:
				werr = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return done, err
	case werr != nil:
		return done, &net.OpError{Op: "write", Net: "tcp", Err: werr}
	}
	return done, nil
}

// rawRW is read(2) or write(2).
func rawRW(trap uintptr, fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawSocket(domain, typ, proto int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(domain), uintptr(typ), uintptr(proto))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// rawConnect connects fd to the address in sa, a RawSockaddrInet4 or
// RawSockaddrInet6 of length n.
func rawConnect(fd int, sa unsafe.Pointer, n uintptr) error {
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), n)
	if e != 0 {
		return e
	}
	return nil
}

func rawGetsockoptInt(fd, level, opt int) (int, error) {
	var v int32
	n := uint32(unsafe.Sizeof(v))
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, e
	}
	return int(v), nil
}

func rawSetsockoptInt(fd, level, opt, value int) error {
	v := int32(value)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt), uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawConnected reports whether fd has a peer: getpeername(2) succeeds.
func rawConnected(fd int) bool {
	var sa unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(sa))
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)))
	return e == 0
}

// rawClose closes fd. Closing a socket without SO_LINGER does not block.
func rawClose(fd int) {
	unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// connEnded reports whether the peer has ended c (a FIN or a reset is
// waiting to be read), without reading: on a connection the peer never
// writes to, anything readable is its end. The watching goroutine marks
// such a connection dead once it runs, but a frame written before that
// goes on the wire to a peer that is gone, and a capture counts it: a
// leader elected within milliseconds of its predecessor's crash wrote its
// COORDINATOR to it so, one more than the N-2 live nodes.
func connEnded(c net.Conn) bool {
	rc := rawConn(c)
	if rc == nil {
		return false
	}
	ended := false
	rc.Control(func(fd uintptr) {
		var b [1]byte
		_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		ended = e != unix.EAGAIN && e != unix.EINTR
	})
	return ended
}

// writeOnce makes one write(2) of b to c without waiting for room: it
// returns how much the socket took, and an error only when the write
// failed (not for a full socket buffer, nor a deadline already past,
// which leave n short).
func writeOnce(c net.Conn, b []byte) (int, error) {
	rc := rawConn(c)
	if rc == nil {
		return 0, nil
	}
	var (
		n    int
		werr error
	)
	rc.Write(func(fd uintptr) bool {
		for {
			n, werr = rawRW(unix.SYS_WRITE, int(fd), b)
			if werr != unix.EINTR {
				return true
			}
		}
	})
	if werr == unix.EAGAIN {
		return 0, nil
	}
	if werr != nil {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: werr}
	}
	return n, nil
}
