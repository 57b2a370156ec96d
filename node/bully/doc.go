// Package bully is the Bully leader election with the Halt phase of
// Garcia-Molina, as a deterministic election.Machine (Elector, NewElector).
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
// their own, later, deadlines (the Elector emits HALTs highest first, though a
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
// constant delays, one election sends exactly (node's TestTextbookCounts
// asserts it for N = 2..50 on its simulator; HEARTBEATs are not counted). With the default stagger a
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
// # Best and worst case
//
// For a leader crash in a cluster of N, as this implementation counts
// messages (the formulas above, summed; HEARTBEATs aside):
//
//	best, the highest survivor detects:  N-2 HALT + N-2 HALT_ACK + N-1 COORDINATOR
//	                                     = 3N - 5 (3N - 6 on the wire: one
//	                                     COORDINATOR goes to the dead node)
//	worst, only the lowest detects:      N(N-2) ELECTION and ANSWER + 3N - 5
//	                                     = N^2 + N - 5
//	everyone detects at once:            (N-1)(N-2) ELECTION and ANSWER + 3N - 5
//	                                     = N^2 - 3
//
// The default stagger makes the best case the usual one. The textbook
// Bully, without the Halt phase, needs N-2 COORDINATORs at best (the
// highest survivor detects) and O(N^2) messages at worst (the lowest
// detects, and every node it reaches elects in turn); the Halt phase costs
// 2(N-2) more messages in every case, and is what makes SLE1 hold while a
// new leader takes over. The ring election (package ring) needs 2(N-1) for
// the same leader crash, 2N at best and 3N-1 at worst for an election among
// N live nodes.
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
// delays of those rounds. Node's TestRandomSchedules checks both properties
// on thousands of random fault schedules. Over TCP, d is not one packet's
// delay: a message to a peer without a connection (followers of a stable
// leader never talk to each other) waits for the handshake, three one-way
// delays in all, and d includes the retransmission a healed partition
// costs. When 2d exceeds ElectionTimeout the ANSWERs come too late, a
// lower node leads until the highest hears its HEARTBEAT, and SLE1 does
// not hold; the bound above still does.
package bully
