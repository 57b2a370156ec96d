// Package scenario defines the fault scenarios `bullylab bench` runs: timed
// steps that inject faults, wait for a leader, wait a while or heal, with
// nodes chosen by selectors resolved against the live testbed from a seed.
//
// # Files
//
// A scenario file, in the style of the topology files:
//
//	name: partition-minority   # [A-Za-z0-9._-]{1,64}; defaults to the file name
//	description: one line
//	start: stable              # stable (default) or cold
//	labels: {variant: a}       # key=value parts of the benchmark name
//	steps:
//	  - inject: {partition: {groups: [minority, rest], one_way: false}}
//	  - wait_leader: {timeout: 30s, expect: highest-live, among: [side:1], measure: true}
//	  - wait_election: {timeout: 30s}
//	  - wait: 500ms            # or {duration: 500ms}
//	  - heal                   # or heal: {}
//
// Steps:
//
//	inject         one fault, below
//	wait_leader    wait until the nodes waited for agree on one leader at one
//	               epoch. They are the live nodes of the largest connected
//	               part of the network (under a one-way partition: groups[1],
//	               which no longer hears groups[0]; under cuts, see below), or
//	               among: selectors. expect: highest-live
//	               (default) fails the run unless the highest of them leads,
//	               as SLE2 promises; any accepts any agreement. timeout
//	               defaults to 30s and failing it fails the run.
//	wait_election  wait until some live node is in an election
//	wait           let a duration pass
//	heal           undo every network fault: remove the partition and the
//	               cuts, reconnect isolated nodes, restore the topology's
//	               delay and loss; crashed and paused nodes stay down, and
//	               clocks stay as set
//
// Faults, named as the capture's fault records are:
//
//	crash: SEL        SIGKILL                 restart: SEL   start a node that is down
//	pause: SEL        SIGSTOP, sockets open   resume: SEL    SIGCONT
//	isolate: SEL      cut off from everyone   unisolate: SEL reconnect
//	isolate: {nodes: SEL, mode: reset}        the same, refusing rather than dropping
//	leave: SEL        LEAVE, then exit        join: SEL      start with JOIN
//	campaign: SEL     ask for an election     clear: SEL     restore the topology's impairments
//	heal              remove the partition and the cuts, reconnect isolated nodes
//	partition: {groups: [SEL, ...], one_way: BOOL, mode: drop|reset}
//	                  one_way: two groups, only 1 -> 2 cut
//	cut: {links: [[SEL, SEL], ...], one_way: BOOL, mode: drop|reset}
//	                  each link [A, B] cuts every node of A from every node
//	                  of B but itself ([X, X]: every pair within X), every
//	                  other link staying up; one_way: only A -> B. A cut
//	                  replaces the cut in force (partitions and isolations
//	                  stay), and heal removes it
//	clock: {nodes: SEL, offset: 90s, rate: 500ppm}
//	                  the wall clock the nodes read: offset (signed) now,
//	                  drifting at rate parts per million (signed, "ppm"
//	                  optional); both default to 0, and zero puts the nodes
//	                  back on their hosts' clocks
//	delay: {nodes: SEL, delay: 50ms, jitter: 5ms}   nodes defaults to all; keeps the loss
//	loss: {nodes: SEL, percent: 5%}                 keeps the delay
//
// mode says how partition, isolate and cut sever what they cut: drop
// (the default) drops every packet silently, as a pulled cable does;
// reset answers a SYN across the cut with a TCP RST, and every segment of
// a connection established before it too, so that it resets at its next
// segment.
//
// SEL is one selector or a list of them; a fault applies to their union.
// One scenario measures one election (the time to leader a bench reports):
// the wait_leader marked measure: true, else the first wait_leader after a
// fault. Unknown fields are errors, and every error is one line naming the
// file, line and field:
//
//	my.yaml:7: steps[2].inject.crash: unknown selector "top:x" (want ...)
//
// example.yaml in this folder (Example) is a commented file using every
// kind of step. A file holds at most MaxFileSize bytes (1 MiB).
//
// # Selectors
//
// Selectors pick nodes when their step runs, from the testbed as it is then
// (a View), never from the file alone:
//
//	leader            the leader the live nodes follow
//	highest, lowest   the highest- or lowest-ID node of the pool
//	top:K, bottom:K   the K highest- or lowest-ID nodes of the pool
//	rank:K            the K-th highest-ID node of the pool (rank:1 = highest),
//	                  counted over the whole pool whatever other selectors
//	                  took: [rank:2, rank:3] is the second and third highest
//	random, random:K  1 or K nodes of the pool, uniformly
//	all               the whole pool
//	minority          the floor((n-1)/2) highest-ID live nodes, n the live count:
//	                  by ID from the top, so in a stable cluster it holds the leader
//	majority          the floor(n/2)+1 highest-ID live nodes (idem)
//	minority:random   as many live nodes, drawn at random (majority:random alike)
//	side:N            the nodes of side N (from 1) of the partition in force
//	rest              partition groups only: every node no other group took
//	NAME              a node, else a topology group; node:NAME and group:NAME
//	                  say which, and are how to name a node called "leader"
//
// The pool is the set of nodes a fault can apply to: crashed nodes for
// restart, paused for resume, nodes that left for join, isolated nodes for
// unisolate, impaired nodes for clear, the live and connected for isolate,
// every node for delay and loss, every node but the paused for clock (one
// down gets the skew when it starts), the live nodes otherwise (and in partition
// groups and the ends of a cut's links). Keywords choose from the pool;
// names must be in it (restart n3 fails when n3 runs), but partition groups
// and links may name any node. Later selectors of a list do not choose
// what earlier ones did, so [leader, random] is two nodes. Partition groups
// must take every node of the testbed exactly once.
//
// # Partial connectivity
//
// A cut need not split the network into clean parts: under chained (r1-r2
// cut) every node still reaches every other through someone. wait_leader
// then waits, by default, for the largest connected component of the graph
// whose nodes are the live, unisolated nodes and whose edges are the pairs
// linked both ways (a one-way cut breaks the edge; so does the partition
// in force), ties going to the component holding the highest node. When
// the cuts leave that graph connected, that is every live unisolated node.
// side:N names the sides of a partition only; a cut has none. Resolve's
// schedule lists the pairs a cut severs, as a-b (a->b when one-way), lower
// ID first.
//
// # Seeds and schedules
//
// Nodes are ordered by ID, and the lab gives IDs in topology order, so
// highest, top:K and minority name the same nodes on every run. Random
// selectors draw from NewRand(seed), one sub-generator per step seeded
// before step 1, so a step's choice never depends on how many numbers
// earlier steps drew. Resolve prints the schedule a seed gives without a
// testbed, assuming every election elects the highest node waited for;
// Execute resolves each step the same way against the testbed's view at
// that moment, so the two agree whenever the testbed behaves, and two runs
// with one seed that see the same views do the same thing. RunSeed derives
// each run's seed from the bench's.
//
// # Built-ins
//
// Builtin returns the scenarios of the issue: cold-start, leader-crash,
// leader-pause, crash-during-election, cascade (Params.K), partition-minority,
// partition-majority, one-way-partition, latency-sweep (one scenario per
// Params.Delays point, labelled delay=...), loss (one scenario per
// Params.Losses percentage, labelled loss=...), churn,
// chaos (Params.Faults faults drawn from Params.Seed), and the partial
// connectivity of chained, quorum-loss and bridge. Those three rank the
// nodes by ID, r1 the highest (the leader before the fault) to rN the
// lowest, and name them rank:K:
//
//	chained      cut r1-r2 (N >= 3)
//	quorum-loss  cut every pair among r1..r(N-1); rN keeps every link (N >= 3)
//	bridge       r1 reaches only rN, r2 only r(N-1), r3..rN fully connected (N >= 4)
//
// Each starts stable, injects its cut, holds it for Params.Hold (30 s by
// default), heals, and measures the wait_leader after the heal (expect
// highest-live): the recovery. Params.Nodes sets N; too few nodes is an
// error naming the scenario and the minimum. Format prints any scenario as
// a file that parses back to it.
package scenario

import _ "embed"

// Example is example.yaml: a commented scenario using every kind of step.
//
//go:embed example.yaml
var Example []byte
