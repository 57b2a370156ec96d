package scenario_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies/fault"
)

// fakeTarget is an in-memory testbed that behaves like a correct Bully
// cluster: whenever asked, the highest live node waited for leads. It logs
// every call the way a capture would list the faults.
type fakeTarget struct {
	order  []string // lowest ID first
	status map[string]scenario.ProcessState
	groups map[string][]string
	leader string
	epoch  uint64

	calls       []string
	statusCalls int
	// wrongLeader makes WaitLeader elect the second highest node.
	wrongLeader bool
	// noLeader makes WaitLeader time out.
	noLeader bool
	// failOn makes the fault of that kind fail.
	failOn string
}

func newFake(order ...string) *fakeTarget {
	f := &fakeTarget{order: order, status: map[string]scenario.ProcessState{}}
	for _, n := range order {
		f.status[n] = scenario.StatusLive
	}
	f.leader, f.epoch = order[len(order)-1], 1
	return f
}

// starFake is star16 with IDs in topology order, as the lab assigns them.
func starFake(n int) *fakeTarget {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return newFake(names...)
}

func (f *fakeTarget) names() []string { return slices.Clone(f.order) }

func (f *fakeTarget) view() scenario.View {
	v := scenario.View{Groups: f.groups, Leader: f.leader, Epoch: f.epoch}
	for _, n := range f.order {
		v.Nodes = append(v.Nodes, scenario.NodeView{Name: n, Status: f.status[n]})
	}
	return v
}

func (f *fakeTarget) log(kind string, nodes []string) error {
	f.calls = append(f.calls, kind+" "+strings.Join(nodes, ","))
	if f.failOn == kind {
		return fmt.Errorf("injected failure")
	}
	return nil
}

func (f *fakeTarget) set(kind string, nodes []string, from []scenario.ProcessState, to scenario.ProcessState) error {
	if err := f.log(kind, nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		st, ok := f.status[n]
		if !ok {
			return fmt.Errorf("no node %s", n)
		}
		if !slices.Contains(from, st) {
			return fmt.Errorf("%s: node %s is %s", kind, n, st)
		}
		f.status[n] = to
		if n == f.leader && to != scenario.StatusLive {
			f.leader = ""
		}
	}
	return nil
}

var (
	live    = []scenario.ProcessState{scenario.StatusLive}
	running = []scenario.ProcessState{scenario.StatusLive, scenario.StatusPaused}
)

// Apply does what the lab would to the fake's node statuses and logs the
// fault.
func (f *fakeTarget) Apply(_ context.Context, ft fault.Fault) error {
	n := ft.Nodes
	switch ft.Kind {
	case fault.Crash:
		return f.set("crash", n, running, scenario.StatusCrashed)
	case fault.Restart:
		return f.set("restart", n, []scenario.ProcessState{scenario.StatusCrashed, scenario.StatusLeft}, scenario.StatusLive)
	case fault.Pause:
		return f.set("pause", n, live, scenario.StatusPaused)
	case fault.Resume:
		return f.set("resume", n, []scenario.ProcessState{scenario.StatusPaused}, scenario.StatusLive)
	case fault.Leave:
		return f.set("leave", n, live, scenario.StatusLeft)
	case fault.Join:
		return f.set("join", n, []scenario.ProcessState{scenario.StatusLeft}, scenario.StatusLive)
	case fault.Heal:
		return f.log("heal", nil)
	case fault.Partition:
		return f.partition(ft.Groups, ft.OneWay)
	case fault.Cut:
		sep := "-"
		if ft.OneWay {
			sep = "->"
		}
		pairs := make([]string, len(ft.Links))
		for i, l := range ft.Links {
			pairs[i] = l[0] + sep + l[1]
		}
		return f.log("cut"+modeText(ft.Mode), pairs)
	case fault.Clock:
		return f.log(fmt.Sprintf("clock %v %gppm", ft.Clock.Offset, ft.Clock.RatePPM), n)
	case fault.Isolate:
		return f.log("isolate"+modeText(ft.Mode), n)
	case fault.Delay:
		return f.log(fmt.Sprintf("delay %v±%v", ft.Impair.Delay, ft.Impair.Jitter), n)
	case fault.Loss:
		return f.log(fmt.Sprintf("loss %g%%", ft.Impair.Loss), n)
	}
	return f.log(string(ft.Kind), n) // isolate, unisolate, campaign, clear
}

func modeText(m fault.CutMode) string {
	if m == "" {
		return ""
	}
	return " (" + string(m) + ")"
}

func (f *fakeTarget) partition(groups [][]string, oneWay bool) error {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = strings.Join(g, ",")
	}
	sep := " | "
	if oneWay {
		sep = " -> "
	}
	return f.log("partition", []string{strings.Join(parts, sep)})
}

func (f *fakeTarget) Status(context.Context) (scenario.View, error) {
	f.statusCalls++
	return f.view(), nil
}

func (f *fakeTarget) WaitLeader(_ context.Context, nodes []string, timeout time.Duration) (scenario.View, error) {
	f.calls = append(f.calls, "wait_leader "+strings.Join(nodes, ","))
	if f.noLeader {
		return f.view(), fmt.Errorf("%w within %v", scenario.ErrNoLeader, timeout)
	}
	var up []string
	for _, n := range nodes {
		if f.status[n] == scenario.StatusLive {
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return f.view(), fmt.Errorf("%w: nobody live", scenario.ErrNoLeader)
	}
	leader := up[len(up)-1]
	if f.wrongLeader && len(up) > 1 {
		leader = up[len(up)-2]
	}
	if leader != f.leader {
		f.leader = leader
		f.epoch++
	}
	return f.view(), nil
}

func (f *fakeTarget) WaitElection(context.Context, time.Duration) (scenario.View, error) {
	f.calls = append(f.calls, "wait_election")
	return f.view(), nil
}
