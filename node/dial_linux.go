package node

import (
	"net"
	"net/netip"
	"os"
	"time"

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
func quickDial(addr string, userTimeout time.Duration) (c net.Conn, done bool, err error) {
	ap, perr := netip.ParseAddrPort(addr)
	if perr != nil || ap.Addr().Zone() != "" {
		return nil, false, nil
	}
	ip := ap.Addr().Unmap()
	var (
		domain = unix.AF_INET
		sa     unix.Sockaddr
	)
	if ip.Is4() {
		sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}
	} else {
		domain = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}
	}
	fd, serr := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if serr != nil {
		return nil, false, nil
	}
	keep := false
	defer func() {
		if !keep {
			unix.Close(fd)
		}
	}()
	if userTimeout > 0 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(userTimeout.Milliseconds())); err != nil {
			return nil, false, nil
		}
	}
	cerr := unix.Connect(fd, sa)
	if cerr == unix.EINPROGRESS {
		soerr, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if gerr != nil {
			return nil, false, nil
		}
		if soerr != 0 {
			cerr = unix.Errno(soerr)
		} else if _, perr := unix.Getpeername(fd); perr != nil {
			return nil, false, nil // still connecting
		} else {
			cerr = nil
		}
	}
	if cerr != nil {
		return nil, true, &net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(ap), Err: os.NewSyscallError("connect", cerr)}
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
