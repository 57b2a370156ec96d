// Package history keeps a regression history of benches for CI, one line
// per bench, scenario and algorithm, and finds where time to leader and
// messages per election changed over it (`bullylab history`).
//
// # The history file
//
// JSON Lines: one JSON object a line, an Entry, sorted by time, then
// commit, then series, so that a line never changes once written and two
// branches that each appended lines merge by taking both sides' lines:
// a `.gitattributes` line such as
//
//	bench-history.jsonl merge=union
//
// lets git merge it without conflicts. Parse reads lines in any order
// (Append writes them sorted again) and reads two identical lines, which a
// union merge of the same bench on both branches leaves, as one.
//
//	time           RFC 3339 in UTC: the bench's end unless given
//	commit         the commit measured (a hash, or any label without spaces)
//	topology       topology name
//	scenario       scenario key: name and labels ("latency-sweep delay=50ms")
//	algorithm      bully or ring
//	runs, ok       runs, and those that passed
//	partial        the bench was interrupted
//	ttl_p50_ns     time to leader, nearest-rank median over the passed runs
//	ttl_mean_ns    its mean
//	ttl_ns         each passed run's time to leader
//	messages_mean  mean messages per election, HEARTBEATs left out
//	messages       each passed run's messages
//	settings       the timings (heartbeat, failure_timeout, election_timeout,
//	               detection_stagger; a node's own as NODE.NAME), the
//	               scenario parameters given and the impairment backend
//
// A series is one topology, scenario and algorithm; its value per entry is
// the entry's time to leader p50 or its mean messages per election.
//
// # Change points
//
// EDivisive is E-Divisive with means (Matteson and James 2014), which
// MongoDB's performance CI adopted (Daly et al., ICPE 2020) and Apache
// Otava (formerly Hunter) builds on: it bisects a series where the energy
// divergence q (exponent alpha = 1) between the two sides is largest, and
// keeps the split when a permutation test within the segments found so
// far gives p <= 0.05 (199 permutations), recursing until a split is not
// significant. It assumes no distribution, which matters here: a bench's
// p50 of 10 runs is skewed by the failure timeout's jitter and stagger.
//
// Otava replaced the permutation test with a Student t-test of the
// segments either side of each candidate, run over sliding windows,
// because permutations made its results vary from run to run and cost
// too much on long histories, and because a new point could move old
// change points. Here the permutations are drawn from a generator seeded
// per series length, so one history always gives one answer; CI histories
// of benches are tens to hundreds of entries, where a test costs
// milliseconds (splitSegment is O(n²)); and the gate looks only at whether
// the newest entry brings a new change point, so old ones moving does not
// alert. The t-test's normality is what the skewed medians lack, and the
// permutation test's false alert rate holds without it: measured in the
// tests and on same-build benches.
//
// # The verdict
//
// check gives each series the verdict of its last change point: a
// regression when it is a rise of at least the minimum effect (10%, as
// compare's --max-regress, and compare's noise floor: 1 ms, half a
// message; DefaultMinEffect says why not less), the newest entry belongs
// to the risen segment, and the history without the newest entry (nor
// without the newest two, up to the minimum segment size) has no such
// rise within one entry of it. That is, the newest entry is what
// makes the change point appear: the gate fires once, when the risen
// segment reaches the minimum segment size (3 entries by default), and
// names the change point's commit as where the series rose. A rise found
// earlier is "regressed", not gated again; a fall is "improved". An entry
// whose every run failed, the newest, fails the gate too. A series not
// measured at the newest commit is not gated.
package history
