// Package netem builds testbeds of Linux network namespaces from topologies
// and degrades their links, all through netlink and nftables: the layer
// under the lab (netem/lab), which runs nodes on a testbed and faults them.
//
// Testbed (Build, Attach) is one run's switch and node namespaces, veths
// and the processes started in them, recorded in a state file (RunState)
// so that Clean can remove what a killed run left. Firewall (partitions
// and cuts, dropping or refusing with TCP resets) and Impairer (delay, jitter, loss, duplication, reordering, with the
// netem qdisc or an NFQUEUE delayer as backend) act in one node namespace;
// Probe says which the kernel supports.
//
// # Design: per-node kernel state at 1000 nodes
//
// The switch namespace routes between the nodes (routed.go): each node
// holds one neighbour entry, permanent (the switch's gateway, at
// SwitchMAC), and one route (its subnet, through the gateway); the switch
// holds a /32 route and a permanent neighbour entry per node, with
// forwarding on in its namespace only (no host sysctl is touched). A
// node's kernel state is thus constant in N, no ARP is ever sent, and the
// kernel's shared neighbour table stays far below its garbage-collection
// limit (net.ipv4.neigh.default.gc_thresh3, 1024 by default): 2N entries
// in all. There is no bridge, so no limit of 1023 ports: one switch
// namespace holds a veth per node, and topologies.MaxNodes is the limit.
// The capture keeps each frame once, on its sender's port
// (TestSwitchCapture), and Close and Clean remove a testbed by deleting
// its namespaces (BenchmarkBuild checks that nothing is left).
//
// The switch was a bridge before, and every node held a permanent
// neighbour entry for every peer, since ARP entries past gc_thresh3 failed
// connects with "neighbor table overflow" (4.9 million times while 250
// nodes booted): N-1 entries per node, N(N-1) in all, a million at 1000
// nodes. Measured before the bridge was replaced, by a benchmark since
// folded into BenchmarkBuild, building both (namespaces and links, no node
// processes; two runs on a 2-core VM shared with other builds, kernel
// 6.18; build times vary twofold with the other load, slab is steadier):
//
//	nodes  design  build (ms)   slab/node (KiB)  neighbours/node  switch
//	  100  bridge   231, 244     255, 250           99               0
//	  100  routed   129, 166     249, 241            1             100
//	  250  bridge   758, 767     396, 392          249               0
//	  250  routed   482, 1340    280, 280            1             250
//	  500  bridge  2313, 8064    550, 647          499               0
//	  500  routed  1203, 850     293, 293            1             500
//	 1000  bridge  9067, 6214    844, 814          999               0
//	 1000  routed  4324, 2542    328, 309            1            1000
//
// Routed over bridge at 1000 nodes: build 0.41-0.48, slab 0.38-0.39,
// neighbour entries 1/999 per node (2000 in all against 999,000).
// Teardown (unmounting the namespaces) is 0.26-0.79 s at 1000 either way.
// A permanent neighbour entry costs about 0.5 KiB of slab: at 1000 nodes
// the bridge's entries held about 500 MB of kernel memory.
//
// What the routed switch changes for the nodes: the frame a receiver gets
// has the switch's MAC as source and a TTL one lower than sent; addresses
// are unchanged, so partitions (nftables on source addresses at the
// receiver) and impairments (egress qdiscs and NFQUEUE in the node
// namespaces) act as before. A frame to a node whose port is down meets a
// blackhole route and vanishes, as on a bridge, rather than drawing an
// ICMP unreachable. Node names and veth indexes allow 9999 nodes; the
// build time and slab per node above are what limit MaxNodes.
package netem

import "errors"

// ErrNotSupported is returned (wrapped) when the kernel lacks a feature a
// fault needs, such as the netem qdisc. Tests skip on exactly this error.
var ErrNotSupported = errors.New("not supported by this kernel")
