//go:build linux

package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node/bully"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// runDetail is what a run keeps beyond its Run for the report.
type runDetail struct {
	seq *report.Sequence
}

// runOne runs scenario sc once on algorithm: run i from 0.
func runOne(ctx context.Context, opts RunOptions, sc *scenario.Scenario, algorithm string, i int, backend string) (results.Run, *runDetail) {
	ru := newRunner(opts, sc, algorithm, i, backend)
	ru.phase(PhaseBuild)
	if f := ru.setup(ctx); f != nil {
		return ru.failed(f)
	}
	defer ru.closeLab()
	ru.phase(PhaseSettle)
	if f := ru.settle(ctx); f != nil {
		return ru.failed(f)
	}
	ru.phase(PhaseInject)
	stepErr := ru.inject(ctx)
	if ctx.Err() != nil {
		// Interrupted: RunBench drops the run, so nothing to measure.
		return ru.failed(failure(failInterrupted, "interrupted: %v", context.Cause(ctx)))
	}
	ru.phase(PhaseMeasure)
	m, f := ru.measure(ctx, stepErr)
	if f != nil {
		return ru.failed(f)
	}
	return ru.judge(m)
}

// failInterrupted is the kind of a run ctx interrupted, which RunBench
// drops: it never reaches results.json.
const failInterrupted = "interrupted"

// labStarted, when not nil, hears the run ID of every lab a run starts:
// for the tests, which look for what a run left behind.
var labStarted func(run string)

// runner is one run of a scenario, in runOne's steps. They fill in r, the
// run's record, as they go: a run that fails keeps what it measured.
type runner struct {
	// opts.Topology is the bench's with the run's algorithm.
	opts      RunOptions
	algorithm string
	sc        *scenario.Scenario
	backend   string
	seed      int64
	r         results.Run
	capName   string // the run's capture, in opts.OutDir
	capPath   string
	keyPath   string // the run's cluster key file, beside its capture
	// upAt is when every node answered, the boot over: the tenures are
	// judged from then on (tenuresFrom).
	upAt time.Time

	lab       testbed
	labClosed bool
	key       wire.Key // the lab's cluster key, which goes with the lab's state
	names     []string // the lab's nodes, lowest ID first

	// The baseline settle reads: the nodes' sent counters once the
	// cluster is stable, and a time at which they held.
	before   map[string]map[string]uint64
	baseline time.Time

	// settleFaults are the faults settle applied (a cold start's crash),
	// which end tenures as the scenario's do.
	settleFaults []fault.Fault
	// logs are the nodes' event logs, read before the lab closed.
	logs []nodeLog

	// What inject saw.
	tgt          *labTarget
	faults       faultLog
	measuredAg   *lab.Leader   // the agreement the measured wait_leader saw
	faultsBefore []fault.Fault // the faults applied before it, in order
	ended        time.Time     // when the scenario ended
}

// runFailure is why a run failed: its FailureKind and its Failure.
type runFailure struct{ kind, reason string }

// failure is a runFailure of kind, its reason in one line.
func failure(kind, format string, args ...any) *runFailure {
	return &runFailure{kind: kind, reason: oneLine(fmt.Sprintf(format, args...))}
}

func newRunner(opts RunOptions, sc *scenario.Scenario, algorithm string, i int, backend string) *runner {
	seed := scenario.RunSeed(opts.Seed, i)
	topo := *opts.Topology
	topo.Algorithm = algorithm
	opts.Topology = &topo
	ru := &runner{opts: opts, algorithm: algorithm, sc: sc, backend: backend, seed: seed,
		r: results.Run{Index: i + 1, Seed: seed, Started: time.Now(), Messages: map[string]int{}}}
	key := sc.Key()
	if algorithm != topologies.DefaultAlgorithm {
		key += "-" + algorithm // as the result's key, so Bully's captures keep their names
	}
	ru.capName = fmt.Sprintf("run-%s-%d.pcapng", fileSafe(key), i+1)
	ru.capPath = filepath.Join(opts.OutDir, ru.capName)
	ru.keyPath = filepath.Join(opts.OutDir, capture.ClusterKeyFile(ru.capName))
	ru.r.Capture = ru.capName
	return ru
}

// failed is the run as far as it got, failed for f.
func (ru *runner) failed(f *runFailure) (results.Run, *runDetail) {
	ru.recordHostFiles()
	r := ru.r
	r.OK = false
	r.FailureKind = f.kind
	r.Failure = f.reason
	// A run that never settled is one these metrics are for.
	var measured *fault.Fault
	if len(ru.faultsBefore) > 0 {
		measured = &ru.faultsBefore[len(ru.faultsBefore)-1]
	}
	ru.addAvailability(&r, nil, measured)
	return r, nil
}

