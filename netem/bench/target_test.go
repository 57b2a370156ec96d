//go:build linux

package bench

import (
	"context"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// electedAtOnce is a testbed whose every crash is elected over before
// Apply returns, as a leader's crash, with its evidence, can be on a
// loaded host: the survivors are back to normal, their HALTs sent.
type electedAtOnce struct {
	testbed // only the methods below are called
	topo    *topologies.Topology
	halts   map[string]uint64
}

func (e *electedAtOnce) Nodes() []string { return []string{"n1", "n2", "n3"} }

func (e *electedAtOnce) Topology() *topologies.Topology { return e.topo }

func (e *electedAtOnce) NodeStates() []lab.NodeState {
	var st []lab.NodeState
	for _, n := range e.Nodes() {
		st = append(st, lab.NodeState{Node: n, State: lab.ProcRunning, Status: "normal",
			View: &node.NodeStatus{Counters: node.CounterSnapshot{Sent: map[string]uint64{"HALT": e.halts[n]}}}})
	}
	return st
}

func (e *electedAtOnce) Apply(_ context.Context, f fault.Fault) (fault.Fault, error) {
	e.halts["n2"]++
	return f, nil
}

// An election over before WaitElection first looks still counts: its
// HALT was sent after the fault.
func TestWaitElectionAfterFastElection(t *testing.T) {
	topo, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scenario.Scenario{Steps: []scenario.Step{{Kind: scenario.StepInject}, {Kind: scenario.StepWaitElection}}}
	target := newLabTarget(&electedAtOnce{topo: topo, halts: map[string]uint64{}}, sc)
	if err := target.Apply(t.Context(), fault.Fault{Kind: fault.Crash, Nodes: []string{"n3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := target.WaitElection(t.Context(), 200*time.Millisecond); err != nil {
		t.Fatalf("an election that ended before the first look: %v", err)
	}
}
