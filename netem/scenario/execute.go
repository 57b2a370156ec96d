package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// Target is what Execute drives: a lab behind an adapter, or a fake in
// tests. Node names are the topology's; node lists are lowest ID first.
type Target interface {
	// Apply applies one fault (see fault.Fault for what each kind takes)
	// to all its nodes at once, one fault record in the capture, and
	// returns once it is in force. Restart starts nodes that are down, the
	// first start included; partition groups cover every node and replace
	// any partition in force; cut severs its Links, node pairs, adding to
	// the cuts in force; partition, isolate and cut sever as their Mode
	// says; clock sets the wall clock its nodes read; heal removes the
	// partition and the cuts and reconnects isolated nodes; delay and
	// loss set Impair's delay and jitter, or its
	// loss, on what the nodes send, keeping the rest; clear restores the
	// topology's impairments of the nodes; leave has the nodes announce
	// LEAVE and exit, and join starts nodes that left, which announce
	// themselves with JOIN (a restarted node that left always does).
	Apply(ctx context.Context, f fault.Fault) error

	// Status returns the testbed's view now.
	Status(ctx context.Context) (View, error)
	// WaitLeader waits until every one of nodes that is live is Normal
	// under one leader at one epoch, and returns the view then. On timeout
	// it returns an error wrapping ErrNoLeader.
	WaitLeader(ctx context.Context, nodes []string, timeout time.Duration) (View, error)
	// WaitElection waits until some live node is in an election (electing,
	// halting or waiting for a COORDINATOR) and returns the view then. On
	// timeout it returns an error wrapping ErrNoElection.
	WaitElection(ctx context.Context, timeout time.Duration) (View, error)
}

var (
	// ErrNoLeader is wrapped by WaitLeader errors on timeout: a liveness
	// failure when the network was connected.
	ErrNoLeader = errors.New("no leader agreed")
	// ErrNoElection is wrapped by WaitElection errors on timeout.
	ErrNoElection = errors.New("no election started")
	// ErrUnexpectedLeader is wrapped when wait_leader expects the highest
	// live node and the nodes agreed on another.
	ErrUnexpectedLeader = errors.New("unexpected leader")
)

// StepEvent reports one executed step.
type StepEvent struct {
	Index  int    // in Scenario.Steps
	Action Action // the step resolved; zero Kind when resolving failed
	// Start is when the Target was first called for the step, End when the
	// step was over; the capture's fault records time faults more exactly.
	Start, End time.Time
	// View is what a wait step returned: for wait_leader, the leader the
	// nodes agreed on.
	View View
	Err  error
}

// StepError is the error of a failed step.
type StepError struct {
	Step int
	Kind StepKind
	Err  error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("step %d (%s): %v", e.Step+1, e.Kind, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Execute runs sc against t. Each step is resolved just before it runs,
// against the view the step before returned (a wait step's) or else a
// fresh Status, with the generator Resolve would give it: the same seed
// and the same views give the same actions. observe, when not nil, sees
// every step, the failed one included. Execute stops at the first failed
// step and returns its *StepError.
//
// The view of a wait step is reused because a Status round costs time the
// next step may not have: crash-during-election strikes right after
// wait_election saw the election start.
func Execute(ctx context.Context, sc *Scenario, t Target, rng *rand.Rand, observe func(StepEvent)) error {
	if err := sc.Validate(); err != nil {
		return err
	}
	if observe == nil {
		observe = func(StepEvent) {}
	}
	r := newResolver(sc, rng)
	net := newNetwork()
	var fresh *View
	for i, st := range sc.Steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		fail := func(a Action, start time.Time, v *View, err error) error {
			ev := StepEvent{Index: i, Action: a, Start: start, End: time.Now(), Err: err}
			if v != nil {
				ev.View = *v
			}
			observe(ev)
			return &StepError{Step: i, Kind: st.Kind, Err: err}
		}
		var view View
		switch st.Kind {
		case StepWait, StepWaitElection:
		default:
			if fresh != nil {
				view = *fresh
			} else {
				v, err := t.Status(ctx)
				if err != nil {
					return fail(Action{}, time.Now(), nil, fmt.Errorf("status: %w", err))
				}
				view = v
			}
		}
		fresh = nil
		a, err := r.step(i, &view, net)
		if err != nil {
			return fail(Action{}, time.Now(), nil, err)
		}
		start := time.Now()
		got, err := perform(ctx, t, a)
		if err != nil {
			return fail(a, start, got, err)
		}
		net.apply(a)
		ev := StepEvent{Index: i, Action: a, Start: start, End: time.Now()}
		if got != nil {
			ev.View = *got
			fresh = got
		}
		observe(ev)
	}
	return nil
}

// perform asks t to carry out a; wait steps return the view they ended with.
func perform(ctx context.Context, t Target, a Action) (*View, error) {
	switch a.Kind {
	case StepWait:
		timer := time.NewTimer(a.Duration)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		}
	case StepWaitElection:
		v, err := t.WaitElection(ctx, a.Timeout)
		if err != nil {
			return nil, err
		}
		return &v, nil
	case StepWaitLeader:
		v, err := t.WaitLeader(ctx, a.Nodes, a.Timeout)
		if err != nil {
			return nil, err
		}
		if a.Expect == ExpectHighestLive && len(a.Nodes) > 0 {
			// Nodes were live when the step began; the highest of those
			// still live must lead.
			want := ""
			for _, x := range a.Nodes {
				if st, _ := v.status(x); st == StatusLive {
					want = x
				}
			}
			if v.Leader != want {
				return &v, fmt.Errorf("%w: %s leads epoch %d, want %s, the highest live node waited for", ErrUnexpectedLeader, orNone(v.Leader), v.Epoch, orNone(want))
			}
		}
		return &v, nil
	case StepHeal:
		if a.Healed {
			if err := t.Apply(ctx, fault.Fault{Kind: fault.Heal}); err != nil {
				return nil, fmt.Errorf("heal: %w", err)
			}
		}
		if len(a.Cleared) > 0 {
			if err := t.Apply(ctx, fault.Fault{Kind: fault.Clear, Nodes: a.Cleared}); err != nil {
				return nil, fmt.Errorf("clear: %w", err)
			}
		}
		return nil, nil
	}

	if err := t.Apply(ctx, a.fault()); err != nil {
		return nil, fmt.Errorf("%s: %w", a.Fault, err)
	}
	return nil, nil
}

func orNone(s string) string {
	if s == "" {
		return "no node"
	}
	return s
}
