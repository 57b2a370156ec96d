// Package results is what a bench measured and how it is read: the
// results' model and results.json, their statistics, bench.txt for
// benchstat, the summary table, and Compare, the CI regression gate of
// `bullylab compare`. It runs nothing and builds on any system, so that
// benches measured on Linux are read and compared anywhere.
//
// # Map
//
//	results.go      Results and their JSON, results.json (below); Summarize
//	availability.go a run's availability (Availability: unavailability,
//	                leader changes, verdict), its summary and comparison
//	hostfiles.go    the files the shared host processes held open
//	check.go        Checks: a run's safety (SLE1) and liveness (SLE2)
//	                verdicts as results.json records them
//	stats.go        Percentile, Mean, Distribution
//	bootstrap.go    the bootstrap interval compare holds each row to
//	benchfmt.go     bench.txt for benchstat (below): WriteBenchText,
//	                ParseBenchText
//	compare.go      Compare, CompareFiles and their Verdict (below)
//	table.go        the summary and comparison tables; summary.go the
//	                summary's two layouts, its columns and their units
//	explain.go      which run each percentile is (PercentileRanks), in
//	                words
//	terminal_linux.go  IsTerminal, TerminalWidth: how wide a summary is
//	                laid out (terminal_other.go: no terminal off Linux)
//	resultstest/    deterministic sample results for tests
//
// # results.json
//
// Schema "bullylab.bench/v1". A v1 reader ignores fields it does not know;
// a change that removes a field or changes its meaning bumps the version,
// and DecodeResults refuses any other version. Durations are integer
// nanoseconds in fields ending in _ns; times are RFC 3339 with nanoseconds.
//
//	schema                "bullylab.bench/v1"
//	tool                  the program that measured
//	  name                "bullylab"
//	  version             as `bullylab version` prints it (-ldflags -X main.version)
//	  go_version          the Go toolchain that built it
//	  revision            VCS revision, when the build recorded one
//	host                  the machine that measured
//	  os, arch            GOOS and GOARCH
//	  kernel              uname -r
//	  cpu                 the CPU model (/proc/cpuinfo)
//	  cores               logical CPUs
//	started, finished     wall-clock span of the bench
//	topology              the testbed of every run
//	  name, source        topology name, and the file or "built-in"
//	  nodes               node count
//	  settings            heartbeat_ns, failure_timeout_ns, election_timeout_ns shared by
//	                      every node, or by most when node_settings lists the others
//	  node_settings       node name -> timings, for nodes that differ
//	  overrides[]         the timings `bench --set` gave every node, absent without
//	                      any; settings and node_settings hold them already
//	    name              heartbeat, failure_timeout, election_timeout or
//	                      detection_stagger, as a topology file names it
//	    value_ns          the value set
//	    topology_ns       the value most of the topology's nodes had
//	seed                  --seed; run i (from 0) used seed+i
//	settings              how the bench was asked to run
//	  runs                --runs, per scenario
//	  scenario            --scenario as given: a built-in name or a file
//	  params              scenario parameters given: k, delays, loss, faults
//	  impair_backend      netem or nfqueue
//	  sle2_bound_ns       the SLE2 bound of the topology's own network (runs under
//	                      a delay fault apply a larger one: checks.sle2_bound_ns)
//	scenarios[]           one per scenario run (latency-sweep gives one per delay)
//	  name, description
//	  labels              variant labels such as {"delay": "50ms"}; with name, the key
//	                      compare matches scenarios by ("latency-sweep delay=50ms")
//	  algorithm           the election the runs ran, bully or ring; absent (in a
//	                      results.json from before there was a choice) reads as
//	                      bully. A key other than Bully's ends " algorithm=ring"
//	                      ("leader-crash algorithm=ring")
//	  source              the scenario file, or "built-in NAME"
//	  definition          the scenario as a YAML file (scenario.Format)
//	  runs[]              every run, in order
//	    index             from 1
//	    seed              the run's seed: a bench with --seed this --runs 1 replays it
//	    started           when the run's testbed began to build
//	    ok                the run passed every check
//	    failure_kind      why it failed: safety, tenures, liveness, counters, fault,
//	                      auth, step, setup or node (a node stopped by itself)
//	    failure           how, in one line
//	    time_to_leader_ns from the measured election's trigger (below) until the winning
//	                      COORDINATOR (the ring's: ELECTED) left the leader for the
//	                      last node it had to reach
//	                      (live at the election's end, not cut off from the leader),
//	                      by the capture; when the capture shows the election not
//	                      converging, from the measured fault to the lab's poll that
//	                      saw the nodes waited for follow one leader
//	    detection_ns      from the trigger to the election's first message on the wire,
//	                      its first ELECTION, HALT or RING_ELECTION, whichever came
//	                      first (with the detection stagger, a leader crash's election
//	                      can hold no ELECTION: the highest survivor halts the rest
//	                      first); absent when nothing had to be detected (cold
//	                      start) or no record triggered the election
//	    leader, epoch     who led after the measured election
//	    election          the measured election's number in the capture's analysis
//	                      (n, as `bullylab analyze` lists them); absent when the
//	                      capture holds none
//	    messages          wire type -> frames of the measured election in the
//	                      capture, HEARTBEATs left out
//	    counters          ok: the nodes' frame counters match the capture;
//	                      mismatches: one line each where they do not;
//	                      at_most: nodes that wrote into a network dropping
//	                      packets, whose counts only bound the capture's
//	    capture           the run's pcapng, relative to results.json
//	    schedule          the fault schedule, one resolved step a line
//	    checks
//	      leaders_per_epoch  [{epoch, leaders}]: who led each epoch
//	      leader_overlaps    [{start_ns, end_ns, leaders, dual}]: windows with
//	                         several leaders, times from the measured fault;
//	                         dual: dual leaders, part of the window outside every
//	                         disruption and its grace, when they could reach each
//	                         other (an SLE1 violation); else leaders apart, each on
//	                         its side of a cut (expected)
//	      split_brain        the same windows as before leader_overlaps was, with
//	                         connected for dual: still written for v1 readers, and
//	                         read from a file that has no leader_overlaps
//	      convergence_ns     from when the lab had the run's last fault (any kind) in
//	                         force to the last election message on the wire before
//	                         the last wait_leader saw the live nodes it waited for
//	                         agree (that poll, with no message in between), when they
//	                         agreed on the highest of them; absent when that never
//	                         happened, which fails the run on liveness
//	      sle2_bound_ns      the bound convergence was held to: node/bully/doc.go's
//	                         formula with d from the largest delay in force;
//	                         absent when loss was still in force at the end
//	    unavailable_ns    from the measured disruption's start (the run's first fault
//	                      that changed the network or the processes) until every live
//	                      node followed one leader it reached both ways, and stayed so
//	                      to the run's end (to the end when that never came), by the
//	                      nodes' event logs and the faults in force
//	    leader_changes    leader tenures, (leader, epoch), begun after that start
//	    later_leader_changes  leader tenures in the capture begun after the run
//	                      settled (its time to leader) and before the next fault:
//	                      the leader changing again with no fault to make it;
//	                      absent without a measured election or from before it
//	    availability      the rest of it; these three are absent when unknown (a
//	                      results.json from before, event logs that could not be read)
//	      disruption_ns   the disruption's start from the measured fault (<= 0)
//	      hold_ns         the hold window: from a disruption that cut links
//	                      (partition, isolate, cut) to the heal, or to the run's end;
//	                      absent when it cut none (a crash)
//	      verdict         over the hold window (without one: from the disruption on):
//	                      converged (the nodes settled, each live node following a
//	                      leader it reaches both ways, that leader leading, nodes
//	                      that traffic joins, directly or through others, following
//	                      the same one, so one leader per side of a partition but
//	                      one for all under a cut that leaves the network in one
//	                      piece, and stayed so to the window's end), flapping (not settled, two or more
//	                      tenures begun within the window, one within its last
//	                      quarter) or stuck
//	      converged_ns    when it settled for good, from the disruption's start;
//	                      without a hold, the time to leader
//	      leader_changes_per_s  the tenures begun within the hold window per second
//	      leaders         the nodes that led at some time after the disruption
//	      dual_leader_ns  how long two leading nodes could reach each other both ways
//	      leaderless_ns   node -> how long it ran without a leader it could reach
//	                      both ways
//	    host_processes[]  the shared host processes that ran the nodes (hosting:
//	                      shared), in order; absent with a process per node
//	      name            host, or host-1 ... host-k of several
//	      nodes           how many nodes it ran (dealt round-robin)
//	      peak_files      the most files it held open, counted every 250 ms
//	  summary             over the runs that passed, except the counts
//	    runs, ok, failed
//	    time_to_leader    {n, min_ns, mean_ns, p50_ns, p95_ns, p99_ns, max_ns}
//	    detection         the same, when runs measured it
//	    convergence       the same, of checks.convergence_ns
//	    messages          wire type -> {mean, max} frames per election
//	    messages_total    {mean, max} of all types together
//	    failures          [{kind, runs, example}]: failed runs by kind
//	    later_leader_changes  {measured, runs, most}: of the runs that counted them,
//	                      those whose leader changed again, the most of one run
//	    availability      when runs measured it: unavailable {n, min_ns, ...} and
//	                      leader_changes {mean, max} over the runs that passed,
//	                      verdicts {verdict: runs} over every run
//	    host_files        when the nodes ran in shared host processes, over every
//	                      run: {runs, processes (the most of one run), peak_files
//	                      (of one process), peak_files_per_node (a process's peak
//	                      over its nodes)}
//	partial               absent when every planned run finished; when the bench
//	                      stopped early (SIGINT, SIGTERM: bench.RunBench's ctx ended):
//	  reason              why, such as "interrupted by SIGINT"
//	  runs_planned        runs of every scenario together, as asked
//	  runs_done           the runs scenarios[] hold: those that finished. The run
//	                      in progress at the interrupt is not a result, neither
//	                      passed nor failed, and its capture is removed; a
//	                      scenario with no finished run is left out. With no run
//	                      finished, nothing is written
//
// The summary table and report.html say a partial bench is partial.
//
// The measured election is the one the capture's analysis attributes to
// the measured fault, the last fault before the scenario's measured
// wait_leader (capture.Analyze: its trigger is that fault's record), else
// the first election under way at or after that fault; times run from its
// trigger, which is normally that fault's record (capture.Analyze says how
// a trigger is found; with no record, the election's first message).
//
// Percentiles are nearest-rank (see Percentile): always a time some run
// measured; with fewer than 100 values p99 is the largest, with fewer than
// 20 p95 too, and with 30 p95 is the second largest. report.html and the
// summary table say, for the number of runs that passed, which run each
// percentile is (PercentileRanks).
//
// # The summary table
//
// The summary table shows a percentile only where it is not the max:
// p95 from 20 values, p99 from 100 (n >= 100/(100-p)); p50 and max always.
// Its column is there when one scenario shows it, "-" in the others, and a
// line under the table says which were left out for how many runs. Its
// detection columns are report.html's, p50 and p95. A column of times has
// one unit, named in its header: ms, or s when its largest reaches 10 s,
// with the decimals its values need.
//
// It fits the terminal: the full layout (a box, the messages of an
// election by type) from 100 columns when it fits in them, else the
// compact one (no box, runs as passed/all, the messages only in all,
// scenario keys wrapped at their spaces), which fits 80 columns for a
// dozen scenarios with keys such as "latency-sweep delay=100ms". The
// width is SummaryOptions.Width, else on a terminal $COLUMNS or the
// terminal's own (TIOCGWINSZ). Written anywhere else, a file or a pipe,
// it is the full layout, whatever the width.
//
// # bench.txt
//
// One result line per run that passed, in the Go benchmark format, so that
// `benchstat old.txt new.txt` computes medians and confidence intervals
// over the runs; failed runs are "# failed" comments, which benchstat skips
// and ParseBenchText reads:
//
//	goos: linux
//	goarch: amd64
//	pkg: github.com/bullylab/bullylab
//	cpu: AMD EPYC 7B13
//	Unit detection-ns/op better=lower
//	Unit msgs/op better=lower
//	BenchmarkElection/topology=star16/scenario=leader-crash/algorithm=bully 1 578458000 ns/op 575701000 detection-ns/op 42 msgs/op 14 halt-msgs/op ...
//	BenchmarkElection/topology=star16/scenario=leader-crash/algorithm=ring 1 580112000 ns/op 576020000 detection-ns/op 30 msgs/op 15 ring_election-msgs/op ...
//	# failed BenchmarkElection/topology=star16/scenario=leader-crash/algorithm=bully run 7 liveness: ...
//
// ns/op is the time to leader. The algorithm is a name key of its own, so
// that `benchstat -col /algorithm bench.txt` sets the algorithms side by
// side; a name without it (a bench.txt from before there was a choice) is
// Bully's. Only configuration keys that do not change
// between two benches on one machine are written, because benchstat splits
// results with different file configuration into separate tables.
//
// # compare
//
// Compare matches two benches' scenarios by key (the algorithm part of
// it), or, when each bench ran one algorithm and not the same, by the
// scenario's key alone, contrasting the algorithms with a note; and compares, per scenario,
// the time to leader p50, p95, p99 and max, the detection p50 and p95, the
// unavailability p50, p95, p99 and max and the mean leader changes (when
// both benches measured them: a results.json from before leaves them
// unknown, n/a, never a regression), the mean messages per election in
// all and by type, and the share of failed runs. A p95 or p99 that a side's runs do not support (fewer than 20 or
// 100, as in the summary table) is left out, being that side's slowest run,
// which max compares; so is a message type neither bench sent. Every metric
// is lower-is-better: one regresses when it grew by more than
// CompareOptions.MaxRegress relative to the base and by more than a noise
// floor (1 ms, half a message or leader change), and its own test shows
// it: the bootstrap interval (BootstrapInterval) of the difference, new
// minus base, of the statistic the row shows, its nearest-rank percentile
// or its mean, lies above zero. Each side's runs are resampled with
// replacement BootstrapResamples (2000) times by a generator seeded from
// the row's scenario and metric, so one pair of files always gives the
// same intervals; a side needs BootstrapMinRuns (5) passed runs. Any
// larger share of failed runs regresses.
// Verdict maps to the exit status: 0 pass, 1 regressed, 2 unusable input
// (an unreadable file, another schema, another topology or other scenarios,
// named in the error). An input larger than MaxResultsSize (64 MiB) is
// unusable too: compare reads no further.
package results
