// Package lab runs one `bullylab node` process per topology node on a
// testbed and applies faults to them: the fixture that scenarios, the
// bench and `bullylab up` drive.
//
// Start builds the testbed, boots the nodes and, with StartOptions.Capture,
// captures the switch into a pcapng file with every fault recorded. Apply
// (or Crash, Partition, Delay, ...) applies a fault.Fault and reports it
// to OnFault observers; NodeStates and WaitLeader watch the election it
// causes, AgreedAt dates an agreement from the nodes' logs. Serve and
// Dial are the control API `bullylab up` serves to `bullylab status`,
// `fault` and `down`.
package lab
