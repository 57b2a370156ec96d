package node

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawReader reads a connection with raw read(2) calls between netpoller
// waits, bypassing the runtime's syscall bookkeeping. Every ordinary
// syscall wakes the runtime's sysmon thread when it sleeps, and an idle
// follower's sysmon sleeps between heartbeats: each heartbeat then cost
// four more context switches, most of an idle node's CPU. A read on a
// non-blocking socket returns at once, so it needs none of that.
type rawReader struct {
	rc syscall.RawConn
}

// newConnReader returns a reader for c's payload: raw reads where c
// exposes its descriptor, c itself otherwise.
func newConnReader(c net.Conn) io.Reader {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return rawReader{rc: rc}
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
			n, rerr = rawRead(int(fd), b)
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

func rawRead(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
