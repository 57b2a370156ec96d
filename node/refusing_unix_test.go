//go:build unix

package node

import (
	"net"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// refusingSocket is a TCP socket bound to a loopback port and not
// listening: connects to its address are refused, and since it holds the
// port (without SO_REUSEADDR) nothing else on the machine can listen there
// meanwhile, as it could at the address of a listener bound and closed.
type refusingSocket struct {
	fd   int
	addr string
}

// refusing returns a refusingSocket, closed when the test ends unless
// Listen handed it over.
func refusing(t testing.TB) *refusingSocket {
	t.Helper()
	// SOCK_CLOEXEC is Linux's; set the flag after, as Go's own net does
	// where the type takes no flags.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	r := &refusingSocket{fd: fd, addr: "127.0.0.1:" + strconv.Itoa(sa.(*unix.SockaddrInet4).Port)}
	t.Cleanup(func() {
		if r.fd >= 0 {
			unix.Close(r.fd)
		}
	})
	return r
}

// deadAddr returns a loopback address nobody listens on, for as long as
// the test runs: connects to it are refused.
func deadAddr(t testing.TB) string {
	t.Helper()
	return refusing(t).addr
}

// Listen starts listening on the socket, at its address, and returns it
// as a net.Listener, which the caller closes.
func (r *refusingSocket) Listen(t testing.TB) net.Listener {
	t.Helper()
	if err := unix.Listen(r.fd, unix.SOMAXCONN); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(r.fd), r.addr)
	r.fd = -1
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
