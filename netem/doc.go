// Package netem builds testbeds of Linux network namespaces from topologies
// and degrades their links, all through netlink and nftables: the layer
// under the lab (netem/lab), which runs nodes on a testbed and faults them.
//
// Testbed (Build, Attach) is one run's switch and node namespaces, veths
// and the processes started in them, recorded in a state file (RunState)
// so that Clean can remove what a killed run left. Firewall (partitions)
// and Impairer (delay, jitter, loss, duplication, reordering, with the
// netem qdisc or an NFQUEUE delayer as backend) act in one node namespace;
// Probe says which the kernel supports.
package netem

import "errors"

// ErrNotSupported is returned (wrapped) when the kernel lacks a feature a
// fault needs, such as the netem qdisc. Tests skip on exactly this error.
var ErrNotSupported = errors.New("not supported by this kernel")
