// Package node is a Bully leader-election node: Machine is the algorithm as a
// deterministic state machine, and Node runs it over TCP with persistence.
//
// # Algorithm
//
// Nodes are ordered by ID, a version-4 UUID compared as an unsigned 128-bit
// big-endian number; the highest live node leads. This is the Bully algorithm
// with the Halt phase of Garcia-Molina (the "Stage 2" of the design notes),
// which is what makes SLE1 hold while a new leader takes over:
//
//   - A node that boots, restarts, or whose failure detector fires sends
//     ELECTION to every higher member (leaving out the leader it suspects) and
//     waits ElectionTimeout for an ANSWER.
//   - A node that gets ELECTION from a lower node answers it; if it was a
//     Normal follower it starts its own election; a Normal leader re-asserts
//     itself with a COORDINATOR to that node instead.
//   - Without an ANSWER the node is the highest alive: it proposes the ballot
//     (epoch+1, itself) with HALT to every lower member. A node accepts a HALT
//     whose ballot is above every ballot it promised and whose epoch is above
//     its leader's: it leaves Normal, promises the ballot and replies HALT_ACK;
//     otherwise it replies REJECT naming the ballot it holds.
//   - When every lower member acknowledged or refused the HALT (a TCP reset
//     to the connection: its process is not running), or ElectionTimeout
//     passed (the silent ones count as failed), the candidate sends
//     COORDINATOR to all members and leads the epoch. A COORDINATOR is accepted when its ballot is
//     not below the promise; one from a lower ID makes the receiver bully it.
//   - The leader sends HEARTBEAT to every member each HeartbeatInterval; a
//     follower that hears none from its leader for FailureTimeout + its
//     stagger elects. A leader that hears a HEARTBEAT from a lower leader (a
//     healed partition) elects, so the higher one takes the cluster under a
//     new epoch; one that hears a HEARTBEAT from a higher node takes it as
//     that node's COORDINATOR, since its own HEARTBEATs may not be getting
//     through (a transport still backing off from a node that was down).
//   - A node answered or halted waits WaitFactor x ElectionTimeout + its
//     stagger for a COORDINATOR, then starts over.
//
// The stagger orders detections. A node's rank below a node it watches (its
// leader, or the node that answered or halted it) is the number of members
// in its member list with an ID strictly between the two; members that left
// are not in the list, crashed ones still are. Its stagger is
// min(rank x DetectionStagger, ElectionTimeout), recomputed when members join
// or leave. The leader's HEARTBEATs reach every follower at about the same
// time, so without it every survivor of a leader crash elects at once; with
// it the highest survivor (rank 0) detects first and halts the others before
// their own, later, deadlines (the Machine emits HALTs highest first, though a
// transport with one connection per peer need not keep that order). A halted or
// answered node has left Normal: its failure detector is off, and its wait
// for a COORDINATOR is staggered the same way, so that a candidate dying
// while the others wait does not make them all elect at once either. The cap
// keeps large clusters from waiting seconds: past one ElectionTimeout the
// rank-0 node has finished its HALT round, so waiting longer buys nothing.
// The stagger changes when timers fire, never what a message does, so the
// properties below hold with any value; 0 disables it. The bullied path is
// unchanged: a Normal follower that gets ELECTION from a lower node and has
// missed two heartbeats leaves the leader out of its own ELECTIONs.
//
// Cold start: every node starts as a non-coordinator and elects (option 2 of
// the design notes). Option 1, every node starting as coordinator, has two
// Normal nodes disagree the moment both are up. The boot election is not
// staggered: a booting node has no leader to rank itself against, and a node
// restarting into a running cluster should not come up later for it; nodes
// booted together therefore still all elect at once, once.
//
// # Epochs
//
// The cluster epoch numbers leaders: it is fixed from an election to the
// leader's death and only a new round bumps it. Every message carries one.
// Each node keeps the highest epoch seen, its promise (the highest ballot
// accepted), and its leader's epoch; all three are persisted before the
// messages that depend on them are sent, so after a restart a node never
// goes back to an older epoch. Messages from a stale epoch are handled
// deterministically:
//
//	ELECTION, ANSWER, HEARTBEAT   any epoch only raises the highest-seen epoch;
//	                              a HEARTBEAT counts only from the leader at its epoch,
//	                              or at a leader from a higher node, as a COORDINATOR
//	HALT (e, c)                   accepted iff (e, c) > promise and e > leader's epoch,
//	                              else REJECT naming the promise
//	HALT_ACK e                    counted only for the candidate's current proposal e
//	COORDINATOR (e, s)            accepted iff (e, s) >= promise and e >= leader's epoch,
//	                              else REJECT naming the promise
//	REJECT (e, id)                a candidate retries with max(e, seen)+1 if id is lower,
//	                              or asks id with ELECTION if id is higher; a leader
//	                              outvoted by a newer ballot elects again; others
//	                              only raise the highest-seen epoch
//
// Two leaders never share an epoch unless a partition or lost messages hid
// one from the other (capture analysis reports that as an anomaly).
//
// # Message counts
//
// For N nodes ranked 1..N with leader N crashed in a stable cluster and
// constant delays, one election sends exactly (TestTextbookCounts asserts it
// for N = 2..50; HEARTBEATs are not counted). With the default stagger a
// leader crash is the first case: node N-1 detects DetectionStagger before
// node N-2 would, and its HALTs arrive within one message delay. The other
// two cases are what happens without the stagger (DetectionStagger 0) when
// detections are placed so, or with it when the survivors above fail too:
//
//	highest survivor detects:  HALT N-2, HALT_ACK N-2, COORDINATOR N-1
//	only the lowest detects:   ELECTION (N-2) + (N-2)(N-1)/2,
//	                           ANSWER   (N-2) + (N-3)(N-2)/2,
//	                           HALT N-2, HALT_ACK N-2, COORDINATOR N-1
//	everyone detects at once:  ELECTION (N-1)(N-2)/2, ANSWER (N-1)(N-2)/2,
//	                           HALT N-2, HALT_ACK N-2, COORDINATOR N-1
//
// One COORDINATOR, and in the lowest-detects case the N-2 ELECTIONs from nodes
// that did not suspect the leader, go to the crashed node; over TCP those
// never reach the wire, so a capture shows exactly one fewer COORDINATOR and
// N-2 fewer ELECTIONs than these counts.
//
// On a real network a node's timer or its HALT may come later than the
// stagger allows (a node not scheduled in time, on a loaded host): it then
// elects too, within the counts of the all-detect case. A survivor whose
// failure detector fires after the others followed the new leader sends its
// ELECTIONs late: each
// Normal follower it reaches answers and elects again (reason bullied), and
// the leader answers every such ELECTION with ANSWER and a COORDINATOR. On
// the wire, with L the ELECTIONs of reason bullied, one election then sends
// HALT N-2, HALT_ACK N-2, no REJECT, ELECTION at most (N-1)(N-2)/2 + L,
// ANSWER at most one per ELECTION, COORDINATOR N-2 to N-2+L (the bench's
// leader-crash test asserts it).
//
// # Properties
//
// SLE1: no two live Normal nodes name different leaders while the network is
// synchronous: no partition, loss or delay beyond the timeouts is in force,
// and none ended within the last SLE2 bound. Crashes and restarts may happen
// at any time. (Right after a partition heals its two leaders coexist until
// they hear each other; no algorithm without quorums avoids that.)
//
// SLE2: after the last fault, within
//
//	max(FailureTimeout + d + S, WaitFactor x ElectionTimeout + S, HeartbeatInterval + d) + 3 x ElectionTimeout + 10d
//
// every live node is Normal with the highest live node as leader, where d is
// the largest message delay and S the largest stagger, min((N-2) x
// DetectionStagger, ElectionTimeout) for N members (MaxStaggerDelay). A
// stale view is found within the first term (a dead leader, whose last
// HEARTBEAT may arrive d after it was sent, by a follower whose detector
// waits at most FailureTimeout + S; a candidate that died while others
// waited, at most WaitFactor x ElectionTimeout + S; a rival leader, which
// the stagger does not delay): the stagger grows the detection term by at
// most its cap, S <= ElectionTimeout;
// the highest live node then needs at most one ELECTION round to hear that
// nobody above is alive, one HALT round that may wait for dead nodes, and one
// more round after a REJECT, each within ElectionTimeout, plus the message
// delays of those rounds. TestRandomSchedules checks both properties on
// thousands of random fault schedules. Over TCP, d is not one packet's
// delay: a message to a peer without a connection (followers of a stable
// leader never talk to each other) waits for the handshake, three one-way
// delays in all, and d includes the retransmission a healed partition
// costs. When 2d exceeds ElectionTimeout the ANSWERs come too late, a
// lower node leads until the highest hears its HEARTBEAT, and SLE1 does
// not hold; the bound above still does.
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
//     ID, but not become a new member (Config.Insecure refuses JOINs from
//     unknown IDs), and a forged LEAVE heals when the member is heard from.
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
//     EpochWindow; one beyond it, or beyond MaxEpoch, is ignored and
//     reported, so epochs never overflow and a member with a bug cannot
//     take the cluster's epochs far in one step.
//   - Membership. JOIN and MEMBERS can grow the list to Config.MaxMembers at
//     most; MEMBERS counts only as the reply to this node's own JOIN.
//   - Connections. The transport bounds accepted connections, the time to
//     the first frame and the time a frame may take, and gives buffers back
//     when connections close (TCPTransport).
//
// Everything refused is counted by PeerIssue (the control socket's
// counters.peer_issues) and logged as peer_refused with the peer and its
// address, at most once a second per issue and host.
package node
