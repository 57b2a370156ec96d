package bench

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/topologies/fault"
)

var availNodes = []string{"n1", "n2", "n3", "n4", "n5"}

// beliefsFrom builds beliefs from lines of "node follows leader at epoch
// from s": leader "" for none. Every node follows n5 at epoch 1 from 0.
func beliefsFrom() map[string][]belief {
	out := map[string][]belief{}
	for _, n := range availNodes {
		out[n] = []belief{{at: reachAt(0), leader: "n5", epoch: 1}}
	}
	return out
}

// follow has nodes follow leader at epoch from s seconds.
func follow(bs map[string][]belief, s float64, leader string, epoch uint64, nodes ...string) {
	for _, n := range nodes {
		bs[n] = append(bs[n], belief{at: reachAt(s), leader: leader, epoch: epoch})
	}
}

func secs(s float64) int64 { return int64(s * float64(time.Second)) }

func checkRate(t *testing.T, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("leader changes per second %g, want %g", got, want)
	}
}

func judgeAvailability(t *testing.T, bs map[string][]belief, faults []fault.Fault, end float64) availability {
	t.Helper()
	start, holdEnd, ok := disruptionOf(faults, reachAt(end))
	if !ok {
		t.Fatal("no disruption")
	}
	return availabilityOf(availabilityInput{nodes: availNodes, beliefs: bs, net: newConnectivity(faults),
		start: start, end: reachAt(end), holdEnd: holdEnd, origin: faults[0].Time})
}

func checkNear(t *testing.T, what string, got, want int64) {
	t.Helper()
	if d := got - want; d > int64(time.Microsecond) || d < -int64(time.Microsecond) {
		t.Errorf("%s %v, want %v", what, time.Duration(got), time.Duration(want))
	}
}

// A minority with the leader is cut off: each side settles on its own
// leader (converged over the hold), the two leaders, unable to reach each
// other, are no dual leadership until the heal lets them, and the cluster
// is unavailable until everyone follows n5 again after the heal.
func TestAvailabilityPartitionConverged(t *testing.T) {
	bs := beliefsFrom()
	follow(bs, 11, "", 0, "n1", "n2", "n3")
	follow(bs, 12, "n3", 2, "n3")
	follow(bs, 12.01, "n3", 2, "n1", "n2")
	follow(bs, 41, "n5", 3, "n5")
	follow(bs, 41.01, "n5", 3, "n1", "n2", "n3", "n4")
	a := judgeAvailability(t, bs, []fault.Fault{
		{Time: reachAt(10), Kind: fault.Partition, Groups: [][]string{{"n4", "n5"}, {"n1", "n2", "n3"}}},
		{Time: reachAt(40), Kind: fault.Heal},
	}, 50)
	r := a.rec
	if r.Verdict != results.VerdictConverged || r.ConvergedNS == nil {
		t.Fatalf("verdict %s, want converged", r.Verdict)
	}
	checkNear(t, "converged", *r.ConvergedNS, secs(2.01))
	checkNear(t, "unavailable", int64(a.unavailable), secs(31.01))
	checkNear(t, "hold", r.HoldNS, secs(30))
	if a.changes != 2 {
		t.Errorf("leader changes %d, want 2 (n3's epoch 2, n5's epoch 3)", a.changes)
	}
	if !slices.Equal(r.Leaders, []string{"n3", "n5"}) {
		t.Errorf("leaders %v", r.Leaders)
	}
	// From the heal until n3 follows n5, n3 and n5 both lead, connected.
	checkNear(t, "dual leaders", r.DualLeaderNS, secs(1.01))
	checkNear(t, "n1 leaderless", r.LeaderlessNS["n1"], secs(2.01))
	checkNear(t, "n3 leaderless", r.LeaderlessNS["n3"], secs(2))
	checkNear(t, "n4 leaderless", r.LeaderlessNS["n4"], 0)
	checkRate(t, r.LeaderChangesPerS, 1.0/30)
	if len(a.lanes) == 0 {
		t.Fatal("no lanes")
	}
	var n3Lead, n1Cut bool
	for _, l := range a.lanes {
		if l.Node == "n1" && l.Leader == "n5" && l.Epoch == 1 && !l.Unreachable {
			t.Errorf("n1 follows n5 across the partition, reachable: %+v", l)
		}
		n1Cut = n1Cut || l.Node == "n1" && l.Leader == "n5" && l.Unreachable && l.Start.Equal(reachAt(10)) && l.End.Equal(reachAt(11))
		n3Lead = n3Lead || l.Node == "n3" && l.Leader == "n3" && l.Start.Equal(reachAt(12)) && l.End.Equal(reachAt(41.01))
	}
	if !n1Cut {
		t.Errorf("no lane of n1 following n5 unreachable from 10s to 11s: %+v", a.lanes)
	}
	if !n3Lead {
		t.Errorf("no lane of n3 leading from 12s to 41.01s: %+v", a.lanes)
	}
}

