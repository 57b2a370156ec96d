// Package netem builds testbeds of Linux network namespaces from topologies,
// runs bullylab nodes inside them and injects faults, all through netlink and
// nftables.
package netem

import "errors"

// ErrNotSupported is returned (wrapped) when the kernel lacks a feature a
// fault needs, such as the netem qdisc. Tests skip on exactly this error.
var ErrNotSupported = errors.New("not supported by this kernel")
