//go:build linux

package bench_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results"
)

const ms = time.Millisecond

func dur(d time.Duration) *time.Duration { return &d }

func TestCheckCleanFailover(t *testing.T) {
	// n16 led epoch 1 until it crashed at 0; n15 took epoch 2 at 580ms.
	c := bench.Check(bench.CheckInput{
		Tenures: []bench.Tenure{
			{Node: "n16", Epoch: 1, Start: -10 * time.Second, End: 0},
			{Node: "n15", Epoch: 2, Start: 580 * ms, End: 5 * time.Second},
		},
		Convergence: dur(580 * ms), Bound: 1300 * ms,
	})
	want := []results.EpochLeaders{{Epoch: 1, Leaders: []string{"n16"}}, {Epoch: 2, Leaders: []string{"n15"}}}
	if !reflect.DeepEqual(c.LeadersPerEpoch, want) {
		t.Errorf("leaders per epoch %+v", c.LeadersPerEpoch)
	}
	if len(c.LeaderOverlaps) != 0 || len(c.Violations) != 0 {
		t.Errorf("overlaps %+v, violations %+v", c.LeaderOverlaps, c.Violations)
	}
	if c.ConvergenceNS == nil || *c.ConvergenceNS != int64(580*ms) {
		t.Errorf("convergence %v", c.ConvergenceNS)
	}
	if kind, _ := c.Failure(); kind != "" {
		t.Errorf("a clean failover fails with %q", kind)
	}
}

func TestCheckLeaderOverlaps(t *testing.T) {
	partition := bench.Disruption{Start: 0, End: 2 * time.Second, What: "partition"}
	tenures := []bench.Tenure{
		{Node: "n16", Epoch: 1, Start: -time.Second, End: 2200 * ms}, // kept its side
		{Node: "n9", Epoch: 2, Start: 600 * ms, End: 2100 * ms},      // the majority's leader
		{Node: "n16", Epoch: 3, Start: 2200 * ms, End: 6 * time.Second},
	}
	// Within the partition and its grace period: leaders apart, excused.
	c := bench.Check(bench.CheckInput{Tenures: tenures, Disruptions: []bench.Disruption{partition},
		Grace: 1300 * ms, Convergence: dur(200 * ms), Bound: 1300 * ms})
	want := []results.LeaderOverlap{{StartNS: int64(600 * ms), EndNS: int64(2100 * ms), Leaders: []string{"n16", "n9"}}}
	if !reflect.DeepEqual(c.LeaderOverlaps, want) {
		t.Errorf("overlaps %+v, want %+v", c.LeaderOverlaps, want)
	}
	if len(c.Violations) != 0 {
		t.Errorf("violations %+v", c.Violations)
	}

	// Without the partition the same tenures break SLE1.
	c = bench.Check(bench.CheckInput{Tenures: tenures, Grace: 1300 * ms, Convergence: dur(200 * ms), Bound: 1300 * ms})
	if len(c.LeaderOverlaps) != 1 || !c.LeaderOverlaps[0].Dual {
		t.Fatalf("overlaps %+v, want one of dual leaders", c.LeaderOverlaps)
	}
	kind, reason := c.Failure()
	if kind != results.FailSafety || reason != "dual leaders: n16 and n9 led at once for 1.5s from +600ms with the network connected" {
		t.Errorf("failure %q %q", kind, reason)
	}

	// A window that outlasts the grace period is not excused either.
	c = bench.Check(bench.CheckInput{Tenures: tenures, Disruptions: []bench.Disruption{{Start: 0, End: 500 * ms}},
		Grace: 200 * ms, Convergence: dur(200 * ms)})
	if len(c.LeaderOverlaps) != 1 || !c.LeaderOverlaps[0].Dual {
		t.Errorf("overlaps %+v: 600ms..2.1s is past 500ms+200ms", c.LeaderOverlaps)
	}
}

func TestCheckSharedEpoch(t *testing.T) {
	tenures := []bench.Tenure{
		{Node: "n5", Epoch: 4, Start: 0, End: 100 * ms},
		{Node: "n4", Epoch: 4, Start: 300 * ms, End: time.Second},
	}
	c := bench.Check(bench.CheckInput{Tenures: tenures, Convergence: dur(0)})
	if len(c.LeaderOverlaps) != 0 {
		t.Errorf("tenures do not overlap, got overlaps %+v", c.LeaderOverlaps)
	}
	kind, reason := c.Failure()
	if kind != results.FailSafety || !strings.HasPrefix(reason, "epoch 4 led by n5 at +0s and by n4 at +300ms") {
		t.Errorf("failure %q %q", kind, reason)
	}
	c = bench.Check(bench.CheckInput{Tenures: tenures, Convergence: dur(0),
		Disruptions: []bench.Disruption{{Start: 200 * ms, End: 250 * ms, What: "loss"}}, Grace: 100 * ms})
	if kind, _ := c.Failure(); kind != "" {
		t.Errorf("shared epoch after loss: %q, want excused", kind)
	}
	// A handover at one instant is not two leaders.
	c = bench.Check(bench.CheckInput{Tenures: []bench.Tenure{
		{Node: "a", Epoch: 1, Start: 0, End: 100 * ms}, {Node: "b", Epoch: 2, Start: 100 * ms, End: 200 * ms},
	}, Convergence: dur(0)})
	if len(c.LeaderOverlaps) != 0 {
		t.Errorf("handover counted as an overlap: %+v", c.LeaderOverlaps)
	}
}

func TestCheckLiveness(t *testing.T) {
	c := bench.Check(bench.CheckInput{Convergence: nil, Bound: time.Second})
	if kind, reason := c.Failure(); kind != results.FailLiveness || !strings.Contains(reason, "never agreed") {
		t.Errorf("no convergence: %q %q", kind, reason)
	}
	c = bench.Check(bench.CheckInput{Convergence: dur(1500 * ms), Bound: time.Second})
	if kind, reason := c.Failure(); kind != results.FailLiveness || !strings.Contains(reason, "1.5s after the last fault, beyond the SLE2 bound of 1s") {
		t.Errorf("slow convergence: %q %q", kind, reason)
	}
	// Safety comes first.
	c = bench.Check(bench.CheckInput{Tenures: []bench.Tenure{
		{Node: "a", Epoch: 1, Start: 0, End: 100 * ms}, {Node: "b", Epoch: 2, Start: 50 * ms, End: 200 * ms},
	}})
	if kind, _ := c.Failure(); kind != results.FailSafety {
		t.Errorf("safety and liveness broken: %q, want safety", kind)
	}
}
