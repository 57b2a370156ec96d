//go:build linux

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
)

// errNoRuns is RunBench's error for options that ask for no run.
var errNoRuns = errors.New("bench: nothing to run")

// RunOptions configure Run.
type RunOptions struct {
	Topology *topologies.Topology
	// SettingOverrides are the timings Topology.WithSettings gave it,
	// recorded in results.json's topology.
	SettingOverrides []topologies.SettingOverride
	// Scenarios run one after the other, Runs times each on each of
	// Algorithms.
	Scenarios []*scenario.Scenario
	// Algorithms are the elections each run of a scenario runs on, one
	// after the other with the same seed and so the same fault schedule:
	// run 1 on each, then run 2 on each, so that what the host does
	// meanwhile hits them alike. Empty is the topology's.
	Algorithms []string
	// ScenarioArg and Params are --scenario and the parameters as given,
	// recorded in Settings.
	ScenarioArg string
	Params      map[string]string
	Runs        int
	Seed        int64
	// OutDir receives one pcapng per run, OutputMode, and is where the
	// caller writes the outputs (WriteOutputs); it is created if needed.
	OutDir string
	// Binary is the bullylab executable the nodes run.
	Binary string
	// Version is what `bullylab version` prints, for Results.Tool.
	Version string
	// Backend forces an impairment backend; "" probes.
	Backend string
	// Progress, when not nil, hears of every run.
	Progress *Progress
	// StableTimeout bounds the wait for the first leader of a run;
	// default scenario.DefaultTimeout.
	StableTimeout time.Duration
	// DiagramRuns are the runs of each scenario whose election
	// report.html draws; the zero value is DefaultDiagramRuns.
	DiagramRuns report.DiagramRuns
	// DiagramScale is the diagrams' time scale; "" is report.ScaleAuto.
	DiagramScale report.DiagramScale
	// Hosts reach the hosts of a topology that spans them (its hosts:
	// section); each run builds its testbed across them.
	Hosts *HostsOptions
	// HostProcesses, when not 0, is how many shared host processes run
	// the nodes of a topology with `hosting: shared`; 0 sizes each run's
	// by its scenario's estimated open files (planHosts).
	HostProcesses int
	// Abort, when it is closed after ctx ended, tells RunBench that the
	// partial outputs are not to be written (Outcome.Writable is false):
	// it returns once the run in progress is torn down. nil never aborts.
	Abort <-chan struct{}
}

// selectorGroups are the groups a scenario's selectors may name: the
// topology's, and across hosts each host, standing for its nodes (a
// topology refuses a host named like a node or a group).
func selectorGroups(topo *topologies.Topology) map[string][]string {
	if len(topo.Hosts) == 0 {
		return topo.Groups
	}
	groups := make(map[string][]string, len(topo.Groups)+len(topo.Hosts))
	maps.Copy(groups, topo.Groups)
	for _, h := range topo.Hosts {
		groups[h.Name] = slices.Clone(h.Nodes)
	}
	return groups
}

// HostsOptions reach a topology's hosts over SSH.
type HostsOptions struct {
	remote.CheckOptions
	// Source and File are the topology file's name and contents, which
	// every host's agent parses.
	Source string
	File   []byte
}

// ErrInterrupted is RunBench's error when ctx ended before every run
// finished. Its Outcome holds the runs that finished, with Results.Partial
// saying why the others are missing; the run ctx interrupted is not among
// them (nor its capture).
var ErrInterrupted = errors.New("bench interrupted")

// ErrAborted is RunBench's error when opts.Abort closed after ctx ended:
// the run in progress was torn down and nothing more is to be written.
var ErrAborted = errors.New("bench aborted")

// Outcome is what a bench measured, for its caller to write as
// results.json, bench.txt, report.html and the summary table.
type Outcome struct {
	Results *results.Results
	// Sequences are the elections of the runs RunOptions.DiagramRuns
	// picks, for report.html to draw.
	Sequences []report.Sequence
	// Writable says the outputs are to be written: every run finished,
	// or ctx ended after one did and RunOptions.Abort is not closed.
	Writable bool
}

