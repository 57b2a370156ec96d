package node

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
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

// listenerPinFD is the lowest descriptor pinListener duplicates the
// listener to: above the connections of any node with a process of its
// own, and small enough that the kernel's descriptor table for it stays
// 32 KiB.
const listenerPinFD = 4095

// pinListener keeps a duplicate of ln's socket at a descriptor above all
// others and returns what closes it; nil when ln is no TCP listener or
// the process may not open so high a descriptor. A dying process's kernel
// closes its descriptors in order, but releases their sockets last first
// (seen on Linux 6.18): a listener at its usual low descriptor closed
// after every connection, 2.6 ms after the first FIN on a quiet star16,
// and accepted the probes the FINs set off meanwhile. A socket is released
// at its last descriptor's close, here the highest, so now it goes first.
func pinListener(ln net.Listener) func() {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return nil
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		return nil
	}
	pinned := -1
	rc.Control(func(fd uintptr) {
		pinned, err = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, listenerPinFD)
	})
	if err != nil || pinned < 0 {
		return nil
	}
	return func() { unix.Close(pinned) }
}
