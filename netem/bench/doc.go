// Package bench is `bullylab bench`: it runs election scenarios on real
// testbeds (netem/lab) under a live capture, checks every run, and returns
// what it measured (Outcome), which its caller writes with
// report.WriteOutputs and results.WriteSummary.
//
// Package results holds the results' model, their files and compare;
// package report renders them as report.html.
//
// # Map
//
// The runner, a run in steps:
//
//	run.go          RunBench: every scenario Runs times on each algorithm,
//	                the algorithms interleaved run by run, each run on a
//	                fresh lab, and its Outcome
//	run_one.go      runOne and its runner: setup (lab and capture), settle
//	                (stable leader, quiet), inject (the scenario, its faults)
//	run_measure.go  measure: still counters, teardown (which reads the
//	                nodes' event logs), the capture's analysis, the measured
//	                election, the counters cross-check
//	run_judge.go    judge: checkInput (the capture's tenures, disruptions,
//	                convergence) for Check, and the run's report.Sequence
//	                for the report
//	check.go        Check: a run's safety (SLE1) and liveness (SLE2) checks
//	tenure.go       tenures as spans: the faults' cuts, successors, and the
//	                capture's and the logs' held to each other
//	tenure_log.go   the nodes' event logs: read, parsed, put on the
//	                capture's time line, their tenures
//	bound.go        node/bully/doc.go's SLE2 bound for a topology and a delay
//	target.go       labTarget, the scenario.Target on a lab
//
// Around it:
//
//	progress.go     the progress display: the run under way among all the
//	                bench's, its phase, elapsed time and ETA; a line per run
//	host.go         LocalHost and LocalTool: the machine and program that
//	                measured
//	capreport.go    AnalyzeCaptureReport: any capture's elections drawn as
//	                a run's are, for `bullylab report CAPTURE`
//	outdir.go       CheckOutDir and RemoveOutputs: another bench's outputs
//	fdbudget.go     the open files a shared topology's scenario needs: how
//	                many host processes carry it (HostProcesses), or
//	                CheckHostFiles's one-line refusal
//
// # Output files
//
// results.json, bench.txt, report.html and the run captures are written
// mode 0644 (results.OutputMode) whatever the umask, so that an unprivileged
// compare or browser reads what `sudo bullylab bench` wrote.
//
// A directory that holds another bench's outputs (OutputFiles) is refused
// by CheckOutDir; RemoveOutputs removes those files and no other.
package bench
