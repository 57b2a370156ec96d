// Package ring is the classical ring leader election, with the
// multiple-initiator rule, epochs and failure handling, as a deterministic
// election.Machine (Elector, NewElector) beside Bully's.
//
// # Algorithm
//
// The ring is the members in ascending ID order (IDs compared as Bully
// compares them, election.Less), the highest wrapping to the lowest; each
// node sends to its clockwise successor, the next higher ID. A run is
// named by (epoch, initiator) and runs are ordered so; its RING_ELECTION
// frame carries the epoch the run proposes, the initiator and the best
// candidate so far.
//
//   - A node starts a run at boot, when its failure detector fires, when a
//     run it takes part in times out, or on request: epoch max(highest
//     epoch seen, epoch of its promise) + 1, candidate itself. While it
//     takes part in a run (it started or forwarded one and has not heard
//     the result) its status is "electing"; it starts no second run then.
//   - Receiving RING_ELECTION (e, i, c): a run below the last one the node
//     forwarded (its promise) is dropped: the seed's multiple-initiator
//     rule, generalised from initiator IDs to (epoch, initiator), so that a
//     later election is never beaten by an older one. A run not newer than
//     the node's leader's epoch comes from a node that missed that
//     election; a Normal node tells its initiator the leader with ELECTED
//     instead. If c is the node itself, it wins. Otherwise it forwards the
//     run with candidate max(c, itself), promises the run (persisted as
//     State.Promise = (e, i), so that a restarted node never forwards a
//     lower run) and leaves Normal: the winning run passes every live node
//     before the win, which is what makes SLE1 hold.
//   - The winner leads epoch e and sends ELECTED (e, itself) to its
//     successor. A node accepts ELECTED (e, l) if e is at least the epoch
//     of the run it promised and of its leader (at its leader's epoch only
//     a higher l), follows l and forwards it, until it returns to l. A copy
//     arriving again is not forwarded. A node higher than l does not accept
//     it: the run missed it, so it starts a run, which it wins.
//   - The leader sends HEARTBEAT to every member each HeartbeatInterval;
//     the failure detector and its DetectionStagger are Bully's (a follower
//     that hears none for FailureTimeout + min(rank below the leader x
//     DetectionStagger, ElectionTimeout) starts a run), so after a leader
//     crash the highest survivor starts first and its run reaches the
//     others before their own deadlines. A leader that hears another
//     leader's HEARTBEAT (a healed partition) starts a run; the run passes
//     both leaders and their followers, and the higher of the two, or any
//     live node above both, wins it. Both start one, the lower too, since
//     its HEARTBEATs may not get through to the higher one (a transport
//     backing off from a node that was down). A node taking part in a run
//     that hears a HEARTBEAT at an epoch at least its run's takes it for
//     the ELECTED it missed (the run skipped it, as a suspected leader that
//     restarted, or the frame was lost): it follows a higher leader and
//     starts a run against a lower one, rather than wait for its run
//     timeout.
//   - Membership (JOIN, LEAVE, MEMBERS, Config.MaxMembers, Config.Insecure),
//     the epoch window and the persisted State are Bully's
//     (election.Roster). A leader answers a JOIN with ELECTED naming
//     itself; a joining node's own run, at a stale epoch, is answered the
//     same way.
//
// A frame of the other algorithm (wire.Type.Algorithm) is ignored and
// reported (election.CauseAlgorithm), as is a payload that does not parse
// or names no node (election.CauseMalformed): a cluster does not mix
// algorithms.
//
// # Failure handling
//
// The ring breaks where a node is down, so a frame passes over it:
//
//   - A successor the transport reports refused (nobody listens at its
//     address: its process is not running, Machine.Refused) or
//     unreachable (its dial timed out, or the transport is backing off
//     from it after a failed dial: Unreachable) is skipped: the same frame
//     is sent to the member after it, and so on round the ring.
//   - The leader the failure detector suspects (the run's reason
//     leader-failed or leader-left) is left out of the ring by the node
//     whose detector fired, until it hears from it or follows a leader, so
//     that a leader crash costs no frame to the dead node.
//   - A frame is always handed to its candidate (or, for ELECTED, its
//     leader) when it is next, whatever the node thinks of it. If a
//     RING_ELECTION's candidate is the node found down, the node that found
//     it stands in as candidate and passes the frame on: no node above it
//     is alive on the run's way (it would have been the candidate), so it
//     is the highest live node the run has seen, and wins when the frame
//     comes back. Without this a run whose candidate died would circulate
//     for ever, since nobody would ever be its candidate. A candidate the
//     node does not know is treated the same way.
//   - A run that is lost all the same (its frame went to a node that then
//     crashed, into a partition, or to a paused node: a process stopped by
//     SIGSTOP keeps its kernel's TCP, which accepts and acknowledges the
//     frame, so nothing is refused or unreachable) is found by the run
//     timeout: a node that forwarded a run and saw neither its ELECTED nor
//     a newer run within RunTimeout(N) = (2N+1) x ElectionTimeout starts a
//     run of its own, newer than every run it has seen. A run and its
//     ELECTED take at most 3N hops, one more per member found down, 4N
//     hops of a message delay d each, which is at most ElectionTimeout/2
//     where Bully works at all. A paused successor is covered only by this
//     timeout, and only in part: nothing tells its predecessor that it
//     swallows frames, so every run that reaches it stops there, and the
//     ring elects again once it resumes (its queued frames then arrive
//     and the runs go on) or is stopped (its kernel then refuses). A
//     paused leader, the testbed's pause fault, costs nothing of the kind:
//     its followers' detectors suspect it and the runs skip it.
//   - A node forwards one run at most four times (twice when no candidate
//     is lost, once more for each candidate found down); past that the run
//     is looping and is dropped, leaving it to the run timeout.
//   - Epochs are bounded as Bully's: a message more than
//     election.EpochWindow ahead, or beyond election.MaxEpoch, is refused.
//
// # Message counts
//
// With N members all live and constant delays, one initiator at clockwise
// distance j from the highest node (j = 0 when the highest initiates) makes
// the run travel j hops to the highest node and N more with it as
// candidate, back to it:
//
//	RING_ELECTION  N + j
//	ELECTED        N          (round the ring back to the leader)
//	total          2N + j:    best 2N (j = 0), worst 3N - 1 (j = N - 1,
//	                          the highest node's successor, the lowest)
//
// k initiators starting together with equal delays cost what the lowest of
// them alone costs, 2N + j of the lowest: every run but the highest
// initiator's dies at the next initiator clockwise, which has promised its
// own higher run, and the hops of the dying runs and of the surviving one
// up to the highest node add up to the lowest initiator's distance.
//
// A leader crash, the testbed's case, in a cluster of N: the highest
// survivor's detector fires first, its run skips the dead leader it
// suspects and passes the N-1 survivors, and so does its ELECTED:
// RING_ELECTION N-1 and ELECTED N-1, 2(N-1), none sent to the dead node
// (a lone survivor, N = 2, sends nothing). A member found down otherwise
// costs one refused frame per pass that would cross it.
//
// HEARTBEATs are not counted. Node's TestRingCounts,
// TestRingConcurrentInitiators and TestRingLeaderCrashCounts assert these
// counts for N = 2..50 on its simulator.
//
// # Properties
//
// SLE1: no two live Normal nodes name different leaders while the network
// is synchronous (no partition, loss or delay beyond the timeouts in force,
// and none ended within the last SLE2 bound); crashes and restarts may
// happen at any time. The winning run passed every live node, each of
// which left Normal and promised the run, so none accepts an older
// ELECTED afterwards; the one node a run skips without trying is the
// leader its initiator's detector suspects, which in a synchronous network
// has crashed, or restarted and is not Normal until a run ends. Over TCP a
// node the transport still backs off from after it restarted is skipped
// too; it is electing until an ELECTED reaches it.
//
// SLE2: after the last fault, within
//
//	max(FailureTimeout + d + S, HeartbeatInterval + d, RunTimeout(N))
//	    + 2 x MaxHops(N) x d + HeartbeatInterval + d
//
// every live node is Normal with the highest live node as leader (SLE2Bound),
// where d is the largest message delay, S = min((N-2) x DetectionStagger,
// ElectionTimeout) the largest stagger, and MaxHops(N) = 6N - 1 the most
// frames one run and its ELECTED take (2N-1 RING_ELECTION, N ELECTED, and
// a resend per member found down on each of the three passes). A stale
// view is found within the first term: a dead leader by its followers'
// detectors, a rival leader by its HEARTBEAT, a run lost to the fault by
// its participants' run timeout, armed before the last fault. From then on
// no frame is lost, and the highest run that exists is dropped by nobody:
// it completes within MaxHops(N) x d, or a newer run started by one of
// those timers does, within another. A node the winner's run skipped as
// suspected leader and that is alive after all (it restarted) hears the
// winner's HEARTBEAT (HeartbeatInterval + d) or ELECTED and starts one
// more run, which it wins: that is the last term. Node's
// TestRandomSchedules found that case: before a node taking part in a run
// took a HEARTBEAT for its ELECTED, such a node waited for its run
// timeout, past the bound. Node's TestRandomSchedules checks
// both properties on 10,000 random fault schedules.//
// # Partial connectivity
//
// The testbed's scenarios chained, quorum-loss and bridge (r1 the highest
// node and the leader before the cut; see Bully's package doc for the
// patterns) cut links of the ring itself. The ring runs rN -> r(N-1) ->
// ... -> r2 -> r1 -> rN (ascending IDs, r1 wrapping to rN). Derived from
// the rules above with election.DefaultConfig, then checked in node's
// simulator, where a cut link drops what crosses it, both ways, and
// reports nothing to the sender, so no frame is passed over a cut: a run
// whose frame crosses a cut link is lost, and only the run timeout,
// RunTimeout(N) = 2.2 s at N = 5 and 6.6 s at N = 16, replaces it. What
// decides each pattern is therefore which ring links survive:
//
//   - Chained (r1-r2 cut): the one ring link cut is r2 -> r1, and r2 skips
//     r1 anyway: its detector fires first (rank 0), its run goes r2 -> rN
//     -> ... -> r3 -> r2, N-1 RING_ELECTIONs, and its ELECTED the same way,
//     N-1 more. r2 leads r2..rN within 10 to 100 ms of its detection. r1,
//     which nothing reaches (r2 was its only sender), keeps leading, its
//     HEARTBEATs ignored: two leaders that cannot reach each other, as with
//     Bully; stuck.
//   - Quorum-loss (r1..r(N-1) pairwise cut): every ring link but rN ->
//     r(N-1) and r1 -> rN is cut. r2's run, skipping r1, reaches rN and
//     r(N-1) and dies at r(N-1) -> r(N-2); every other run dies at its first
//     hop or at the next initiator, which holds a newer promise (the
//     multiple-initiator rule). Nobody wins. r1 keeps leading, reaching rN
//     only; r2..rN, rN included (it forwarded r2's run), are electing for
//     the whole hold, each starting a new run, one epoch up, every run
//     timeout: stuck, with about 2.5 election messages a second. rN hears
//     r1's HEARTBEATs but ignores them: their epoch is below the run it
//     promised.
//   - Bridge (r1 reaches only rN, r2 only r(N-1)): the ring links r3 -> r2
//     and r2 -> r1 are cut, and r2, skipping r1, sends to rN, also cut.
//     Every run dies at r3 -> r2 or r2 -> rN. rN, whose only ring sender is
//     r1, never sees a run and keeps following r1, which it reaches; r2..
//     r(N-1) are electing for the whole hold; stuck.
//
// After the heal, chained: r1 hears r2's HEARTBEAT and r2 hears r1's; both
// start runs, and r1 wins its own within 2N hops. Quorum-loss and bridge:
// the electing nodes still ignore r1's older HEARTBEATs and r1 hears
// nothing, so the cluster waits for the first run timeout after the heal;
// that run, passing r1 (a run newer than its epoch, which r1 forwards as
// candidate), elects r1: up to RunTimeout(N) plus 2N hops, within SLE2.
//
// With the cut in reset mode every send across it is refused, and the
// ring's failure handling takes the refused member for down: the frame
// goes to the member after it, and a node that finds the run's candidate
// refused stands in as candidate. The ring then routes around the cut,
// and the last node before it wins:
//
//   - Chained: as with drops, since r2 skips r1 anyway.
//   - Quorum-loss: r2's run reaches rN and r(N-1), which finds r(N-2) ..
//     r2 (the candidate: it stands in) and r1 refused and hands the run to
//     rN, back to itself: r(N-1) leads r(N-1) and rN. Every cut-off node
//     r2..r(N-2) is still electing; when its run times out, or rN answers
//     its run with an ELECTED naming r(N-1), lower than itself, it starts
//     a newer run, which takes the same way and which r(N-1) wins again at
//     a new epoch. Flapping by the verdict (elections won all along, one or
//     two per cut-off node per run timeout, each bumping the epoch), though
//     the leader rN follows stays r(N-1); r1 keeps leading alone.
//   - Bridge: r2's run, refused by rN, goes r(N-1) -> ... -> r3, which
//     finds r2 refused, stands in, and wins: r3 leads r3..rN. r2 stays
//     electing and each of its runs elects r3 again: flapping the same
//     way, r1 and r3 leading.
//
// After the heal r1 hears r(N-1)'s or r3's HEARTBEAT and its run elects
// it within 2N hops.
//
// Nothing of this was fixed: it is the ring's own behaviour, which the
// design notes warn of ("when nodes fail, the ring may get broken, and
// liveness may be violated"): a run needs every ring link, a link that
// drops silently looks like nothing at all, and one that resets looks
// like a node that is down. The implementation adds no storm to it: at
// most one run per node per run timeout, and one more when that run,
// stale, is answered with an ELECTED naming a lower leader; epochs grow
// by as much; no node forwards a run more than four times.
//
// Over TCP a dropping cut is seen by the transport too, later: a frame on
// a connection opened before the cut is lost silently until
// TCP_USER_TIMEOUT (2 s) aborts it, a dial into the cut times out (500 ms)
// and is reported unreachable, which the ring handles as a refusal, and
// the backoff after it reports the next frames unreachable at once. Over
// the simulator's model of the transport the ring behind a dropping cut
// therefore ends as behind a resetting one, passing the runs over the cut
// members, only slower: chained stuck, bridge flapping with r3, quorum-
// loss flapping with r(N-1) at N = 5. At N = 16 quorum-loss stays stuck as
// with silent drops: r(N-1) must pass the run over 14 cut members, each
// costing a dial timeout or a frame lost on an old connection, which is
// longer than the run timeout (6.6 s); the newer run that replaces it
// starts over. After the heal the transport's backoffs (up to 1 s) delay
// the frames that end it: every node follows r1 within 2 s.
//
// Node's TestPartialConnectivity asserts these outcomes on 10 seeds each
// with a 30 s hold (the columns are those of Bully's table), a silently
// dropping cut first:
//
//	pattern      N   verdict  unavailable  won  quiet  no-leader  msg/s  elections/s  recovery, dual
//	chained      5   stuck    never        1    448ms  439ms      80     0.3          45-58ms, 26ms
//	chained      16  stuck    never        1    546ms  508ms      298    1.0          96-153ms, 57ms
//	quorum-loss  5   stuck    never        0    -      30s        42     2.3-2.4      1.247-1.257s, 0s
//	quorum-loss  16  stuck    never        0    -      30s        153    2.6-2.7      3.541-3.571s, 0s
//	bridge       5   stuck    never        0    -      30s        41     1.4          1.242-1.259s, 0s
//	bridge       16  stuck    never        0    -      30s        152    2.3          3.542-3.57s, 0s
//
// and with the cut in reset mode:
//
//	chained      5   stuck     never       1    448ms  439ms      80       0.3        45-58ms, 26ms
//	chained      16  stuck     never       1    546ms  508ms      298      1.0        96-153ms, 57ms
//	quorum-loss  5   flapping  never       28   29.2s  30s        90-91    13.9       44-61ms, 26ms
//	quorum-loss  16  flapping  never       15   27.4s  30s        330-332  39.7-43.0  111-195ms, 50ms
//	bridge       5   flapping  never       14   29.1s  30s        84       6.1        47-58ms, 25ms
//	bridge       16  flapping  never       5    27.0s  30s        303      7.7        116-201ms, 60ms
//
// and with dropping, then resetting, cuts over the TCP model:
//
//	chained      5   stuck     never       1      439ms  429ms    80       0.3        42-945ms, 912ms
//	chained      16  stuck     never       1      575ms  539ms    298      1.0        119-522ms, 419ms
//	quorum-loss  5   flapping  never       15-19  29.7s  30s      66-71    7.9-9.6    355ms-1.533s, 483ms
//	quorum-loss  16  stuck     never       0      -      30s      161      10.9-11.1  536ms-1.347s, 103ms
//	bridge       5   flapping  never       13-14  30.0s  30s      77-81    5.8-6.1    148ms-1.221s, 659ms
//	bridge       16  flapping  never       4      28.4s  30s      262-267  7.0        422ms-1.404s, 780ms
//
//	chained      5   stuck     never       1      441ms  432ms    80       0.3        41-564ms, 533ms
//	chained      16  stuck     never       1      573ms  539ms    298      1.0        126-793ms, 703ms
//	quorum-loss  5   flapping  never       24-26  29.2s  30s      84-88    12.3-13.2  129-648ms, 486ms
//	quorum-loss  16  flapping  never       13-20  27.2s  30s      257-299  29.8-39.2  207ms-1.114s, 425ms
//	bridge       5   flapping  never       14     29.0s  30s      84       5.9        144-736ms, 614ms
//	bridge       16  flapping  never       4      27.0s  30s      269-270  6.5        245-843ms, 501ms
//
// Bully in the same patterns elects a second leader (chained), one per
// cut-off node (quorum-loss) or three (bridge), each within seconds, and
// then stays put; behind a dropping cut the ring elects r2 in chained
// only, and elsewhere leaves all but r1 (and in bridge rN) without a
// leader for as long as the cut lasts; behind a resetting cut, or a
// dropping one that TCP reports, it elects the last node before the cut
// over and over.
package ring