// setup starts the run's lab and its capture, and keeps the run's cluster
// key beside the capture. The capture starts before the first node, as
// across hosts: every connection's HELLO is in it, so that the key
// verifies every frame; the boot elections are in it too, and not
// measured (settle waits them out).
func (ru *runner) setup(ctx context.Context) *runFailure {
	lb, err := ru.start(ctx)
	if err != nil {
		return failure(results.FailSetup, "starting the lab: %v", err)
	}
	ru.lab = lb
	ru.upAt = time.Now()
	ru.key = lb.Key()
	if labStarted != nil {
		labStarted(lb.Run())
	}
	// Kept with the capture, owner-only, so that its frames can be
	// verified after the lab, and the key file it had, are gone.
	if err := wire.WriteKeyFile(ru.keyPath, ru.key); err != nil {
		ru.closeLab()
		return failure(results.FailSetup, "keeping the run's cluster key: %v", err)
	}
	return nil
}

// tenuresFrom is when the capture's and the logs' tenures are held to each
// other and to the checks from: once every node answered, though the
// capture began before the first node. The boot's leads are the boot's:
// a node that boots before the others answers leads with no frame on the
// wire to show it, and across hosts each host's highest node boots
// before the others' nodes answer.
func (ru *runner) tenuresFrom(rep *capture.Report) time.Time {
	return maxTime(rep.Start, ru.upAt)
}

// clipTenures clips tenures, relative to origin, to begin at from at the
// earliest, as spanTenures clips spans; those left with nothing are
// dropped.
func clipTenures(ts []Tenure, from time.Duration) []Tenure {
	out := []Tenure{}
	for _, t := range ts {
		t.Start = max(t.Start, from)
		if t.End > t.Start {
			out = append(out, t)
		}
	}
	return out
}

// start builds the run's testbed: a lab here, or across the topology's
// hosts.
func (ru *runner) start(ctx context.Context) (testbed, error) {
	topo := ru.opts.Topology
	if len(topo.Hosts) == 0 {
		hosts := ru.opts.HostProcesses
		if hosts == 0 {
			plan, err := planHosts(topo, ru.sc, ru.algorithm, thisMachine())
			if err != nil {
				return nil, err
			}
			hosts = plan.Processes
		}
		lb, err := lab.Boot(ctx, topo, lab.BootOptions{Binary: ru.opts.Binary, Seed: ru.seed, Backend: ru.opts.Backend, HostProcesses: hosts,
			// Readable by all whatever the umask, as the other outputs.
			Capture: &lab.CaptureOptions{Path: ru.capPath, Mode: results.OutputMode, FromBoot: true}})
		if err != nil {
			return nil, err
		}
		return localLab{lb, lb.Faults(), lb.Monitor()}, nil
	}
	h := ru.opts.Hosts
	if h == nil {
		return nil, fmt.Errorf("topology %s spans %d hosts, and no way to reach them was given", topo.Name, len(topo.Hosts))
	}
	return remote.BuildSpan(ctx, topo, h.Source, h.File, remote.SpanOptions{CheckOptions: h.CheckOptions,
		Seed: ru.seed, Backend: ru.opts.Backend, Capture: ru.capPath, CaptureMode: results.OutputMode})
}

// closeLab closes the lab once: measure closes it before it analyses the
// capture, runOne's deferred call when a step ended the run before.
func (ru *runner) closeLab() error {
	if ru.labClosed {
		return nil
	}
	ru.labClosed = true
	ru.phase(PhaseTeardown)
	err := ru.lab.Close()
	ru.recordHostFiles() // after Close: the count stops with the host processes
	return err
}

// recordHostFiles records the most files each shared host process of the
// lab has held open so far.
func (ru *runner) recordHostFiles() {
	l, ok := ru.lab.(interface{ HostFiles() []lab.HostFiles })
	if !ok {
		return
	}
	ru.r.HostProcesses = nil
	for _, h := range l.HostFiles() {
		ru.r.HostProcesses = append(ru.r.HostProcesses, results.HostProcess{Name: h.Name, Nodes: h.Nodes, PeakFiles: h.PeakFiles})
	}
}

// phase tells the bench's progress, if any, that the run entered p.
func (ru *runner) phase(p Phase) {
	if ru.opts.Progress != nil {
		ru.opts.Progress.Phase(p)
	}
}

