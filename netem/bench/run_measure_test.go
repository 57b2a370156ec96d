//go:build linux

package bench

import (
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
)

// TestMeasuredElection picks, of the elections one partition triggered
// (one per side), the one the measured wait_leader's leader won.
func TestMeasuredElection(t *testing.T) {
	t0 := time.Unix(1700000000, 0).UTC()
	partition := capture.Trigger{Kind: "partition", Time: t0}
	rep := &capture.Report{Elections: []capture.Election{
		{N: 1, Trigger: capture.Trigger{Kind: "wire", Time: t0.Add(-time.Minute)}, Start: t0.Add(-time.Minute), End: t0.Add(-time.Minute), Leader: "n5"},
		{N: 2, Trigger: partition, Start: t0.Add(time.Second), End: t0.Add(2 * time.Second), Leader: "n2"},
		{N: 3, Trigger: partition, Start: t0.Add(time.Second), End: t0.Add(2 * time.Second), Leader: "n5"},
		{N: 4, Trigger: capture.Trigger{Kind: "heal", Time: t0.Add(5 * time.Second)}, Start: t0.Add(6 * time.Second), End: t0.Add(7 * time.Second), Leader: "n5"},
	}}
	for _, c := range []struct {
		leader string
		want   int
	}{{"n5", 3}, {"n2", 2}, {"n3", 2}} {
		if e := measuredElection(rep, t0, c.leader); e == nil || e.N != c.want {
			t.Errorf("leader %s: got election %+v, want %d", c.leader, e, c.want)
		}
	}
	if e := measuredElection(rep, t0.Add(3*time.Second), "n5"); e == nil || e.N != 4 {
		t.Errorf("a fault without a triggered election: got %+v, want the next election, 4", e)
	}
}
