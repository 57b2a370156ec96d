package results

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/bullylab/bullylab/capture"
)

// Checks are the safety and liveness checks of one run. Times are
// relative to the run's measured fault.
type Checks struct {
	// LeadersPerEpoch lists, for every epoch someone led, who led it; more
	// than one leader in an epoch is an anomaly that only a partition or
	// lost messages excuse.
	LeadersPerEpoch []EpochLeaders `json:"leaders_per_epoch"`
	// LeaderOverlaps lists the windows in which two or more nodes led at
	// once: leaders apart, or dual leaders (LeaderOverlap).
	LeaderOverlaps []LeaderOverlap `json:"leader_overlaps"`
	// ConvergenceNS is from when the lab had the run's last fault in force
	// to the last election message on the wire before the last
	// wait_leader saw the live nodes it waited for agree on one leader (or
	// to that poll, with no message in between), when that leader is the
	// highest of them; absent when that never happened within the run.
	ConvergenceNS *int64 `json:"convergence_ns,omitempty"`
	// BoundNS is the SLE2 bound the run's convergence was held to: the
	// topology's, or larger when a fault delayed the network; absent when
	// loss was still in force at the end, as SLE2 then bounds nothing.
	BoundNS int64 `json:"sle2_bound_ns,omitempty"`
	// Violations are what failed the run; empty when it passed.
	Violations []Violation `json:"violations,omitempty"`
	// Tenures are the leads the capture shows, LogTenures those the
	// nodes' event logs show (when the run compared them), by start.
	Tenures    []TenureRecord `json:"tenures,omitempty"`
	LogTenures []TenureRecord `json:"log_tenures,omitempty"`
}

// EpochLeaders is who led one epoch.
type EpochLeaders struct {
	Epoch   uint64   `json:"epoch"`
	Leaders []string `json:"leaders"`
}

// LeaderOverlap is a window in which several nodes led at once. Two kinds
// are named apart. Leaders apart: the window lay within disruptions and
// their grace periods: the leaders were cut apart, as each side of a
// partition elects its own, or after the heal had not yet had the time
// SLE2 allows to hear each other; expected. Dual leaders: part of the
// window fell outside every disruption and its grace, when the leaders
// could reach each other both ways; an SLE1 violation. Availability's
// DualLeaderNS times the same kind of pair by the faults in force, the
// grace after a heal included.
type LeaderOverlap struct {
	StartNS int64    `json:"start_ns"`
	EndNS   int64    `json:"end_ns"`
	Leaders []string `json:"leaders"`
	// Dual marks dual leaders; false: leaders apart.
	Dual bool `json:"dual"`
}

// LeadersApart are the overlaps of leaders a disruption kept apart.
func (c Checks) LeadersApart() []LeaderOverlap {
	return slices.DeleteFunc(slices.Clone(c.LeaderOverlaps), func(o LeaderOverlap) bool { return o.Dual })
}

// DualLeaders are the overlaps of leaders that could reach each other.
func (c Checks) DualLeaders() []LeaderOverlap {
	return slices.DeleteFunc(slices.Clone(c.LeaderOverlaps), func(o LeaderOverlap) bool { return !o.Dual })
}

// splitBrainWindow is a LeaderOverlap as results.json had it before
// leader_overlaps: split_brain, connected for dual.
type splitBrainWindow struct {
	StartNS   int64    `json:"start_ns"`
	EndNS     int64    `json:"end_ns"`
	Leaders   []string `json:"leaders"`
	Connected bool     `json:"connected"`
}

// checksJSON is Checks with the split_brain field of results.json v1
// before leader_overlaps, which v1 keeps writing (a v1 reader may count
// on every field it knew) and reads from a file that has nothing newer.
type checksJSON struct {
	checksFields
	SplitBrain []splitBrainWindow `json:"split_brain"`
}

type checksFields Checks

// MarshalJSON writes c with split_brain beside leader_overlaps.
func (c Checks) MarshalJSON() ([]byte, error) {
	v := checksJSON{checksFields: checksFields(c), SplitBrain: []splitBrainWindow{}}
	for _, o := range c.LeaderOverlaps {
		v.SplitBrain = append(v.SplitBrain, splitBrainWindow{StartNS: o.StartNS, EndNS: o.EndNS, Leaders: o.Leaders, Connected: o.Dual})
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads checks, those of a results.json from before
// leader_overlaps too: its split_brain windows, "connected" for dual.
func (c *Checks) UnmarshalJSON(data []byte) error {
	var v checksJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*c = Checks(v.checksFields)
	if c.LeaderOverlaps == nil && v.SplitBrain != nil {
		c.LeaderOverlaps = []LeaderOverlap{}
		for _, w := range v.SplitBrain {
			c.LeaderOverlaps = append(c.LeaderOverlaps, LeaderOverlap{StartNS: w.StartNS, EndNS: w.EndNS, Leaders: w.Leaders, Dual: w.Connected})
		}
	}
	return nil
}

// Violation is a broken property: "safety" (SLE1), "liveness" (SLE2), or
// "tenures" (the nodes' logs and the capture disagree on who led which
// epoch when).
type Violation struct {
	Property string `json:"property"`
	Detail   string `json:"detail"`
}

// Failure returns the failure kind and reason the checks give a run, or
// "", "" when they pass: the first violation, safety before tenures
// before liveness.
func (c Checks) Failure() (kind, reason string) {
	for _, prop := range []struct{ property, kind string }{
		{"safety", FailSafety}, {"tenures", FailTenures}, {"liveness", FailLiveness},
	} {
		for _, v := range c.Violations {
			if v.Property == prop.property {
				return prop.kind, v.Detail
			}
		}
	}
	return "", ""
}

// TenureRecord is a Tenure in results.json, with who followed it.
type TenureRecord struct {
	Node    string `json:"node"`
	Epoch   uint64 `json:"epoch"`
	StartNS int64  `json:"start_ns"`
	EndNS   int64  `json:"end_ns"`
	// NextLeader and NextEpoch are the leader of the next epoch anyone led
	// after this one, by the same source, and that epoch; absent when none
	// did.
	NextLeader string `json:"next_leader,omitempty"`
	NextEpoch  uint64 `json:"next_epoch,omitempty"`
}

// FaultFailure is why the capture says a fault did not do what was asked:
// the first check outside its tolerance, "" when none is.
func FaultFailure(checks []capture.FaultCheck) string {
	for _, c := range checks {
		if !c.OK {
			return fmt.Sprintf("record %d (%s): %s", c.Packet, c.Kind, c.Detail)
		}
	}
	return ""
}
