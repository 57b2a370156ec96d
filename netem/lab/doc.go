// Package lab runs a topology's nodes on a testbed and applies faults to
// them: the fixture that scenarios, the bench and `bullylab up` drive. Each
// node runs as a `bullylab node` process of its own, or, for a topology
// with `hosting: shared`, inside `bullylab lab-host` processes that make
// each node's sockets in its own namespace (host.go): one, or as many as
// BootOptions.HostProcesses says, each with its own limit on open files.
//
// Boot builds the testbed, boots the nodes and, with BootOptions.Capture,
// captures the switch into a pcapng file with every fault recorded. A
// Lab's Faults apply a fault.Fault (Apply, or Crash, Partition, Delay,
// ...) and report it to OnFault observers; its Monitor's NodeStates and
// WaitLeader watch the election it causes, AgreedAt dates an agreement
// from the nodes' logs. Serve and Dial are the control API `bullylab up`
// serves to `bullylab status`, `fault` and `down`.
package lab
