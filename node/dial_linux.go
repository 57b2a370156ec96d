package node

import (
	"net"
	"net/netip"
	"os"
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
func quickDial(addr string, userTimeout time.Duration) (c net.Conn, done bool, err error) {
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
	fd, serr := rawSocket(domain, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
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
