//go:build !linux

package capture

import (
	"context"
	"errors"
	"net"

	"github.com/vishvananda/netns"
)

// NodePort is a node's port on the testbed switch.
type NodePort struct {
	Veth string
	MAC  net.HardwareAddr
}

// Stats are a live capture's counters.
type Stats = CaptureStats

// Live is a running capture; live capture needs Linux.
type Live struct{}

// Start fails: live capture needs Linux (AF_PACKET, network namespaces).
func Start(context.Context, netns.NsHandle, map[int]NodePort, *Writer) (*Live, error) {
	return nil, errors.New("capture: live capture needs Linux")
}

// Stop does nothing.
func (l *Live) Stop() (Stats, error) { return Stats{}, nil }
