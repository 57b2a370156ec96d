package bench

import (
	"reflect"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/fault"
)

// TestCutSpans: a crash or a leave ends a lead begun before it, a pause
// suspends one until the resume, or for good without one, and faults of
// other nodes leave it be.
func TestCutSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f := func(s int, k fault.Kind, nodes ...string) fault.Fault {
		return fault.Fault{Time: at(s), Kind: k, Nodes: nodes}
	}
	sp := span{"n5", 1, at(0), at(10)}
	for _, c := range []struct {
		name   string
		faults []fault.Fault
		want   []span
	}{
		{"none", nil, []span{sp}},
		{"crash", []fault.Fault{f(4, fault.Crash, "n5")}, []span{{"n5", 1, at(0), at(4)}}},
		{"crash before", []fault.Fault{f(-1, fault.Crash, "n5")}, []span{sp}},
		{"leave", []fault.Fault{f(4, fault.Leave, "n4", "n5")}, []span{{"n5", 1, at(0), at(4)}}},
		{"other node", []fault.Fault{f(4, fault.Crash, "n4"), f(5, fault.Pause, "n3")}, []span{sp}},
		{"pause", []fault.Fault{f(2, fault.Pause, "n5"), f(6, fault.Resume, "n1", "n5")},
			[]span{{"n5", 1, at(0), at(2)}, {"n5", 1, at(6), at(10)}}},
		{"pause for good", []fault.Fault{f(2, fault.Pause, "n5")}, []span{{"n5", 1, at(0), at(2)}}},
		{"paused then killed", []fault.Fault{f(2, fault.Pause, "n5"), f(3, fault.Crash, "n5"), f(4, fault.Resume, "n5")},
			[]span{{"n5", 1, at(0), at(2)}}},
		{"isolated", []fault.Fault{f(2, fault.Isolate, "n5")}, []span{sp}},
	} {
		if got := cutSpans([]span{sp}, c.faults); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
