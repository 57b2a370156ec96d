package capture

import (
	"errors"
	"net"
)

// Live capture: Start (live_linux.go) captures a testbed's switch with an
// AF_PACKET socket in its network namespace, which only Linux has; on other
// systems Start returns ErrNotSupported (live_other.go). What follows is
// the part of its API every system has.

// ErrNotSupported is what Start returns on a system without live capture:
// it needs Linux (AF_PACKET sockets and network namespaces). Reading,
// writing and analyzing capture files work everywhere.
var ErrNotSupported = errors.New("capture: live capture needs Linux (AF_PACKET, network namespaces)")

// NodePort is a node's port on the testbed switch.
type NodePort struct {
	// Veth is the switch-side veth, netem.SwitchVeth(run, index).
	Veth string
	// MAC is the node's eth0 address, if known; see the user-space filter
	// in live_linux.go.
	MAC net.HardwareAddr
}

// Stats are a live capture's counters; Live.Stop also hands them to the
// Writer's end record.
type Stats = CaptureStats

// LiveOptions configure Start.
type LiveOptions struct {
	// Exclude names devices of the switch namespace whose frames are not
	// captured at all: a testbed across hosts has its switch's overlay
	// device bring the other hosts' nodes' frames, which their own hosts
	// capture on their senders' ports.
	Exclude []string
}
