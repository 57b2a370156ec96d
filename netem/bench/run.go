package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/bullylab/bullylab/netem/fault"
	"github.com/bullylab/bullylab/netem/lab"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// RunOptions configure Run.
type RunOptions struct {
	Topology *topologies.Topology
	// Scenarios run one after the other, Runs times each.
	Scenarios []*scenario.Scenario
	// ScenarioArg and Params are --scenario and the parameters as given,
	// recorded in Settings.
	ScenarioArg string
	Params      map[string]string
	Runs        int
	Seed        int64
	// OutDir receives results.json, bench.txt, report.html and one
	// pcapng per run, all OutputMode; it is created if needed.
	OutDir string
	// Binary is the bullylab executable the nodes run.
	Binary string
	// Version is what `bullylab version` prints, for Results.Tool.
	Version string
	// Backend forces an impairment backend; "" probes.
	Backend string
	// Progress, when not nil, hears of every run.
	Progress *Progress
	// Summary, when not nil, gets the summary table at the end.
	Summary io.Writer
	// StableTimeout bounds the wait for the first leader of a run;
	// default scenario.DefaultTimeout.
	StableTimeout time.Duration
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
		if err := sc.CheckNames(topo.Name, names, topo.Groups); err != nil {
			return err
		}
	}
	return nil
}

// RunBench runs every scenario opts.Runs times, each run on a fresh lab with a
// live capture, and writes results.json, bench.txt and report.html into
// opts.OutDir. A run that fails is recorded as failed, not returned as an
// error; errors are for what stops the whole bench (a scenario that does
// not fit the topology, an unwritable OutDir, ctx ending).
func RunBench(ctx context.Context, opts RunOptions) (*Results, error) {
	if opts.Topology == nil || len(opts.Scenarios) == 0 || opts.Runs <= 0 {
		return nil, errNoRuns
	}
	if err := CheckScenarios(opts.Topology, opts.Scenarios); err != nil {
		return nil, err
	}
	if opts.StableTimeout <= 0 {
		opts.StableTimeout = scenario.DefaultTimeout
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	backend, err := impairBackend(opts.Backend)
	if err != nil {
		return nil, err
	}
	res := newResults(opts, backend)
	var seqs []Sequence
	for _, sc := range opts.Scenarios {
		sr, seq, err := runScenario(ctx, opts, sc, backend)
		if err != nil {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, sr)
		if seq != nil {
			seqs = append(seqs, *seq)
		}
	}
	if opts.Progress != nil {
		opts.Progress.Finish()
	}
	res.Finished = time.Now()
	res.Summarize()
	if err := writeOutputs(opts.OutDir, res, seqs); err != nil {
		return res, err
	}
	if opts.Summary != nil {
		if err := WriteSummary(opts.Summary, res); err != nil {
			return res, err
		}
	}
	return res, nil
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
func newResults(opts RunOptions, backend string) *Results {
	topo := opts.Topology
	bound := sle2Bound(topo, messageDelay(topologyDelay(topo), backend))
	return &Results{
		Schema:   Schema,
		Tool:     LocalTool(opts.Version),
		Host:     LocalHost(),
		Started:  time.Now(),
		Topology: TopologyOf(topo),
		Seed:     opts.Seed,
		Settings: Settings{Runs: opts.Runs, Scenario: opts.ScenarioArg, Params: opts.Params,
			Backend: backend, SLE2BoundNS: int64(bound)},
	}
}

// runScenario runs sc opts.Runs times, and returns its result with the
// election of its median run drawn for the report (nil when no run
// passed, or the median run's election could not be drawn).
func runScenario(ctx context.Context, opts RunOptions, sc *scenario.Scenario, backend string) (ScenarioResult, *Sequence, error) {
	sr, err := ResultOf(sc)
	if err != nil {
		return sr, nil, fmt.Errorf("bench: scenario %s: %w", sc.Name, err)
	}
	var details []*runDetail
	for i := range opts.Runs {
		if err := ctx.Err(); err != nil {
			return sr, nil, err
		}
		if opts.Progress != nil {
			opts.Progress.Start(sc.Key(), i+1, opts.Runs)
		}
		r, d := runOne(ctx, opts, sc, i, backend)
		if ctx.Err() != nil {
			return sr, nil, ctx.Err()
		}
		sr.Runs = append(sr.Runs, r)
		details = append(details, d)
		if opts.Progress != nil {
			opts.Progress.Done(RunUpdate{Scenario: sc.Key(), Index: r.Index, Runs: opts.Runs, OK: r.OK,
				Leader: r.Leader, TimeToLeader: time.Duration(r.TimeToLeaderNS),
				FailureKind: r.FailureKind, Failure: r.Failure})
		}
	}
	return sr, medianSequence(&sr, details), nil
}

// medianSequence is the election of sr's median run (MedianRun), titled,
// from the details of sr's runs; nil when there is none.
func medianSequence(sr *ScenarioResult, details []*runDetail) *Sequence {
	med, ok := MedianRun(sr)
	if !ok {
		return nil
	}
	d := details[med.Index-1]
	if d == nil || d.seq == nil {
		return nil
	}
	seq := *d.seq
	seq.Title = SequenceTitle(sr, med)
	return &seq
}

func writeOutputs(dir string, res *Results, seqs []Sequence) error {
	if err := res.WriteFile(filepath.Join(dir, "results.json")); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, out := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"bench.txt", func(w io.Writer) error { return WriteBenchText(w, res) }},
		{"report.html", func(w io.Writer) error { return WriteReport(w, res, seqs...) }},
	} {
		path := filepath.Join(dir, out.name)
		if err := writeAtomic(path, out.write); err != nil {
			return fmt.Errorf("bench: writing %s: %w", path, err)
		}
	}
	return nil
}

// Parts of node/doc.go's d that no impairment configures.
const (
	// delayerOverhead is what the NFQUEUE delayer adds to a delayed
	// packet beyond its configured delay: 50 ms configured measured 50.8 ms
	// at p50 and 51.8 ms at p99 (../shared/notes/linux-testbed.md).
	delayerOverhead = 2 * time.Millisecond
	// hostSlack covers a node process waiting for a core on a loaded
	// host, and the lab's status polls that time agreement.
	hostSlack = 5 * time.Millisecond
	// tcpDelays is how many one-way packet delays a message may need:
	// a node sends to a peer it has no connection to (in a stable Bully
	// cluster followers never talk to each other, so most election
	// messages open one) only after the handshake, SYN one way, SYN-ACK
	// back, then the data with the ACK. A latency-sweep at 100 ms showed an
	// ELECTION to a node never talked to on the wire 300 ms after those to
	// nodes already connected.
	tcpDelays = 3
)

// messageDelay is node/doc.go's d, the largest delay of one message, for
// a network whose largest one-way packet delay (jitter included, per
// direction) is owd: tcpDelays of them, each with the delayer's overhead
// when the NFQUEUE backend applies it, plus hostSlack.
func messageDelay(owd time.Duration, backend string) time.Duration {
	if owd > 0 && backend == netem.BackendNFQueue {
		owd += delayerOverhead
	}
	return tcpDelays*owd + hostSlack
}

// sle2Bound is node/doc.go's SLE2 bound for the topology's slowest node,
//
//	max(FailureTimeout + d + S, WaitFactor×ElectionTimeout + S, Heartbeat + d) + 3×ElectionTimeout + 10d,
//
// d the largest message delay (messageDelay), S the largest detection
// stagger a node of this many can have (node.MaxStaggerDelay).
func sle2Bound(topo *topologies.Topology, d time.Duration) time.Duration {
	var b time.Duration
	for _, n := range topo.Nodes {
		s := n.Settings
		stagger := node.MaxStaggerDelay(len(topo.Nodes), s.DetectionStagger, s.ElectionTimeout)
		first := max(s.FailureTimeout+d+stagger, node.WaitFactor*s.ElectionTimeout+stagger, s.Heartbeat+d)
		b = max(b, first+3*s.ElectionTimeout+10*d)
	}
	return b
}

// topologyDelay is the largest one-way delay the topology's own
// impairments give a packet, per direction: the sender's link, with the
// pair's link between the two on top of it (netem.Lab.MaxDelay, before any
// fault).
func topologyDelay(topo *topologies.Topology) time.Duration {
	var d time.Duration
	for _, s := range topo.Nodes {
		for _, r := range topo.Nodes {
			if s.Name == r.Name {
				continue
			}
			owd := s.Impair.Delay + s.Impair.Jitter
			if p, ok := topo.PairImpair(s.Name, r.Name); ok {
				owd += p.Delay + p.Jitter
			}
			d = max(d, owd)
		}
	}
	return d
}

// runDetail is what a run keeps beyond its Run for the report.
type runDetail struct {
	seq *Sequence
}

// authProblem says what is wrong with a run's capture's authentication.
func authProblem(a *capture.AuthReport) string {
	switch {
	case a == nil:
		return "the capture holds no authenticated frame, though the nodes had a cluster key"
	case a.Failed > 0 && len(a.Failures) > 0:
		f := a.Failures[0]
		return fmt.Sprintf("%d frames failed the cluster key's check; the first, packet %d (%s, frame %d of its connection, %s from %s): %s",
			a.Failed, f.Packet, f.Stream, f.Frame, f.Type, f.From, f.Reason)
	case a.Failed > 0:
		return fmt.Sprintf("%d frames failed the cluster key's check", a.Failed)
	}
	return fmt.Sprintf("%d HELLOs replayed an earlier one's nonce", a.ReplayCount)
}

// electionTypes are the types cross-checked against the nodes' counters:
// HEARTBEATs race the counter reads at both ends. HELLO, which opens each
// connection a node dials when the cluster has a key, is transport, but
// nodes count it as sent like any frame, and dial only to send to a peer
// they have no connection to, which a settled cluster does not do: it is
// compared too.
var electionTypes = []wire.Type{wire.TypeElection, wire.TypeAnswer, wire.TypeHalt, wire.TypeHaltAck,
	wire.TypeReject, wire.TypeCoordinator, wire.TypeJoin, wire.TypeLeave, wire.TypeMembers, wire.TypeHello}

// runOne runs scenario sc once: run i from 0.
func runOne(ctx context.Context, opts RunOptions, sc *scenario.Scenario, i int, backend string) (Run, *runDetail) {
	ru := newRunner(opts, sc, i, backend)
	if f := ru.setup(ctx); f != nil {
		return ru.failed(f)
	}
	defer ru.closeLab()
	if f := ru.settle(ctx); f != nil {
		return ru.failed(f)
	}
	stepErr := ru.inject(ctx)
	m, f := ru.measure(ctx, stepErr)
	if f != nil {
		return ru.failed(f)
	}
	return ru.judge(m)
}

// runner is one run of a scenario, in runOne's steps. They fill in r, the
// run's record, as they go: a run that fails keeps what it measured.
type runner struct {
	opts    RunOptions
	sc      *scenario.Scenario
	backend string
	seed    int64
	r       Run
	capName string // the run's capture, in opts.OutDir
	capPath string

	lab       *lab.Lab
	labClosed bool
	key       wire.Key // the lab's cluster key, which goes with the lab's state
	names     []string // the lab's nodes, lowest ID first

	// The baseline settle reads: the nodes' sent counters once the
	// cluster is stable, and a time at which they held.
	before   map[string]map[string]uint64
	baseline time.Time

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

func newRunner(opts RunOptions, sc *scenario.Scenario, i int, backend string) *runner {
	seed := scenario.RunSeed(opts.Seed, i)
	ru := &runner{opts: opts, sc: sc, backend: backend, seed: seed,
		r: Run{Index: i + 1, Seed: seed, Started: time.Now(), Messages: map[string]int{}}}
	ru.capName = fmt.Sprintf("run-%s-%d.pcapng", fileSafe(sc.Key()), i+1)
	ru.capPath = filepath.Join(opts.OutDir, ru.capName)
	ru.r.Capture = ru.capName
	return ru
}

// failed is the run as far as it got, failed for f.
func (ru *runner) failed(f *runFailure) (Run, *runDetail) {
	r := ru.r
	r.OK = false
	r.FailureKind = f.kind
	r.Failure = f.reason
	return r, nil
}

// setup starts the run's lab and its capture. The capture starts once the
// nodes answer: the boot elections are not measured, and the nodes boot
// while the testbed is built.
func (ru *runner) setup(ctx context.Context) *runFailure {
	lb, err := lab.Start(ctx, ru.opts.Topology, lab.Options{Binary: ru.opts.Binary, Seed: ru.seed, Backend: ru.opts.Backend,
		// Readable by all whatever the umask, as the other outputs.
		Capture: &lab.CaptureOptions{Path: ru.capPath, Mode: OutputMode}})
	if err != nil {
		return failure(FailSetup, "starting the lab: %v", err)
	}
	ru.lab = lb
	ru.key = lb.Key()
	return nil
}

// closeLab closes the lab once: measure closes it before it analyses the
// capture, runOne's deferred call when a step ended the run before.
func (ru *runner) closeLab() error {
	if ru.labClosed {
		return nil
	}
	ru.labClosed = true
	return ru.lab.Close()
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
		return failure(FailSetup, "no stable leader before the scenario: %v", err)
	}
	// Stable: the boot elections over, so that the analysis does not fold
	// the measured election into them and the cluster the fault strikes
	// is the one the scenario expects. Agreeing once is not enough: a
	// large cluster on a loaded host can agree on its highest node while
	// nodes that boot late still elect.
	if err := waitQuiet(ctx, ru.lab, highest, settleTime(ru.opts.Topology), ru.opts.StableTimeout); err != nil {
		return failure(FailSetup, "no stable leader before the scenario: %v", err)
	}
	if ru.sc.Start == scenario.StartCold {
		if _, err := ru.lab.Crash(ru.names...); err != nil {
			return failure(FailSetup, "stopping the nodes for a cold start: %v", err)
		}
	}
	ru.before, ru.baseline = stillCounters(ctx, ru.lab)
	return nil
}

// faultLog records the faults a lab applies.
type faultLog struct {
	faults []fault.Fault // in order
	// owd is the largest delay in force at any time of the run, which
	// the SLE2 bound takes: a fault's delay stays in force until cleared.
	owd time.Duration
	// lastInForce is when the last fault was in force: observers hear of
	// it then.
	lastInForce time.Time
}

// watch starts recording the faults lb applies.
func (fl *faultLog) watch(lb *lab.Lab) {
	fl.owd = lb.MaxDelay()
	lb.OnFault(func(f fault.Fault) {
		fl.faults = append(fl.faults, f)
		fl.owd = max(fl.owd, lb.MaxDelay())
		fl.lastInForce = time.Now()
	})
}

// inject executes the scenario against the lab, recording its schedule,
// the faults, and the measured wait_leader's agreement with the faults
// before it. It returns the error of a step that failed, which ended the
// scenario: measure reports it once the lab is down.
func (ru *runner) inject(ctx context.Context) error {
	ru.tgt = newLabTarget(ru.lab)
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

// measurement is what measure found of the run.
type measurement struct {
	rep   *capture.Report
	fault *fault.Fault      // the measured fault
	el    *capture.Election // the election it triggered; nil when the capture holds none
	// lossyAtEnd: loss was still in force when the counters were read.
	lossyAtEnd bool
}

// measure reads the nodes' counters once they stand still, stops the
// capture and closes the lab, then analyses the capture: the measured
// election, and the counters against the wire. A failed step (stepErr)
// fails the run once the lab is down.
func (ru *runner) measure(ctx context.Context, stepErr error) (*measurement, *runFailure) {
	end := ru.readEnd(ctx)
	if f := ru.teardown(stepErr); f != nil {
		return nil, f
	}
	rep, f := ru.analyze()
	if f != nil {
		return nil, f
	}
	mfault, el, f := ru.measureElection(rep)
	if f != nil {
		return nil, f
	}
	if f := ru.checkCounters(rep, end); f != nil {
		return nil, f
	}
	return &measurement{rep: rep, fault: mfault, el: el, lossyAtEnd: end.lossy}, nil
}

// endCounters are the nodes' sent counters at the end of the run.
type endCounters struct {
	after map[string]map[string]uint64
	// cutoff is the last time at which a frame on the wire was written
	// before the read.
	cutoff time.Time
	lossy  bool // loss was in force at the read
}

// readEnd reads the counters before teardown, once the election's tail is
// over: a node may still answer a late ELECTION or re-assert itself after
// everyone agreed, and a frame written after this read but on the wire
// before the capture stops would be seen and not counted. Nodes that
// crashed, restarted, left or joined since the baseline lost or reset
// theirs. A stale frame TCP delivers late after a heal can start one more
// round well after the agreement, so it waits for the counters to stand
// still (or gives up after a while: the cut-off still holds), and only
// what was sent before the read is counted on the wire.
func (ru *runner) readEnd(ctx context.Context) endCounters {
	endDelay := ru.lab.MaxDelay()
	waitStill(ctx, ru.lab, max(200*time.Millisecond, 3*messageDelay(endDelay, ru.backend)), 5*time.Second)
	after, read := stillCounters(ctx, ru.lab)
	// A frame written before the read reaches the switch at most the
	// delay in force later; one written after it, no earlier than that
	// when the delay is constant (the usual case; with jitter the two may
	// mix).
	return endCounters{after: after, cutoff: read.Add(endDelay), lossy: ru.lab.Lossy()}
}

// teardown stops the capture and closes the lab, then fails the run for
// the first of a failed step, the capture, and the lab's close.
func (ru *runner) teardown(stepErr error) *runFailure {
	// Let frames in flight reach the capture before stopping it: a
	// delayer may hold what a node wrote last for the delay in force.
	time.Sleep(ru.lab.MaxDelay() + 50*time.Millisecond)
	_, capErr := ru.lab.Capture().Stop()
	closeErr := ru.closeLab()
	if stepErr != nil {
		kind := FailStep
		if errors.Is(stepErr, scenario.ErrNoLeader) || errors.Is(stepErr, scenario.ErrUnexpectedLeader) {
			kind = FailLiveness
		}
		return failure(kind, "%v", stepErr)
	}
	if capErr != nil {
		return failure(FailSetup, "capture: %v", capErr)
	}
	if closeErr != nil {
		return failure(FailSetup, "tearing down the lab: %v", closeErr)
	}
	return nil
}

// analyze analyses the capture and checks its authentication.
func (ru *runner) analyze() (*capture.Report, *runFailure) {
	// The run's key is gone with the lab's state: verify with the copy.
	rep, err := capture.AnalyzeFile(ru.capPath, capture.AnalyzeOptions{Name: ru.capName, Key: &ru.key})
	if err != nil {
		return nil, failure(FailSetup, "analyzing the capture: %v", err)
	}
	if a := rep.Auth; a == nil || a.Failed > 0 || a.ReplayCount > 0 {
		return nil, failure(FailAuth, "%s", authProblem(a))
	}
	ru.r.FramesVerified, ru.r.FramesUnverified = rep.Auth.Verified, rep.Auth.Unverified
	return rep, nil
}

// measureElection finds the measured fault, the last one applied before
// the measured wait_leader, and the election it triggered in the capture,
// and records the election's leader, time to leader, detection and
// messages.
func (ru *runner) measureElection(rep *capture.Report) (*fault.Fault, *capture.Election, *runFailure) {
	var mfault *fault.Fault
	if len(ru.faultsBefore) > 0 {
		mfault = &ru.faultsBefore[len(ru.faultsBefore)-1]
	}
	if mfault == nil || ru.measuredAg == nil {
		return nil, nil, failure(FailStep, "the scenario measured no election (no fault before its measured wait_leader)")
	}
	ru.r.Leader, ru.r.Epoch = ru.measuredAg.Node, ru.measuredAg.Epoch
	el := measuredElection(rep, mfault.Time)
	if el != nil {
		ru.recordElection(el)
	}
	if ru.r.TimeToLeaderNS == 0 {
		// The capture saw no converged election: fall back to the lab's
		// agreement, which is within a poll of the truth.
		ru.r.TimeToLeaderNS = int64(ru.measuredAg.At.Sub(mfault.Time))
	}
	return mfault, el, nil
}

// recordElection records what the capture measured of el: its time to
// leader, its detection (none for a cold start, where nothing had to be
// detected) and its messages but the HEARTBEATs.
func (ru *runner) recordElection(el *capture.Election) {
	if el.TimeToLeaderNS != nil {
		ru.r.TimeToLeaderNS = *el.TimeToLeaderNS
	}
	if el.DetectionNS != nil && ru.sc.Start != scenario.StartCold {
		v := *el.DetectionNS
		ru.r.DetectionNS = &v
	}
	for _, t := range wire.Types {
		if t == wire.TypeHeartbeat {
			continue
		}
		if n := el.Messages.Get(t); n > 0 || capture.IsElectionType(t) {
			ru.r.Messages[t.String()] = int(n)
		}
	}
}

// checkCounters cross-checks the nodes' counters from the baseline to end
// with what the capture saw them send in that time.
func (ru *runner) checkCounters(rep *capture.Report, end endCounters) *runFailure {
	wireSent, err := capture.CountSent(ru.capPath, func(_ string, at time.Time) bool {
		return !at.Before(ru.baseline) && !at.After(end.cutoff)
	})
	if err != nil {
		return failure(FailSetup, "counting the capture: %v", err)
	}
	faults := ru.faults.faults
	ru.r.Counters = crossCheck(ru.names, ru.before, end.after, wireSent, disturbedNodes(faults), dropping(ru.opts.Topology, faults, ru.names))
	if cs := rep.Capture; cs != nil && cs.Drops > 0 {
		// Frames the ring had no room for are missing from every count
		// the capture gives; comparing them with the counters would only
		// list the losses node by node.
		ru.r.Counters = CountersCheck{Mismatches: []string{fmt.Sprintf(
			"the capture dropped %d of %d packets (its ring was full), so it cannot be compared with the counters", cs.Drops, cs.Packets)}}
	}
	return nil
}

// disturbedNodes returns the nodes that crashed, restarted, left or joined:
// their counters were lost or reset.
func disturbedNodes(faults []fault.Fault) map[string]bool {
	out := map[string]bool{}
	for _, f := range faults {
		switch f.Kind {
		case fault.Crash, fault.Restart, fault.Leave, fault.Join:
			for _, n := range f.Nodes {
				out[n] = true
			}
		}
	}
	return out
}

// judge runs the safety and liveness checks and decides the run: the
// checks' failure first, then the counters', then no measured election in
// the capture.
func (ru *runner) judge(m *measurement) (Run, *runDetail) {
	topo := ru.opts.Topology
	bound := sle2Bound(topo, messageDelay(ru.faults.owd, ru.backend))
	var agreed *lab.Leader
	if ag, ok := ru.tgt.lastAgreement(); ok {
		agreed = &ag
	}
	in := checkInput(m.rep, topo, ru.faults.faults, ru.faults.lastInForce, agreed, m.fault.Time, ru.ended, bound)
	if m.lossyAtEnd {
		// SLE2 bounds the time from the network being synchronous again;
		// with loss still in force it is not (a lost SYN alone costs a
		// second), so the run must converge, within its wait_leader
		// timeout, but no bound applies.
		in.Bound = 0
	}
	r := ru.r
	r.Checks = Check(in)
	switch kind, reason := r.Checks.Failure(); {
	case kind != "":
		r.FailureKind, r.Failure = kind, reason
	case !r.Counters.OK:
		r.FailureKind, r.Failure = FailCounters, r.Counters.Mismatches[0]
	case m.el == nil:
		r.FailureKind, r.Failure = FailLiveness, "the capture holds no election after the measured fault"
	default:
		r.OK = true
	}
	d := &runDetail{}
	if m.el != nil {
		d.seq = sequenceOf(m.rep, m.el, ru.names, ru.faults.faults, m.fault.Time)
	}
	return r, d
}

// stillCounters reads the running nodes' sent counters twice in a row
// until the two reads agree, and returns them with a time between the
// reads: every node's counters were the same before and after it, so a
// frame on the wire before that time was counted and one after it was
// not (with no delay in force). It gives up after a few tries, returning
// the last read, when the nodes keep sending.
func stillCounters(ctx context.Context, lb *lab.Lab) (map[string]map[string]uint64, time.Time) {
	prev := sentCounters(lb.NodeStates())
	for range 20 {
		at := time.Now()
		cur := sentCounters(lb.NodeStates())
		if sameCounters(prev, cur) || ctx.Err() != nil {
			return cur, at
		}
		prev = cur
	}
	return prev, time.Now()
}

func sameCounters(a, b map[string]map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for n, ca := range a {
		cb, ok := b[n]
		if !ok {
			return false
		}
		for _, t := range electionTypes {
			if ca[t.String()] != cb[t.String()] {
				return false
			}
		}
	}
	return true
}

// sentCounters reads the running nodes' sent counters by node and type.
func sentCounters(st []lab.NodeState) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, s := range st {
		if s.State == lab.ProcRunning && s.View != nil {
			out[s.Node] = s.View.Counters.Sent
		}
	}
	return out
}

// crossCheck compares, per node that ran from the baseline to the end
// undisturbed, the frames of each election type its counters say it sent
// with the frames the capture saw from it.
//
// What it can compare exactly: a node counts a frame as sent once the
// kernel took all its bytes, and the lab drops packets only at the
// receivers (partitions, isolation and loss alike), so every frame that
// left a node crossed the switch and the capture saw it once (TCP
// retransmissions are reassembled away). A frame can still be counted and
// never leave: written into a connection whose earlier segments go
// unacknowledged (the peer's side drops them), it waits in the kernel
// behind them, and when TCP_USER_TIMEOUT aborts the connection it is
// discarded unsent. So for the nodes in lossy, which sent while a
// partition, isolation or loss was in force, the counters only bound the
// capture from above; for every other node the two must be equal.
func crossCheck(names []string, before, after map[string]map[string]uint64, wireSent capture.SentCounts, disturbed, lossy map[string]bool) CountersCheck {
	cc := CountersCheck{OK: true}
	for _, n := range names {
		b, okb := before[n]
		a, oka := after[n]
		if disturbed[n] || !okb || !oka {
			continue // crashed or restarted: its counters are gone or reset
		}
		if lossy[n] {
			cc.AtMost = append(cc.AtMost, n)
		}
		for _, t := range electionTypes {
			ts := t.String()
			got := int(a[ts]) - int(b[ts])
			w := int(wireSent[n][ts])
			switch {
			case w == got:
			case lossy[n] && w < got:
			case lossy[n]:
				cc.OK = false
				cc.Mismatches = append(cc.Mismatches, fmt.Sprintf("%s sent %d %s by its counters, the capture saw more: %d", n, got, ts, w))
			default:
				cc.OK = false
				cc.Mismatches = append(cc.Mismatches, fmt.Sprintf("%s sent %d %s by its counters, the capture saw %d", n, got, ts, w))
			}
		}
	}
	return cc
}

// dropping returns the nodes that may have written into a network that
// dropped their packets or the acknowledgements of them during the run:
// with a partition or an isolation every node may have (each may send to a
// node cut off), and with loss every node whose sends or whose peers'
// sends were lossy, which for simplicity is every node too; the same when
// the topology itself loses packets.
func dropping(topo *topologies.Topology, faults []fault.Fault, names []string) map[string]bool {
	out := map[string]bool{}
	lossy := slices.ContainsFunc(topo.Nodes, func(n topologies.Node) bool { return n.Impair.Loss > 0 }) ||
		slices.ContainsFunc(topo.PairImpairs, func(p topologies.PairImpair) bool { return p.Impair.Loss > 0 })
	for _, f := range faults {
		if lossy {
			break
		}
		switch f.Kind {
		case fault.Partition, fault.Isolate, fault.Loss:
			lossy = true
		}
	}
	if lossy {
		for _, n := range names {
			out[n] = true
		}
	}
	return out
}

// measuredElection is the election the measured fault triggered: the one
// whose trigger is that record, else the first starting after it.
func measuredElection(rep *capture.Report, fault time.Time) *capture.Election {
	for i := range rep.Elections {
		if e := &rep.Elections[i]; e.Trigger.Kind != "wire" && e.Trigger.Time.Equal(fault) {
			return e
		}
	}
	for i := range rep.Elections {
		if e := &rep.Elections[i]; !e.Start.Before(fault) || !e.End.Before(fault) {
			return e
		}
	}
	return nil
}

// waitStill waits until no running node's election counters move for
// quiet, at most timeout.
func waitStill(ctx context.Context, lb *lab.Lab, quiet, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var last uint64
	since := time.Now()
	for first := true; ; first = false {
		var sum uint64
		for _, s := range lb.NodeStates() {
			if s.View != nil {
				for _, t := range electionTypes {
					sum += s.View.Counters.Sent[t.String()]
				}
			}
		}
		now := time.Now()
		if first || sum != last {
			last, since = sum, now
		} else if now.Sub(since) >= quiet {
			return
		}
		if now.After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(quietPoll):
		}
	}
}

// quietPoll is how often waitQuiet reads the nodes' counters.
const quietPoll = 50 * time.Millisecond

// waitQuiet waits until every running node has followed leader, and no
// node has sent an election message, for quiet: the counters of every
// node, read through the control sockets, do not move.
func waitQuiet(ctx context.Context, lb *lab.Lab, leader string, quiet, timeout time.Duration) error {
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
			if s.View == nil || s.Status != node.StatusNormal.String() || s.Leader != leader {
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

// settleTime is the silence the analysis needs to end an election
// (capture.AnalyzeOptions.Quiet's default), and a margin.
func settleTime(topo *topologies.Topology) time.Duration {
	q := capture.DefaultQuiet
	for _, n := range topo.Nodes {
		s := n.Settings
		// A waiting node's timeout is staggered too (node.MaxStaggerDelay).
		q = max(q, (node.WaitFactor+1)*s.ElectionTimeout+node.MaxStaggerDelay(len(topo.Nodes), s.DetectionStagger, s.ElectionTimeout))
	}
	return q + 200*time.Millisecond
}

// checkInput derives tenures and disruptions from the capture and the
// faults, times relative to the measured fault at origin; end is when the
// scenario ended, lastInForce when its last fault was in force, agreed
// the last agreement a wait_leader saw (nil when none did), and bound the
// SLE2 bound.
func checkInput(rep *capture.Report, topo *topologies.Topology, faults []fault.Fault, lastInForce time.Time, agreed *lab.Leader, origin, end time.Time, bound time.Duration) CheckInput {
	s := newCheckSource(rep, topo, faults, origin, end)
	in := CheckInput{Grace: bound, Bound: bound}
	in.Tenures = s.tenures()
	in.Disruptions = s.disruptions()
	in.Convergence = s.convergence(lastInForce, agreed)
	return in
}

// checkSource is what checkInput derives from.
type checkSource struct {
	rep         *capture.Report
	names       []string // the topology's nodes, lowest ID first
	faults      []fault.Fault
	origin, end time.Time
	// timelines are the timelines of rep's elections, by number; an
	// election whose timeline the report cannot give has none.
	timelines map[int]*capture.Timeline
}

func newCheckSource(rep *capture.Report, topo *topologies.Topology, faults []fault.Fault, origin, end time.Time) *checkSource {
	s := &checkSource{rep: rep, faults: faults, origin: origin, end: end,
		names: make([]string, len(topo.Nodes)), timelines: map[int]*capture.Timeline{}}
	for i, n := range topo.Nodes {
		s.names[i] = n.Name
	}
	for i := range rep.Elections {
		if tl, err := rep.ElectionTimeline(rep.Elections[i].N); err == nil {
			s.timelines[rep.Elections[i].N] = tl
		}
	}
	return s
}

// rel is t relative to the measured fault.
func (s *checkSource) rel(t time.Time) time.Duration { return t.Sub(s.origin) }

// tenures are the stable leader's from the start, then every election's
// winner's from its first COORDINATOR; a tenure ends at its node's
// step-down, crash, pause, leave or isolation, or when another tenure of
// the same node starts.
func (s *checkSource) tenures() []Tenure {
	steps := s.stepDowns()
	var tenures []Tenure
	if len(s.names) > 0 {
		n := s.names[len(s.names)-1]
		tenures = append(tenures, Tenure{Node: n, Start: s.rel(s.rep.Start), End: s.rel(steps.stop(n, 0, s.rep.Start, s.end))})
	}
	for i := range s.rep.Elections {
		e := &s.rep.Elections[i]
		if e.Leader == "" {
			continue
		}
		at := coordinatorAt(e, s.timelines[e.N])
		// The same node's earlier tenure ends here.
		for j := range tenures {
			if tenures[j].Node == e.Leader && tenures[j].End == s.rel(s.end) {
				tenures[j].End = s.rel(at)
			}
		}
		tenures = append(tenures, Tenure{Node: e.Leader, Epoch: e.Epoch, Start: s.rel(at), End: s.rel(steps.stop(e.Leader, e.Epoch, at, s.end))})
	}
	for _, f := range s.faults {
		switch f.Kind {
		case fault.Crash, fault.Pause, fault.Leave, fault.Isolate:
			for _, n := range f.Nodes {
				endTenures(tenures, n, s.rel(f.Time))
			}
		}
	}
	return tenures
}

// endTenures ends node n's tenures in force at t there.
func endTenures(tenures []Tenure, n string, t time.Duration) {
	for j := range tenures {
		if tenures[j].Node == n && tenures[j].Start <= t && tenures[j].End > t {
			tenures[j].End = t
		}
	}
}

// coordinatorAt is when e's winner sent its first COORDINATOR of e's
// epoch in tl, or e's start when tl (which may be nil) has none.
func coordinatorAt(e *capture.Election, tl *capture.Timeline) time.Time {
	if tl == nil {
		return e.Start
	}
	for _, en := range tl.Entries {
		if en.Type == wire.TypeCoordinator.String() && en.From == e.Leader && en.Epoch == e.Epoch {
			return en.Time
		}
	}
	return e.Start
}

// stepDowns are the step-downs of each node on the wire: a leader that
// sends ELECTION or HALT_ACK has left Normal, and one that proposes a
// later epoch with HALT no longer leads its own.
type stepDowns map[string][]stepDown

type stepDown struct {
	at    time.Time
	epoch uint64 // for HALT: the epoch proposed; 0 otherwise
}

// stepDowns finds the step-downs in the elections' timelines.
func (s *checkSource) stepDowns() stepDowns {
	steps := stepDowns{}
	for i := range s.rep.Elections {
		tl := s.timelines[s.rep.Elections[i].N]
		if tl == nil {
			continue
		}
		for _, en := range tl.Entries {
			switch en.Type {
			case wire.TypeElection.String(), wire.TypeHaltAck.String():
				steps[en.From] = append(steps[en.From], stepDown{at: en.Time})
			case wire.TypeHalt.String():
				steps[en.From] = append(steps[en.From], stepDown{at: en.Time, epoch: en.Epoch})
			}
		}
	}
	return steps
}

// stop is when n, leading epoch since from, stepped down: its first
// step-down after from that ends a lead of that epoch, end when none came
// before it.
func (steps stepDowns) stop(n string, epoch uint64, from, end time.Time) time.Time {
	stop := end
	for _, sd := range steps[n] {
		if sd.at.After(from) && sd.at.Before(stop) && (sd.epoch == 0 || sd.epoch > epoch) {
			stop = sd.at
		}
	}
	return stop
}

// disruptions are the partitions and isolations until healed, and the
// impairments until cleared; those never healed or cleared last to the
// end.
func (s *checkSource) disruptions() []Disruption {
	var out []Disruption
	open := map[string]time.Time{}
	begin := func(k string, t time.Time) {
		if _, ok := open[k]; !ok {
			open[k] = t
		}
	}
	finish := func(k string, t time.Time) {
		if start, ok := open[k]; ok {
			out = append(out, Disruption{Start: s.rel(start), End: s.rel(t), What: k})
			delete(open, k)
		}
	}
	for _, f := range s.faults {
		switch f.Kind {
		case fault.Partition, fault.Isolate:
			begin(string(f.Kind), f.Time)
		case fault.Delay, fault.Loss:
			begin("impair", f.Time)
		case fault.Heal:
			finish(string(fault.Partition), f.Time)
			finish(string(fault.Isolate), f.Time)
		case fault.Unisolate:
			finish(string(fault.Isolate), f.Time)
		case fault.Clear:
			finish("impair", f.Time)
		}
	}
	for k := range open {
		finish(k, s.end)
	}
	return out
}

// convergence is the time from the last fault being in force (a restart
// of every node takes until the last one listens) to the last agreement,
// when that agreement came after it and is on the highest node it
// covered; nil otherwise, or when the run had no fault.
func (s *checkSource) convergence(lastInForce time.Time, agreed *lab.Leader) *time.Duration {
	if len(s.faults) == 0 || agreed == nil || !agreed.At.After(lastInForce) || len(agreed.Nodes) == 0 {
		return nil
	}
	if agreed.Node != highestOf(agreed.Nodes, s.names) {
		return nil
	}
	// The lab saw the agreement at its poll, which on a loaded host can
	// come long after it; the nodes' states last changed at the last
	// election message on the wire before it (or, with none, the poll is
	// all there is).
	at := agreed.At
	if m := s.lastMessage(lastInForce, agreed.At); !m.IsZero() {
		at = m
	}
	c := at.Sub(lastInForce)
	return &c
}

// lastMessage is the time of the last election message on the wire after
// from and not after to; zero when there is none.
func (s *checkSource) lastMessage(from, to time.Time) time.Time {
	var last time.Time
	for _, tl := range s.timelines {
		for _, en := range tl.Entries {
			if en.Time.After(from) && !en.Time.After(to) && en.Time.After(last) {
				last = en.Time
			}
		}
	}
	return last
}

// highestOf is the highest of nodes in the order of names (ID order); a
// node names lacks ranks with its first.
func highestOf(nodes, names []string) string {
	rank := map[string]int{}
	for i, n := range names {
		rank[n] = i
	}
	highest := ""
	for _, n := range nodes {
		if highest == "" || rank[n] > rank[highest] {
			highest = n
		}
	}
	return highest
}

// sequenceOf draws election el of rep.
func sequenceOf(rep *capture.Report, el *capture.Election, names []string, faults []fault.Fault, origin time.Time) *Sequence {
	tl, err := rep.ElectionTimeline(el.N)
	if err != nil {
		return nil
	}
	seq := &Sequence{Nodes: names, Origin: origin}
	for _, en := range tl.Entries {
		seq.Messages = append(seq.Messages, Message{Time: en.Time, From: en.From, To: en.To, Type: en.Type, Epoch: en.Epoch})
	}
	for _, f := range faults {
		if f.Time.Before(origin.Add(-time.Second)) || f.Time.After(el.End) {
			continue
		}
		seq.Faults = append(seq.Faults, FaultMark{Time: f.Time, Text: string(f.Kind), Nodes: f.Nodes})
	}
	return seq
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
