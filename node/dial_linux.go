package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// quickDial settles the dials whose outcome the kernel knows before
// connect(2) returns, without the netpoller: to a peer on the same host
// (loopback, or a testbed's veths and bridge) the SYN and its RST or
// SYN-ACK are processed within the call. A node booting into a cluster
// sends ELECTION to every higher member, most of which are often not up
// yet; in a 250-node testbed those refused dials, each a goroutine parked
// on the netpoller with its stack grown for net.Dialer, were a third of a
// booting node's CPU. done is false when the connection is still being
// established (a remote or impaired peer): the caller then dials with
// net.Dialer, which handles timeouts and cancellation; closing a socket in
// SYN-SENT sends nothing.
//
// socket, when not nil, creates the socket in place of socket(2) (see
// TCPConfig.Socket).
func quickDial(addr string, userTimeout time.Duration, socket SocketFunc) (c net.Conn, done bool, err error) {
	ap, perr := netip.ParseAddrPort(addr)
	if perr != nil || ap.Addr().Zone() != "" {
		return nil, false, nil
	}
	ip := ap.Addr().Unmap()
	var (
		domain = unix.AF_INET
		sa4    unix.RawSockaddrInet4
		sa6    unix.RawSockaddrInet6
		sa     unsafe.Pointer
		saLen  uintptr
	)
	if ip.Is4() {
		sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: ip.As4()}
		putPort(&sa4.Port, ap.Port())
		sa, saLen = unsafe.Pointer(&sa4), unsafe.Sizeof(sa4)
	} else {
		domain = unix.AF_INET6
		sa6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: ip.As16()}
		putPort(&sa6.Port, ap.Port())
		sa, saLen = unsafe.Pointer(&sa6), unsafe.Sizeof(sa6)
	}
	if socket == nil {
		socket = rawSocket
	}
	fd, serr := socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if serr != nil {
		return nil, false, nil
	}
	keep := false
	defer func() {
		if !keep {
			rawClose(fd)
		}
	}()
	cerr := rawConnect(fd, sa, saLen)
	if cerr == unix.EINPROGRESS {
		soerr, gerr := rawGetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case gerr != nil:
			return nil, false, nil
		case soerr != 0:
			cerr = unix.Errno(soerr)
		case !rawConnected(fd):
			return nil, false, nil // still connecting
		default:
			cerr = nil
		}
	}
	if cerr != nil {
		return nil, true, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("connect", cerr)}
	}
	// Set once connected: a refused dial, the common case, needs no
	// option, and the handshake is over, so the option's other use, ending
	// unanswered SYNs, does not arise.
	if userTimeout > 0 {
		if err := rawSetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds())); err != nil {
			return nil, true, os.NewSyscallError("setsockopt", err)
		}
	}
	f := os.NewFile(uintptr(fd), "")
	keep = true // f owns it now
	c, ferr := net.FileConn(f)
	f.Close()
	if ferr != nil {
		return nil, true, ferr
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// What net.Dialer sets by default.
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
	}
	return c, true, nil
}

// putPort stores port in network byte order.
func putPort(dst *uint16, port uint16) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}

// sockaddrOf returns addr, an IP literal and port, as a sockaddr.
func sockaddrOf(addr string) (domain int, sa unix.Sockaddr, err error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().Zone() != "" {
		return 0, nil, fmt.Errorf("%s is not an IP address and port: a node whose sockets are made for it (TCPConfig.Socket) dials and listens on addresses only", addr)
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}, nil
	}
	return unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}, nil
}

// dialVia dials addr on a socket that socket creates, as net.Dialer would
// on one of its own: the connect is waited for through the netpoller,
// until timeout or ctx ends.
func dialVia(ctx context.Context, socket SocketFunc, addr string, timeout, userTimeout time.Duration) (net.Conn, error) {
	domain, sa, err := sockaddrOf(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	fd, err := socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", err)}
	}
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	f := os.NewFile(uintptr(fd), "")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := awaitConnected(ctx, c.(*net.TCPConn), timeout); err != nil {
		c.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	if userTimeout > 0 {
		if err := rawSetsockoptInt(fdOf(c), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds())); err != nil {
			c.Close()
			return nil, os.NewSyscallError("setsockopt", err)
		}
	}
	c.(*net.TCPConn).SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
	return c, nil
}

// awaitConnected waits until c's non-blocking connect has completed:
// the socket turns writable once it is connected or has failed.
func awaitConnected(ctx context.Context, c *net.TCPConn, timeout time.Duration) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	c.SetWriteDeadline(time.Now().Add(timeout))
	defer c.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	var connErr error
	werr := rc.Write(func(fd uintptr) bool {
		v, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			connErr = os.NewSyscallError("getsockopt", err)
		case v != 0:
			connErr = os.NewSyscallError("connect", unix.Errno(v))
		default:
			return rawConnected(int(fd))
		}
		return true
	})
	switch {
	case werr != nil && ctx.Err() != nil:
		return ctx.Err()
	case werr != nil:
		return werr // os.ErrDeadlineExceeded: "i/o timeout", as net.Dialer says
	}
	return connErr
}

// fdOf returns c's descriptor, for a setsockopt while c is open.
func fdOf(c net.Conn) int {
	fd := -1
	if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
		rc.Control(func(f uintptr) { fd = int(f) })
	}
	return fd
}

// listenVia listens on addr on a socket that socket creates, as
// net.Listen would on one of its own.
func listenVia(socket SocketFunc, addr string) (net.Listener, error) {
	domain, sa, err := sockaddrOf(addr)
	if err != nil {
		return nil, err
	}
	fd, err := socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	// As net.Listen: a restarted node rebinds its port while connections
	// of its previous incarnation linger in TIME_WAIT.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	if err := unix.Listen(fd, listenBacklog()); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("listen", err)
	}
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	return net.FileListener(f)
}

// listenBacklog is what net.Listen passes to listen(2): the kernel's
// somaxconn, which it caps the backlog at anyway.
func listenBacklog() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if err != nil {
		return unix.SOMAXCONN
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return unix.SOMAXCONN
	}
	return n
}
