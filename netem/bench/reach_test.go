package bench

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

var reachT0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func reachAt(s float64) time.Time { return reachT0.Add(time.Duration(s * float64(time.Second))) }

// reachCase expects from's sends to reach to, or not, at a time.
type reachCase struct {
	t        float64
	from, to string
	want     bool
}

func checkReach(t *testing.T, c *connectivity, cases []reachCase) {
	t.Helper()
	for _, rc := range cases {
		if got := c.sends(rc.from, rc.to, reachAt(rc.t)); got != rc.want {
			t.Errorf("at %gs %s -> %s: %v, want %v", rc.t, rc.from, rc.to, got, rc.want)
		}
	}
}

func TestConnectivityPartition(t *testing.T) {
	c := newConnectivity([]fault.Fault{
		{Time: reachAt(1), Kind: fault.Partition, Groups: [][]string{{"n1", "n2"}, {"n3"}}},
		{Time: reachAt(2), Kind: fault.Partition, Groups: [][]string{{"n3"}, {"n1"}}, OneWay: true},
		{Time: reachAt(3), Kind: fault.Heal},
	})
	checkReach(t, c, []reachCase{
		{0.5, "n1", "n3", true},
		{1, "n1", "n3", false}, // from the record's time on
		{1.5, "n3", "n1", false},
		{1.5, "n1", "n2", true},
		{1.5, "n4", "n3", true}, // in no group: reaches everyone
		// The one-way partition replaced the first.
		{2.5, "n3", "n1", false},
		{2.5, "n1", "n3", true},
		{2.5, "n2", "n3", true},
		{3.5, "n3", "n1", true},
	})
	if got := c.changes(); len(got) != 3 || !got[0].Equal(reachAt(1)) {
		t.Errorf("changes %v", got)
	}
	if c.connected("n1", "n3", reachAt(2.5)) {
		t.Error("a one-way partition left n1 and n3 connected both ways")
	}
}

func TestConnectivityCut(t *testing.T) {
	c := newConnectivity([]fault.Fault{
		{Time: reachAt(1), Kind: fault.Cut, Links: [][2]string{{"n5", "n4"}, {"n1", "n2"}}},
		{Time: reachAt(2), Kind: fault.Cut, Links: [][2]string{{"n5", "n4"}}, OneWay: true},
		{Time: reachAt(3), Kind: fault.Heal},
	})
	checkReach(t, c, []reachCase{
		{1.5, "n5", "n4", false},
		{1.5, "n4", "n5", false},
		{1.5, "n2", "n1", false},
		{1.5, "n5", "n3", true}, // every other link stays up
		{1.5, "n3", "n4", true},
		{2.5, "n5", "n4", false},
		{2.5, "n4", "n5", true}, // one way: only what the first sends
		{2.5, "n1", "n2", true}, // the new cut replaced the old
		{3.5, "n5", "n4", true},
	})
}

func TestConnectivityIsolationAndProcesses(t *testing.T) {
	c := newConnectivity([]fault.Fault{
		{Time: reachAt(1), Kind: fault.Isolate, Nodes: []string{"n1", "n2"}},
		{Time: reachAt(2), Kind: fault.Unisolate, Nodes: []string{"n1"}},
		{Time: reachAt(3), Kind: fault.Crash, Nodes: []string{"n3"}},
		{Time: reachAt(4), Kind: fault.Pause, Nodes: []string{"n4"}},
		{Time: reachAt(4.5), Kind: fault.Delay, Nodes: []string{"n5"}, Impair: &fault.Impairment{Delay: time.Second}},
		{Time: reachAt(5), Kind: fault.Restart, Nodes: []string{"n3"}},
		{Time: reachAt(6), Kind: fault.Resume, Nodes: []string{"n4"}},
		{Time: reachAt(7), Kind: fault.Leave, Nodes: []string{"n5"}},
		{Time: reachAt(8), Kind: fault.Join, Nodes: []string{"n5"}},
	})
	checkReach(t, c, []reachCase{
		{1.5, "n1", "n3", false},
		{1.5, "n1", "n2", false}, // isolated from each other too
		{2.5, "n1", "n3", true},
		{2.5, "n2", "n3", false},
		{3.5, "n1", "n3", false}, // crashed
		{3.5, "n3", "n3", false}, // not even itself
		{4.5, "n4", "n1", false}, // paused
		{4.7, "n5", "n1", true},  // a delay leaves the link up
		{5.5, "n3", "n1", true},
		{6.5, "n4", "n1", true},
		{7.5, "n5", "n1", false},
		{8.5, "n5", "n1", true},
		{8.5, "n2", "n1", false}, // still isolated: only a heal or unisolate ends it
	})
	if c.runs("n3", reachAt(4)) || !c.runs("n3", reachAt(5)) || c.runs("n4", reachAt(5)) {
		t.Error("runs does not follow the crash, restart and pause")
	}
}
