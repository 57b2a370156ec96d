// Package node runs a leader-election node: Node drives an election.Machine
// (the algorithm NewElection picks by name) over TCP, persists its State, and
// serves its status, metrics and event log.
//
// # The node's clock
//
// A node reads wall time through its Clock, not the host's directly: Linux
// has no per-namespace wall clock, so the nodes of a testbed share their
// host's, and a clock fault (a host whose clock is off, or drifts) is made
// by offsetting and skewing the node's Clock (Node.SetClock, the control
// socket's POST /clock, `--clock-offset` and `--clock-rate`). It stamps the
// HELLOs the node sends and checks those it receives (TCPConfig.MaxClockSkew).
// Its rate also drives the Machine's timers, so that heartbeats and
// timeouts run fast or slow as on a drifting crystal; the offset touches
// only wall readings. The event log and the status keep the host's clock
// for their timestamps; the status and the metrics report the skew.
//
// # Crash evidence
//
// A follower learns that its leader's process is gone (Machine.PeerCrashed)
// without waiting for FailureTimeout when the leader's host says so: a
// crashed process's kernel closes its sockets, so every connection to or
// from it ends (a FIN or a reset) and its listener is gone, so a new
// connection is refused (a reset answers the SYN). These count as evidence:
//
//   - a connection from or to the leader ended by the leader (an end of
//     file or a reset read from it; TCPTransport reports it, CrashProber),
//     confirmed by a probe: one connect to the address the member list
//     gives for the leader, not the connection's remote address, made
//     through the dials' socket path (TCPConfig.Socket), that the leader's
//     host refuses within TCPConfig.DialTimeout;
//   - a frame to the leader whose connection attempt was refused
//     (RefusalRefused).
//
// These do not: a pause (SIGSTOP keeps the sockets open, and the kernel
// still accepts the probe), a partition that drops (silence: the probe
// gets no answer), a probe that connects (the leader lives; it closed one
// connection for its own reasons), a connection this node closed or
// refused a frame on. Those leave the failure timeout to detect the
// failure, as before. The probe closes before any byte, which the leader's
// transport does not count as a peer issue. One probe per peer is
// in flight at a time, paced (crashProbeMinGap doubling to
// crashProbeInterval), so a peer that opens and closes connections in a
// loop costs its followers ten probes a second and, as long as its
// listener answers, no election. A probe that connects waits
// crashProbeHold for the peer to end it: a dying process's kernel may
// close a connection before its listener, which then takes the probe and
// resets it when it closes. That reset counts as the refusal; an end of
// file (a live peer closing it) is probed once more. A node with a
// process of its own (`bullylab node`) keeps its listener at its highest
// descriptor (TCPConfig.ListenerClosesFirst), so that when the process
// dies the listener is released first (Linux releases a dying process's
// sockets highest descriptor first) and the probes its connections' ends
// set off are refused at once. A refused probe also starts the peer's
// backoff, as a refused dial does: the dying kernel may not yet have
// closed this node's connection to it, and a new leader's COORDINATOR
// written there would still reach the wire, to be reset. Frames to the
// peer are dropped as unreachable until the backoff ends or the peer is
// heard from.
//
// # Warm connections
//
// An election's first frames need not wait for connections: a follower
// connects ahead of time to the peers its Machine would send to first if
// the leader failed (election.Standby, Warmer), a FailureTimeout after it
// began to follow, and only with a cluster key (the HELLO is such a
// connection's only frame; it sends no message). For the Bully that is the
// highest follower's connection to every member below it, for its HALTs,
// and each of those members' to it, for their HALT_ACKs: 2(N-2)
// connections a cluster at most, none of them on a boot's critical path.
// On star16 the failover's 14 connects and HELLOs each way had been 8 ms
// of a 34 ms time to leader. A standby peer that refuses (still booting)
// is tried again, backing off to 8 FailureTimeouts, and a refusal there
// is no evidence and starts no backoff of the frames to it.
//
// The election the evidence starts is the failure detector's, ordered the
// same way: the highest follower elects at once, the others only after
// ElectionTimeout and their stagger (election.Core.ArmFailureDetector
// says why), so the highest survivor still halts the rest. Its frames
// carry the reason leader-crashed instead of leader-failed, so that a
// capture shows which detection ran. On star16 (defaults, a 2-core host
// at load average 1.5 to 3, `bullylab bench --topology star16 --scenario
// leader-crash --runs 20`, 3 rounds alternating with the build before the
// warm connections, the listener closing first and Send's own writes) a
// killed leader's survivors elected in 15.4 ms at the median of rounds
// (13.8 to 20.3, every run on crash evidence, 42 messages each) against
// 37.7 ms (33.8 to 42.5) before; by the failure timeout it had taken
// 468 ms (456 to 492), and 546 ms at load average 90.
//
// A network fault that resets instead of dropping is not a crash, but the
// evidence can make it look like one. The testbed's reset mode (partition,
// isolate and cut with mode: reset) answers a SYN across the cut with a
// reset and resets an established connection at its next segment, sent to
// the side that sent it. A follower cut off from a live leader that sends
// it something (its connection then reset, its probe refused by the cut)
// elects at network speed although the leader lives: a false crash,
// harmless to SLE1 (the leader is out of its reach either way, and the
// election is the one the failure timeout would start later) but earlier.
// A follower of a stable leader sends it nothing, though, and the reset
// goes to the sender of the segment, the leader, so in the usual case the
// cut side hears silence and the failure timeout runs as under a drop. The
// bench measured it on star5, the leader cut off (partition-minority and
// an isolation of the leader, as scenario files with mode: reset or drop):
//
//	cut                          mode   detected by          detection p50, max  time to leader p50, max
//	partition-minority (5 runs)  drop   failure timeout 5/5  487, 580 ms         721, 769 ms
//	partition-minority (5 runs)  reset  failure timeout 5/5  529, 585 ms         720, 747 ms
//	isolate the leader (5 runs)  reset  failure timeout 5/5  508, 543 ms         530, 583 ms
//
// (FailureTimeout 500 ms, the defaults.) A reset cut thus elects as a drop
// does; its resets only shorten the elections' own rounds (a refused HALT
// counts its target failed at once). The false crash needs a follower
// that writes to its leader across the cut, a TCP keepalive on an idle
// connection for one, which comes seconds after the failure timeout has
// fired.
//
// # Hostile and broken peers
//
// A node runs on networks it does not control, so nothing a peer sends may
// crash it or wedge its cluster:
//
//   - Identity. With a cluster key (TCPConfig.Key, `--cluster-key`) every
//     connection proves membership in its HELLO, and every frame carries a
//     tag (wire/doc.go). Which member a connection is from, its HELLO
//     proves by a signature with that member's own key (TCPConfig.MemberKey,
//     `--member-key`), checked against the public key the peers file gives
//     for the ID (TCPConfig.PeerKeys). A frame naming another sender is
//     dropped, so LEAVE, HALT or COORDINATOR in a member's name come only
//     from that member. A node without a key runs only when told to
//     (`--insecure`): anyone who reaches its port can then claim a member's
//     ID, but not become a new member (election.Config.Insecure refuses
//     JOINs from unknown IDs), and a forged LEAVE heals when the member is
//     heard from.
//   - Who may speak for a member. The cluster key alone proves membership,
//     not which member: a member holding it could send a HELLO in the
//     leader's name stamped 4 minutes ahead (inside MaxClockSkew), and since
//     a node refuses any HELLO not newer than the last it accepted from an
//     ID, it then refused the real leader's HELLOs after the leader restarted
//     (207 times in the run that found it) and stayed at the old epoch
//     while the others moved on, until the forged time passed. The rule that
//     makes replays fail is sound only if nobody but the member can advance
//     the member's clock. Two defences were weighed. Remembering the nonces
//     of accepted HELLOs instead of their times stops replays without an
//     order, but the cache must be bounded, and a hostile member can fill it
//     with HELLOs in the leader's name: then the node either forgets nonces,
//     and replays pass, or refuses new HELLOs, and the wedge is back.
//     Per-member keys remove the forgery itself, so they were chosen: each
//     member signs its HELLOs with its own ed25519 key, the peers file
//     lists the public keys (`bullylab keygen --member`), and when it lists
//     any, a node refuses (IssueSignature) a HELLO unsigned, not verifying,
//     or signed by another key than its sender's, before the HELLO's time is
//     looked at. A member the peers file does not list, one that joined
//     later, is trusted on first use: the key of its first accepted HELLO is
//     its key at this node until the node restarts. That is weaker than a
//     listed key (a hostile member that speaks first owns the unlisted ID
//     here), but it leaves the listed members, the leader among them, out
//     of reach. A peers file without keys keeps the old rule, for clusters
//     not yet given member keys.
//   - Epochs. A message may move a node's epoch forward by at most
//     election.EpochWindow; one beyond it, or beyond election.MaxEpoch, is
//     ignored and reported, so epochs never overflow and a member with a
//     bug cannot take the cluster's epochs far in one step.
//   - Algorithms. A cluster runs one election algorithm; a frame of the
//     other (wire.Type.Algorithm) is ignored and reported
//     (election.CauseAlgorithm, IssueAlgorithm), so a node started with
//     the wrong one says so instead of electing on its own.
//   - Membership. JOIN and MEMBERS can grow the list to
//     election.Config.MaxMembers at most; MEMBERS counts only as the reply
//     to this node's own JOIN.
//   - Connections. The transport bounds accepted connections, the time to
//     the first frame and the time a frame may take, and gives buffers back
//     when connections close (TCPTransport).
//
// Everything refused is counted by PeerIssue (the control socket's
// counters.peer_issues) and logged as peer_refused with the peer and its
// address, at most once a second per issue and host.
package node