// A cut between the leader and n4, who keeps following it without ever
// reaching it: stuck, n4 leaderless for the whole hold.
func TestAvailabilityCutStuck(t *testing.T) {
	a := judgeAvailability(t, beliefsFrom(), []fault.Fault{
		{Time: reachAt(10), Kind: fault.Cut, Links: [][2]string{{"n5", "n4"}}},
		{Time: reachAt(40), Kind: fault.Heal},
	}, 50)
	r := a.rec
	if r.Verdict != results.VerdictStuck || r.ConvergedNS != nil {
		t.Fatalf("verdict %s, want stuck", r.Verdict)
	}
	checkNear(t, "unavailable", int64(a.unavailable), secs(30))
	checkNear(t, "n4 leaderless", r.LeaderlessNS["n4"], secs(30))
	checkNear(t, "n3 leaderless", r.LeaderlessNS["n3"], 0)
	if a.changes != 0 || r.DualLeaderNS != 0 || !slices.Equal(r.Leaders, []string{"n5"}) {
		t.Errorf("changes %d, dual %v, leaders %v: want 0, 0, [n5]", a.changes, r.DualLeaderNS, r.Leaders)
	}
}

// Bully's chained outcome: n4, cut from n5, leads everyone but n5, who
// leads itself alone. Every node has a leader it reaches, but the cut
// leaves the network in one piece, so two leaders in it are not a
// converged cluster: stuck, however quiet, unlike two sides of a partition.
func TestAvailabilityChainedTwoLeadersStuck(t *testing.T) {
	bs := beliefsFrom()
	follow(bs, 10.5, "n4", 2, "n4")
	follow(bs, 10.51, "n4", 2, "n1", "n2", "n3")
	follow(bs, 40.02, "n5", 3, "n5")
	follow(bs, 40.03, "n5", 3, "n1", "n2", "n3", "n4")
	a := judgeAvailability(t, bs, []fault.Fault{
		{Time: reachAt(10), Kind: fault.Cut, Links: [][2]string{{"n5", "n4"}}},
		{Time: reachAt(40), Kind: fault.Heal},
	}, 50)
	r := a.rec
	if r.Verdict != results.VerdictStuck || r.ConvergedNS != nil {
		t.Fatalf("verdict %s, want stuck: n4 and n5 lead one connected network", r.Verdict)
	}
	for _, n := range availNodes {
		if n == "n4" {
			checkNear(t, n+" leaderless", r.LeaderlessNS[n], secs(0.5))
			continue
		}
		if n != "n5" && r.LeaderlessNS[n] > secs(0.51) {
			t.Errorf("%s leaderless %v, want at most 510ms", n, time.Duration(r.LeaderlessNS[n]))
		}
	}
	// Only after the heal, until n4 follows n5, do the two reach each other.
	checkNear(t, "dual leaders", r.DualLeaderNS, secs(0.03))
	checkNear(t, "unavailable", int64(a.unavailable), secs(30.03))
}

// Across a cut between n4 and n5, the two keep taking the lead from each
// other until the heal: flapping. Both leading, cut from each other, is
// not dual leadership; the others, reaching both, follow each in turn.
func TestAvailabilityCutFlapping(t *testing.T) {
	bs := beliefsFrom()
	epoch := uint64(2)
	for s := 12.0; s < 40; s += 3 {
		leader := "n4"
		if epoch%2 == 1 {
			leader = "n5"
		}
		others := []string{"n1", "n2", "n3", "n4", "n5"}
		follow(bs, s, leader, epoch, leader)
		follow(bs, s+0.01, leader, epoch, slices.DeleteFunc(others, func(n string) bool { return n == leader })...)
		epoch++
	}
	a := judgeAvailability(t, bs, []fault.Fault{
		{Time: reachAt(10), Kind: fault.Cut, Links: [][2]string{{"n5", "n4"}}},
		{Time: reachAt(40), Kind: fault.Heal},
	}, 50)
	r := a.rec
	if r.Verdict != results.VerdictFlapping {
		t.Fatalf("verdict %s, want flapping", r.Verdict)
	}
	if a.changes != 10 {
		t.Errorf("leader changes %d, want 10", a.changes)
	}
	checkRate(t, r.LeaderChangesPerS, 10.0/30)
	if r.DualLeaderNS != 0 {
		t.Errorf("dual leaders %v across a cut between them", time.Duration(r.DualLeaderNS))
	}
	if !slices.Equal(r.Leaders, []string{"n4", "n5"}) {
		t.Errorf("leaders %v", r.Leaders)
	}
	// Unavailable until all followed one leader for good: never within
	// the hold, and after it the last leader n4 (epoch 11, from 39.01s)
	// is reached by all once the heal connects n5 to it.
	checkNear(t, "unavailable", int64(a.unavailable), secs(30))
}