// CheckScenarios returns the first error of a scenario that names a node
// or group topo lacks (Scenario.CheckNames): found before any testbed is
// built, not in the middle of a run.
func CheckScenarios(topo *topologies.Topology, scs []*scenario.Scenario) error {
	names := make([]string, len(topo.Nodes))
	for i, n := range topo.Nodes {
		names[i] = n.Name
	}
	for _, sc := range scs {
		if err := sc.CheckNames(topo.Name, names, selectorGroups(topo)); err != nil {
			return err
		}
	}
	return nil
}

// RunBench runs every scenario opts.Runs times, each run on a fresh lab with a
// live capture into opts.OutDir, and returns what it measured, for the
// caller to write (WriteOutputs, WriteSummary). A run that fails is recorded
// as failed, not returned as an error; errors are for what stops the whole
// bench (a scenario that does not fit the topology, an unwritable OutDir,
// ctx ending).
//
// When ctx ends, the run in progress stops and its testbed is torn down;
// RunBench then returns the runs that finished, marked partial with
// context.Cause(ctx) as the reason, with an error wrapping ErrInterrupted
// (or ErrAborted: see opts.Abort). When no run finished, or on ErrAborted,
// the Outcome is not Writable.
func RunBench(ctx context.Context, opts RunOptions) (*Outcome, error) {
	if opts.Topology == nil || len(opts.Scenarios) == 0 || opts.Runs <= 0 {
		return nil, errNoRuns
	}
	if err := CheckScenarios(opts.Topology, opts.Scenarios); err != nil {
		return nil, err
	}
	if len(opts.Algorithms) == 0 {
		opts.Algorithms = []string{cmp.Or(opts.Topology.Algorithm, topologies.DefaultAlgorithm)}
	}
	if opts.Hosts == nil {
		if err := CheckHostFiles(opts.Topology, opts.Scenarios, opts.Algorithms); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	if opts.StableTimeout <= 0 {
		opts.StableTimeout = scenario.DefaultTimeout
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	backend, err := benchBackend(ctx, opts)
	if err != nil {
		return nil, err
	}
	res := newResults(opts, backend)
	var seqs []report.Sequence
	for _, sc := range opts.Scenarios {
		srs, scSeqs, err := runScenario(ctx, opts, sc, backend)
		if err != nil && !errors.Is(err, ErrInterrupted) {
			return nil, err
		}
		for _, sr := range srs {
			if len(sr.Runs) > 0 {
				res.Scenarios = append(res.Scenarios, sr)
			}
		}
		seqs = append(seqs, scSeqs...)
		if err != nil {
			res.Partial = &results.Partial{Reason: interruptReason(ctx), RunsPlanned: opts.Runs * len(opts.Scenarios) * len(opts.Algorithms), RunsDone: res.RunsDone()}
			break
		}
	}
	if opts.Progress != nil {
		opts.Progress.Finish()
	}
	res.Finished = time.Now()
	res.Summarize()
	out := &Outcome{Results: res, Sequences: seqs}
	if p := res.Partial; p != nil {
		stopped := fmt.Errorf("%w: %s after %d of %d runs", ErrInterrupted, p.Reason, p.RunsDone, p.RunsPlanned)
		if aborted(opts.Abort) {
			return out, fmt.Errorf("%w: %s after %d of %d runs, nothing written", ErrAborted, p.Reason, p.RunsDone, p.RunsPlanned)
		}
		if p.RunsDone == 0 {
			return out, fmt.Errorf("%w, no run finished: nothing written", stopped)
		}
		out.Writable = true
		return out, stopped
	}
	out.Writable = true
	return out, nil
}

// interruptReason is why ctx ended: its cause, such as "interrupted by
// SIGINT", or "interrupted" when it has none.
func interruptReason(ctx context.Context) string {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return "interrupted"
	}
	return oneLine(cause.Error())
}

// aborted reports whether abort is closed.
func aborted(abort <-chan struct{}) bool {
	select {
	case <-abort:
		return true
	default:
		return false
	}
}

// benchBackend is the impairment backend of the bench's faults: forced
// by opts, else the one netem.Probe finds here, or across hosts the one
// every host's agent finds there. Checking the hosts first also fails a
// bench whose hosts cannot all run it before any run begins.
func benchBackend(ctx context.Context, opts RunOptions) (string, error) {
	if opts.Hosts == nil {
		return impairBackend(opts.Backend)
	}
	var backends []string
	var errs []error
	first, differ := "", false
	for _, r := range remote.Check(ctx, opts.Topology.Hosts, opts.Hosts.CheckOptions) {
		switch {
		case r.Err != nil:
			errs = append(errs, r.Err)
		case r.Unfit != "":
			errs = append(errs, fmt.Errorf("host %s cannot run a testbed: %s", r.Host.Name, r.Unfit))
		default:
			backends = append(backends, r.Host.Name+": "+r.Backend)
			if first == "" {
				first = r.Backend
			}
			differ = differ || r.Backend != first
		}
	}
	if differ && opts.Backend == "" {
		errs = append(errs, fmt.Errorf("the hosts' faults would impair differently (%s): force one with --backend", strings.Join(backends, ", ")))
	}
	if err := errors.Join(errs...); err != nil {
		return "", fmt.Errorf("bench: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return cmp.Or(opts.Backend, first), nil
}

// impairBackend is backend, or when it is "" the one netem.Probe finds.
func impairBackend(backend string) (string, error) {
	if backend != "" {
		return backend, nil
	}
	caps, err := netem.Probe()
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return caps.Backend(), nil
}

// newResults begins the results of a bench, started now.
func newResults(opts RunOptions, backend string) *results.Results {
	topo := opts.Topology
	bound := sle2Bound(topo, messageDelay(topologyDelay(topo), backend))
	info := results.TopologyOf(topo)
	info.Overrides = results.OverridesOf(opts.SettingOverrides)
	return &results.Results{
		Schema:   results.Schema,
		Tool:     LocalTool(opts.Version),
		Host:     LocalHost(),
		Started:  time.Now(),
		Topology: info,
		Seed:     opts.Seed,
		Settings: results.RunSettings{Runs: opts.Runs, Scenario: opts.ScenarioArg, Params: opts.Params,
			Backend: backend, SLE2BoundNS: int64(bound)},
	}
}

// runScenario runs sc opts.Runs times on each of opts.Algorithms,
// interleaved, and returns its result per algorithm with the elections of
// the runs opts.DiagramRuns picks drawn for the report (those whose
// election could not be drawn left out).
func runScenario(ctx context.Context, opts RunOptions, sc *scenario.Scenario, backend string) ([]results.ScenarioResult, []report.Sequence, error) {
	srs := make([]results.ScenarioResult, len(opts.Algorithms))
	elections := make([][]*report.Sequence, len(opts.Algorithms))
	for k, a := range opts.Algorithms {
		sr, err := results.ResultOf(sc, a)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: scenario %s: %w", sc.Name, err)
		}
		srs[k] = sr
	}
	sequences := func() []report.Sequence {
		var seqs []report.Sequence
		for k := range srs {
			seqs = append(seqs, opts.DiagramRuns.Sequences(&srs[k], elections[k])...)
		}
		for i := range seqs {
			seqs[i].Scale = opts.DiagramScale
		}
		return seqs
	}
	for i := range opts.Runs {
		for k := range srs {
			sr := &srs[k]
			if ctx.Err() != nil {
				return srs, sequences(), ErrInterrupted
			}
			if opts.Progress != nil {
				opts.Progress.Start(sr.Key(), i+1, opts.Runs)
			}
			r, d := runOne(ctx, opts, sc, sr.AlgorithmName(), i, backend)
			if ctx.Err() != nil {
				// Not a result: the run was cut short, its testbed is down.
				// Its capture and key go with it, as results.json does not
				// name them.
				for _, name := range []string{r.Capture, capture.ClusterKeyFile(r.Capture)} {
					if err := os.Remove(filepath.Join(opts.OutDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
						return srs, sequences(), fmt.Errorf("bench: %w", err)
					}
				}
				return srs, sequences(), ErrInterrupted
			}
			sr.Runs = append(sr.Runs, r)
			var election *report.Sequence
			if d != nil {
				election = d.seq
			}
			elections[k] = append(elections[k], election)
			if opts.Progress != nil {
				opts.Progress.Done(RunUpdate{Scenario: sr.Key(), Index: r.Index, Runs: opts.Runs, OK: r.OK,
					Leader: r.Leader, TimeToLeader: time.Duration(r.TimeToLeaderNS),
					FailureKind: r.FailureKind, Failure: r.Failure})
			}
		}
	}
	return srs, sequences(), nil
}

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_':
			return r
		}
		return '_'
	}, s)
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
