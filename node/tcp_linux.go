package node

import (
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT from linux/tcp.h, which package
// syscall does not define.
const tcpUserTimeout = 0x12

// setUserTimeout makes the kernel abort a connection whose written data
// stays unacknowledged for d. Without it, frames written during a silent
// partition sit in the socket buffer and are retransmitted for up to ~15
// minutes, so a healed partition would deliver stale ELECTIONs and HALTs.
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