// A crash holds nothing: the verdict is over the rest of the run, and the
// crashed node is not leaderless, not running.
func TestAvailabilityCrash(t *testing.T) {
	bs := beliefsFrom()
	follow(bs, 10.5, "", 0, "n1", "n2", "n3", "n4")
	follow(bs, 10.6, "n4", 2, "n4")
	follow(bs, 10.61, "n4", 2, "n1", "n2", "n3")
	a := judgeAvailability(t, bs, []fault.Fault{
		{Time: reachAt(10), Kind: fault.Crash, Nodes: []string{"n5"}},
	}, 20)
	r := a.rec
	if r.Verdict != results.VerdictConverged || r.HoldNS != 0 {
		t.Fatalf("verdict %s, hold %v: want converged without a hold", r.Verdict, r.HoldNS)
	}
	checkNear(t, "converged", *r.ConvergedNS, secs(0.61))
	checkNear(t, "unavailable", int64(a.unavailable), secs(0.61))
	checkNear(t, "n5 leaderless", r.LeaderlessNS["n5"], 0)
	checkNear(t, "n1 leaderless", r.LeaderlessNS["n1"], secs(0.61))
	if a.changes != 1 || !slices.Equal(r.Leaders, []string{"n4"}) {
		t.Errorf("changes %d, leaders %v: want 1, [n4]", a.changes, r.Leaders)
	}
}

// Two nodes that both lead and reach each other are dual leaders for as
// long as that lasts, in a network no fault cut.
func TestAvailabilityDualConnected(t *testing.T) {
	bs := beliefsFrom()
	follow(bs, 10.2, "n4", 2, "n4")
	follow(bs, 10.7, "n5", 1, "n4")
	a := judgeAvailability(t, bs, []fault.Fault{
		{Time: reachAt(10), Kind: fault.Pause, Nodes: []string{"n1"}},
		{Time: reachAt(11), Kind: fault.Resume, Nodes: []string{"n1"}},
	}, 20)
	checkNear(t, "dual leaders", a.rec.DualLeaderNS, secs(0.5))
	// n1 paused is not leaderless; n5's followers were fine throughout.
	checkNear(t, "n1 leaderless", a.rec.LeaderlessNS["n1"], 0)
	if a.changes != 1 {
		t.Errorf("changes %d, want 1 (n4's epoch 2)", a.changes)
	}
}

func TestDisruptionOf(t *testing.T) {
	end := reachAt(100)
	for _, tc := range []struct {
		name        string
		faults      []fault.Fault
		start, hold float64 // hold < 0: none
		ok          bool
	}{
		{"none", nil, 0, -1, false},
		{"campaign only", []fault.Fault{{Time: reachAt(1), Kind: fault.Campaign}}, 0, -1, false},
		{"crash", []fault.Fault{{Time: reachAt(1), Kind: fault.Campaign}, {Time: reachAt(2), Kind: fault.Crash}}, 2, -1, true},
		{"partition healed", []fault.Fault{{Time: reachAt(2), Kind: fault.Partition}, {Time: reachAt(5), Kind: fault.Crash}, {Time: reachAt(9), Kind: fault.Heal}}, 2, 9, true},
		{"cut never healed", []fault.Fault{{Time: reachAt(2), Kind: fault.Cut}}, 2, 100, true},
		{"isolate unisolated", []fault.Fault{{Time: reachAt(2), Kind: fault.Isolate}, {Time: reachAt(4), Kind: fault.Unisolate}}, 2, 4, true},
	} {
		start, hold, ok := disruptionOf(tc.faults, end)
		switch {
		case ok != tc.ok:
			t.Errorf("%s: ok %v", tc.name, ok)
		case !ok:
		case !start.Equal(reachAt(tc.start)):
			t.Errorf("%s: start %v", tc.name, start.Sub(reachT0))
		case tc.hold < 0 && !hold.IsZero(), tc.hold >= 0 && !hold.Equal(reachAt(tc.hold)):
			t.Errorf("%s: hold ends %v", tc.name, hold.Sub(reachT0))
		}
	}
}

// One election won late in the hold, its followers not yet caught up at
// the heal, is a change, not changes going on: stuck, not flapping.
func TestAvailabilityLoneLateChange(t *testing.T) {
	bs := beliefsFrom()
	follow(bs, 10.1, "", 0, "n1", "n2", "n3", "n4")
	follow(bs, 39, "n4", 2, "n4")
	a := judgeAvailability(t, bs, []fault.Fault{
		{Time: reachAt(10), Kind: fault.Partition, Groups: [][]string{{"n5"}, {"n1", "n2", "n3", "n4"}}, OneWay: true},
		{Time: reachAt(40), Kind: fault.Heal},
	}, 50)
	if a.rec.Verdict != results.VerdictStuck || a.changes != 1 {
		t.Errorf("verdict %s with %d changes, want stuck with 1", a.rec.Verdict, a.changes)
	}
	checkNear(t, "unavailable", int64(a.unavailable), secs(40))
}
