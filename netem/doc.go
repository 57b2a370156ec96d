// Package netem builds testbeds of Linux network namespaces from topologies,
// runs bullylab nodes inside them and injects faults, all through netlink and
// nftables.
//
// Testbed (Build, Attach) is the namespaces, links and processes; Firewall
// and Impairer are partitions and link impairments in one node namespace;
// Lab (StartLab) is a Testbed running one `bullylab node` per topology node,
// with faults (crash, pause, partition, delay, ...) reported to observers,
// and WaitLeader to see the election they cause. ServeControl and Client
// are the control API `bullylab up` serves to `bullylab status`, `fault`
// and `down`; Clean removes what a killed run left.
package netem

import "errors"

// ErrNotSupported is returned (wrapped) when the kernel lacks a feature a
// fault needs, such as the netem qdisc. Tests skip on exactly this error.
var ErrNotSupported = errors.New("not supported by this kernel")
