//go:build !linux

package node

import (
	"syscall"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT is not available; the
// FrameTTL and WriteTimeout still bound how stale a queued frame can get,
// but not one already in the socket buffer.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }
