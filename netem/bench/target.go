//go:build linux

package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// testbed is what a run drives: a lab on this host (localLab), or one
// across hosts (*remote.Span).
type testbed interface {
	Run() string
	Key() wire.Key
	Topology() *topologies.Topology
	// Nodes are the node names in topology order, lowest ID first.
	Nodes() []string
	NodeStates() []lab.NodeState
	WaitLeader(ctx context.Context, pred func(lab.Leader) bool) (lab.Leader, error)
	WaitLeaderAmong(ctx context.Context, names []string, pred func(lab.Leader) bool) (lab.Leader, error)
	Apply(ctx context.Context, f fault.Fault) (fault.Fault, error)
	Crash(names ...string) (fault.Fault, error)
	OnFault(f func(fault.Fault))
	MaxDelay() time.Duration
	Lossy() bool
	Failed() []lab.NodeFailure
	DelayerStats() map[string]netem.DelayerStats
	// EventLog returns a node's event log, and how far the clock that
	// stamped it is ahead of this host's; before Close.
	EventLog(name string) ([]byte, time.Duration, error)
	// StopCapture completes the run's capture file.
	StopCapture() (capture.CaptureStats, error)
	Close() error
}

// localLab is a lab on this host as a testbed: the lab, its faults and
// the watch on its nodes.
type localLab struct {
	*lab.Lab
	*lab.Faults
	*lab.Monitor
}

func (l localLab) EventLog(name string) ([]byte, time.Duration, error) {
	path, err := l.LogPath(name)
	if err != nil {
		return nil, 0, err
	}
	data, err := readEventLog(path)
	return data, 0, err
}

func (l localLab) StopCapture() (capture.CaptureStats, error) { return l.Capture().Stop() }

var (
	_ testbed = localLab{}
	_ testbed = (*remote.Span)(nil)
)

// labTarget drives a testbed for scenario.Execute. Node lists it is given
// are lowest ID first, which is topology order on a testbed.
type labTarget struct {
	lab   testbed
	names []string // topology order = ID order

	mu   sync.Mutex
	left map[string]bool
	// agreements are what WaitLeader steps observed, in order.
	agreements []lab.Leader
	// sentBefore is the nodes' sent counters read just before the last
	// fault: WaitElection's baseline (sentCounters). Read only when
	// waitsElection: it asks every node.
	sentBefore    map[string]map[string]uint64
	waitsElection bool
}

// targetPoll is how often WaitElection looks at the nodes.
const targetPoll = 5 * time.Millisecond

// newLabTarget drives lb through sc's steps.
func newLabTarget(lb testbed, sc *scenario.Scenario) *labTarget {
	waits := slices.ContainsFunc(sc.Steps, func(st scenario.Step) bool { return st.Kind == scenario.StepWaitElection })
	return &labTarget{lab: lb, names: lb.Nodes(), left: map[string]bool{}, waitsElection: waits}
}

var _ scenario.Target = (*labTarget)(nil)

// Apply applies f to the lab, and notes which nodes left and which run
// again, for the views it reports.
func (t *labTarget) Apply(ctx context.Context, f fault.Fault) error {
	var before map[string]map[string]uint64
	if t.waitsElection {
		before = sentCounters(t.lab.NodeStates())
	}
	if _, err := t.lab.Apply(ctx, f); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sentBefore = before
	for _, n := range f.Nodes {
		switch f.Kind {
		case fault.Leave:
			t.left[n] = true
		case fault.Restart, fault.Join:
			delete(t.left, n)
		}
	}
	return nil
}

func (t *labTarget) Status(context.Context) (scenario.View, error) {
	return t.view(t.lab.NodeStates()), nil
}

// view turns the Lab's status into a scenario view: the leader is the one
// most live Normal nodes follow, ties to the higher ID.
func (t *labTarget) view(st []lab.NodeState) scenario.View {
	t.mu.Lock()
	defer t.mu.Unlock()
	v := scenario.View{Groups: selectorGroups(t.lab.Topology())}
	rank := map[string]int{}
	for i, n := range t.names {
		rank[n] = i
	}
	type key struct {
		leader string
		epoch  uint64
	}
	votes := map[key]int{}
	for _, s := range st {
		nv := scenario.NodeView{Name: s.Node}
		switch {
		case t.left[s.Node] && s.State != lab.ProcRunning && s.State != lab.ProcPaused:
			nv.Status = scenario.StatusLeft
		case s.State == lab.ProcRunning:
			nv.Status = scenario.StatusLive
		case s.State == lab.ProcPaused:
			nv.Status = scenario.StatusPaused
		default:
			nv.Status = scenario.StatusCrashed
		}
		v.Nodes = append(v.Nodes, nv)
		if nv.Status == scenario.StatusLive && s.Status == "normal" && s.Leader != "" {
			votes[key{s.Leader, s.Epoch}]++
		}
	}
	best, bestN := key{}, 0
	for k, n := range votes {
		if n > bestN || n == bestN && rank[k.leader] > rank[best.leader] {
			best, bestN = k, n
		}
	}
	v.Leader, v.Epoch = best.leader, best.epoch
	return v
}

func (t *labTarget) WaitLeader(ctx context.Context, nodes []string, timeout time.Duration) (scenario.View, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ag, err := t.lab.WaitLeaderAmong(wctx, nodes, nil)
	if err != nil {
		if ctx.Err() != nil {
			return scenario.View{}, ctx.Err()
		}
		return scenario.View{}, fmt.Errorf("%w within %s: %v", scenario.ErrNoLeader, timeout, err)
	}
	t.mu.Lock()
	t.agreements = append(t.agreements, ag)
	t.mu.Unlock()
	v := t.view(t.lab.NodeStates())
	v.Leader, v.Epoch = ag.Node, ag.Epoch
	return v, nil
}

func (t *labTarget) WaitElection(ctx context.Context, timeout time.Duration) (scenario.View, error) {
	deadline := time.Now().Add(timeout)
	// A node's election status can last less than a poll (the highest
	// survivor halts the rest within milliseconds; a ring's run goes round
	// in as little), so an ELECTION, HALT or RING_ELECTION a node sent since
	// just before the last fault counts as well. Not since the first look:
	// a leader's crash, with its evidence, was seen elected over before it
	// (slow-star5 at load 13), and the step waited its 30 s for nothing.
	t.mu.Lock()
	base := t.sentBefore
	t.mu.Unlock()
	for {
		st := t.lab.NodeStates()
		sent := sentCounters(st)
		if base == nil {
			base = sent
		}
		for _, s := range st {
			if s.State == lab.ProcRunning && (s.Status == "electing" || s.Status == "halting" || s.Status == "waiting") {
				return t.view(st), nil
			}
		}
		for n, c := range sent {
			if b, ok := base[n]; ok && slices.ContainsFunc(openingTypes, func(typ wire.Type) bool { return c[typ.String()] > b[typ.String()] }) {
				return t.view(st), nil
			}
		}
		if time.Now().After(deadline) {
			return scenario.View{}, fmt.Errorf("%w within %s", scenario.ErrNoElection, timeout)
		}
		select {
		case <-ctx.Done():
			return scenario.View{}, ctx.Err()
		case <-time.After(targetPoll):
		}
	}
}

// openingTypes are the types that open an election, of either algorithm.
var openingTypes = []wire.Type{wire.TypeElection, wire.TypeHalt, wire.TypeRingElection}

// lastAgreement returns the latest agreement a WaitLeader step saw.
func (t *labTarget) lastAgreement() (lab.Leader, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.agreements) == 0 {
		return lab.Leader{}, false
	}
	return t.agreements[len(t.agreements)-1], true
}
