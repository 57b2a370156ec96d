package results_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// TestChecksReadOldOverlaps: a results.json from before leader_overlaps
// names its windows split_brain, "connected" for dual leaders; they read
// as leader overlaps, and a new file's leader_overlaps as they are.
func TestChecksReadOldOverlaps(t *testing.T) {
	var old results.Checks
	if err := json.Unmarshal([]byte(`{"leaders_per_epoch":[],"split_brain":[
		{"start_ns":1,"end_ns":2,"leaders":["n4","n5"],"connected":false},
		{"start_ns":3,"end_ns":4,"leaders":["n3","n5"],"connected":true}]}`), &old); err != nil {
		t.Fatal(err)
	}
	want := []results.LeaderOverlap{{StartNS: 1, EndNS: 2, Leaders: []string{"n4", "n5"}}, {StartNS: 3, EndNS: 4, Leaders: []string{"n3", "n5"}, Dual: true}}
	if !reflect.DeepEqual(old.LeaderOverlaps, want) {
		t.Errorf("old split_brain read as %+v, want %+v", old.LeaderOverlaps, want)
	}
	if len(old.LeadersApart()) != 1 || len(old.DualLeaders()) != 1 || !old.DualLeaders()[0].Dual {
		t.Errorf("apart %+v, dual %+v", old.LeadersApart(), old.DualLeaders())
	}
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	var again results.Checks
	if err := json.Unmarshal(data, &again); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.LeaderOverlaps, want) {
		t.Errorf("round trip %s read as %+v", data, again.LeaderOverlaps)
	}
}