// settle waits for a stable leader (or, for a cold start, stops every
// node once there is one), then reads the baseline counters.
func (ru *runner) settle(ctx context.Context) *runFailure {
	ru.names = ru.lab.Nodes()
	highest := ru.names[len(ru.names)-1]
	wctx, cancel := context.WithTimeout(ctx, ru.opts.StableTimeout)
	_, err := ru.lab.WaitLeader(wctx, func(l lab.Leader) bool { return l.Node == highest })
	cancel()
	if err != nil {
		return ru.setupFailure("no stable leader before the scenario: %v", err)
	}
	// Stable: the boot elections over, so that the analysis does not fold
	// the measured election into them and the cluster the fault strikes
	// is the one the scenario expects. Agreeing once is not enough: a
	// large cluster on a loaded host can agree on its highest node while
	// nodes that boot late still elect.
	if err := waitQuiet(ctx, ru.lab, highest, settleTime(ru.opts.Topology), ru.opts.StableTimeout); err != nil {
		return ru.setupFailure("no stable leader before the scenario: %v", err)
	}
	if ru.sc.Start == scenario.StartCold {
		f, err := ru.lab.Crash(ru.names...)
		if err != nil {
			return failure(results.FailSetup, "stopping the nodes for a cold start: %v", err)
		}
		ru.settleFaults = append(ru.settleFaults, f)
	}
	ru.before, ru.baseline = stillCounters(ctx, ru.lab)
	return nil
}

// setupFailure fails the run in setup, or for the nodes that stopped by
// themselves meanwhile, the likelier cause.
func (ru *runner) setupFailure(format string, args ...any) *runFailure {
	if failed := ru.lab.Failed(); len(failed) > 0 {
		return nodeFailure(failed)
	}
	return failure(results.FailSetup, format, args...)
}

// waitQuiet waits until every running node has followed leader, and no
// node has sent an election message, for quiet: the counters of every
// node, read through the control sockets, do not move.
func waitQuiet(ctx context.Context, lb testbed, leader string, quiet, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last uint64
	var since time.Time
	for {
		var sum uint64
		agree := true
		for _, s := range lb.NodeStates() {
			if s.State != lab.ProcRunning {
				continue
			}
			if s.View == nil || s.Status != election.StatusNormal.String() || s.Leader != leader {
				agree = false
				continue
			}
			for _, t := range electionTypes {
				sum += s.View.Counters.Sent[t.String()]
			}
		}
		now := time.Now()
		if !agree || since.IsZero() || sum != last {
			last, since = sum, now
			if !agree {
				since = time.Time{}
			}
		} else if now.Sub(since) >= quiet {
			return nil
		}
		if now.After(deadline) {
			return fmt.Errorf("the nodes did not follow %s without electing for %s within %s", leader, quiet, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quietPoll):
		}
	}
}

// quietPoll is how often waitQuiet reads the nodes' counters.
const quietPoll = 50 * time.Millisecond

// settleTime is the silence the analysis needs to end an election
// (capture.AnalyzeOptions.Quiet's default), and a margin.
func settleTime(topo *topologies.Topology) time.Duration {
	q := capture.DefaultQuiet
	for _, n := range topo.Nodes {
		s := n.Settings
		// A waiting node's timeout is staggered too (bully.MaxStaggerDelay),
		// and waits for the answering node's waves of ELECTIONs
		// (bully.MaxAskSpread).
		q = max(q, (bully.WaitFactor+1)*s.ElectionTimeout+bully.MaxAskSpread(len(topo.Nodes), s.DetectionStagger)+bully.MaxStaggerDelay(len(topo.Nodes), s.DetectionStagger, s.ElectionTimeout))
	}
	return q + 200*time.Millisecond
}

// faultLog records the faults a lab applies.
type faultLog struct {
	faults []fault.Fault // in order
	// owd is the largest delay in force at any time of the run, which
	// the SLE2 bound takes: a fault's delay stays in force until cleared.
	owd time.Duration
	// lastInForce is when the last fault was in force: its record's
	// InForce, else when observers heard of it, which is after.
	lastInForce time.Time
}

// watch starts recording the faults lb applies.
func (fl *faultLog) watch(lb testbed) {
	fl.owd = lb.MaxDelay()
	lb.OnFault(func(f fault.Fault) {
		fl.faults = append(fl.faults, f)
		fl.owd = max(fl.owd, lb.MaxDelay())
		fl.lastInForce = f.InForce
		if f.InForce.IsZero() {
			fl.lastInForce = time.Now()
		}
	})
}

// inject executes the scenario against the lab, recording its schedule,
// the faults, and the measured wait_leader's agreement with the faults
// before it. It returns the error of a step that failed, which ended the
// scenario: measure reports it once the lab is down.
func (ru *runner) inject(ctx context.Context) error {
	ru.tgt = newLabTarget(ru.lab, ru.sc)
	measured := ru.sc.Measured()
	ru.faults.watch(ru.lab)
	err := scenario.Execute(ctx, ru.sc, ru.tgt, scenario.NewRand(ru.seed), func(ev scenario.StepEvent) {
		if ev.Action.Kind != "" {
			ru.r.Schedule = append(ru.r.Schedule, ev.Action.String())
		}
		if ev.Index == measured && ev.Err == nil {
			if ag, ok := ru.tgt.lastAgreement(); ok {
				ru.measuredAg = &ag
			}
			ru.faultsBefore = slices.Clone(ru.faults.faults)
		}
	})
	ru.ended = time.Now()
	return err
}
