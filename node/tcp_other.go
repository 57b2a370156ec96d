//go:build !linux

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT is not available; the
// FrameTTL and WriteTimeout still bound how stale a queued frame can get,
// but not one already in the socket buffer.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }

// newConnReader returns c: the raw reads of the Linux build are an
// optimisation for idle nodes, not a feature.
func newConnReader(c net.Conn) io.Reader { return c }

// newConnWriter returns c, for the same reason.
func newConnWriter(c net.Conn) io.Writer { return c }

// quickDial leaves every dial to net.Dialer.
func quickDial(string, time.Duration, SocketFunc) (net.Conn, bool, error) { return nil, false, nil }

// dialVia is Linux's: TCPConfig.Socket is for testbeds of namespaces.
func dialVia(context.Context, SocketFunc, string, time.Duration, time.Duration) (net.Conn, error) {
	return nil, fmt.Errorf("dial with TCPConfig.Socket: %w", errors.ErrUnsupported)
}

// listenVia is Linux's, as dialVia.
func listenVia(SocketFunc, string) (net.Listener, error) {
	return nil, fmt.Errorf("listen with TCPConfig.Socket: %w", errors.ErrUnsupported)
}

// pinListener is Linux's: elsewhere the order in which a dying process's
// sockets close is left as it is.
func pinListener(net.Listener) func() { return nil }

// connEnded is Linux's: elsewhere the watching goroutine alone finds a
// connection's end.
func connEnded(net.Conn) bool { return false }

// writeOnce writes nothing: elsewhere the writer goroutine writes every
// frame, waiting as it must.
func writeOnce(net.Conn, []byte) (int, error) { return 0, nil }
