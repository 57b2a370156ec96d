//go:build !linux

package capture

import (
	"context"

	"github.com/vishvananda/netns"
)

// Live is a running capture; there is none on this system (see
// ErrNotSupported).
type Live struct{}

// StartLive returns ErrNotSupported: live capture needs Linux.
func StartLive(context.Context, netns.NsHandle, map[int]NodePort, *Writer, ...LiveOptions) (*Live, error) {
	return nil, ErrNotSupported
}

// Stop returns ErrNotSupported.
func (l *Live) Stop() (Stats, error) { return Stats{}, ErrNotSupported }
