package scenario_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/scenario"
)

func builtin(t *testing.T, name string, p scenario.Params) *scenario.Scenario {
	t.Helper()
	scs, err := scenario.Builtin(name, p)
	if err != nil {
		t.Fatal(err)
	}
	return scs[0]
}

func TestExecuteLeaderCrash(t *testing.T) {
	f := starFake(5)
	var events []scenario.StepEvent
	err := scenario.Execute(t.Context(), builtin(t, "leader-crash", scenario.Params{}), f, scenario.NewRand(1),
		func(ev scenario.StepEvent) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"crash n5", "wait_leader n1,n2,n3,n4"}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	if len(events) != 2 {
		t.Fatalf("%d events, want 2", len(events))
	}
	w := events[1]
	if w.View.Leader != "n4" || w.View.Epoch != 2 || !w.Action.Measure || w.Err != nil {
		t.Errorf("wait_leader event: leader %q epoch %d measure %v err %v", w.View.Leader, w.View.Epoch, w.Action.Measure, w.Err)
	}
	if w.Start.Before(events[0].End) || w.End.Before(w.Start) {
		t.Errorf("event times out of order: %v %v / %v %v", events[0].Start, events[0].End, w.Start, w.End)
	}
}

// On a testbed that behaves, Execute does what the dry run printed.
func TestExecuteFollowsResolve(t *testing.T) {
	p := scenario.Params{Nodes: 16, Seed: 5}
	for _, name := range scenario.BuiltinNames() {
		scs, err := scenario.Builtin(name, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range scs {
			f := starFake(16)
			if sc.Start == scenario.StartCold {
				for n := range f.status {
					f.status[n] = scenario.StatusCrashed
				}
				f.leader = ""
			}
			sc = fast(sc)
			plan, err := scenario.Resolve(sc, f.view(), scenario.NewRand(11))
			if err != nil {
				t.Fatalf("%s: resolve: %v", sc.Key(), err)
			}
			var ran scenario.Schedule
			err = scenario.Execute(t.Context(), sc, f, scenario.NewRand(11), func(ev scenario.StepEvent) {
				ran = append(ran, ev.Action)
			})
			if err != nil {
				t.Fatalf("%s: execute: %v", sc.Key(), err)
			}
			if plan.String() != ran.String() {
				t.Errorf("%s: executed\n%s\nplanned\n%s", sc.Key(), ran, plan)
			}
		}
	}
}

// fast shortens wait steps so that tests do not sleep for seconds.
func fast(sc *scenario.Scenario) *scenario.Scenario {
	c := *sc
	c.Steps = append([]scenario.Step(nil), sc.Steps...)
	for i := range c.Steps {
		if c.Steps[i].Kind == scenario.StepWait {
			c.Steps[i].Duration = time.Microsecond
		}
	}
	return &c
}

// The same seed gives the same fault schedule, call for call; another seed
// another one.
func TestExecuteSameSeedSameFaults(t *testing.T) {
	sc := fast(builtin(t, "chaos", scenario.Params{Nodes: 16, Seed: 1, Faults: 25}))
	run := func(seed int64) []string {
		f := starFake(16)
		if err := scenario.Execute(t.Context(), sc, f, scenario.NewRand(seed), nil); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		return f.calls
	}
	a, b := run(8), run(8)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 8 twice:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if c := run(9); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 8 and 9 injected the same faults:\n%s", strings.Join(a, "\n"))
	}
}

func TestExecuteUnexpectedLeader(t *testing.T) {
	f := starFake(5)
	f.wrongLeader = true
	var last scenario.StepEvent
	err := scenario.Execute(t.Context(), builtin(t, "leader-crash", scenario.Params{}), f, scenario.NewRand(1),
		func(ev scenario.StepEvent) { last = ev })
	var se *scenario.StepError
	if !errors.As(err, &se) || se.Step != 1 || !errors.Is(err, scenario.ErrUnexpectedLeader) {
		t.Fatalf("err = %v, want a StepError of step 2 wrapping ErrUnexpectedLeader", err)
	}
	want := "step 2 (wait_leader): unexpected leader: n3 leads epoch 2, want n4, the highest live node waited for"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if last.Err == nil || last.View.Leader != "n3" {
		t.Errorf("failed step's event: err %v, leader %q", last.Err, last.View.Leader)
	}
}

func TestExecuteNoLeader(t *testing.T) {
	f := starFake(3)
	f.noLeader = true
	err := scenario.Execute(t.Context(), builtin(t, "leader-crash", scenario.Params{}), f, scenario.NewRand(1), nil)
	if !errors.Is(err, scenario.ErrNoLeader) {
		t.Fatalf("err = %v, want ErrNoLeader", err)
	}
}

func TestExecuteFaultFails(t *testing.T) {
	f := starFake(3)
	f.failOn = "crash"
	err := scenario.Execute(t.Context(), builtin(t, "leader-crash", scenario.Params{}), f, scenario.NewRand(1), nil)
	if err == nil || err.Error() != "step 1 (inject): crash: injected failure" {
		t.Fatalf("err = %v", err)
	}
}

// crash-during-election strikes with the view wait_election returned,
// without a Status round between them.
func TestExecuteReusesWaitView(t *testing.T) {
	f := starFake(6)
	var statusAt []int
	sc := builtin(t, "crash-during-election", scenario.Params{})
	err := scenario.Execute(t.Context(), sc, f, scenario.NewRand(1), func(ev scenario.StepEvent) {
		statusAt = append(statusAt, f.statusCalls)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"crash n6", "wait_election", "crash n5", "wait_leader n1,n2,n3,n4"}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls %q, want %q", f.calls, want)
	}
	// Status before step 1 only; step 3 used wait_election's view; step 4
	// asked again, since a crash changed the testbed.
	if !reflect.DeepEqual(statusAt, []int{1, 1, 1, 2}) {
		t.Errorf("Status calls after each step: %v, want [1 1 1 2]", statusAt)
	}
}

func TestExecuteStopsOnCancel(t *testing.T) {
	sc, err := scenario.Parse("t.yaml", []byte("steps:\n  - inject: {crash: leader}\n  - wait: 1h\n  - wait_leader\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err = scenario.Execute(ctx, sc, starFake(3), scenario.NewRand(1), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

// Partitions, one-way cuts, isolation, delay and loss reach the Target as
// whole-group calls, and heal undoes exactly what is in force.
func TestExecuteNetworkFaults(t *testing.T) {
	sc, err := scenario.Parse("t.yaml", []byte(`
steps:
  - inject: {delay: {delay: 20ms, jitter: 2ms}}
  - inject: {loss: {nodes: ['top:2'], percent: 3}}
  - inject: {isolate: lowest}
  - inject: {partition: {groups: [leader, rest], one_way: true}}
  - wait_leader: {measure: true}
  - heal
  - wait_leader
`))
	if err != nil {
		t.Fatal(err)
	}
	f := starFake(4)
	if err := scenario.Execute(t.Context(), sc, f, scenario.NewRand(1), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"delay 20ms±2ms n1,n2,n3,n4",
		"loss 3% n3,n4",
		"isolate n1",
		"partition n4 -> n1,n2,n3",
		"wait_leader n2,n3", // n1 is isolated, n4 cannot be heard
		"heal ",
		"clear n1,n2,n3,n4",
		"wait_leader n1,n2,n3,n4",
	}
	if !reflect.DeepEqual(f.calls, want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(f.calls, "\n"), strings.Join(want, "\n"))
	}
}
