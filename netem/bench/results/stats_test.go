package results_test

import (
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
)

func TestPercentileNearestRank(t *testing.T) {
	seq := func(n int) []int64 {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(n - i) // descending: Percentile must sort
		}
		return v
	}
	for _, tc := range []struct {
		n    int
		p    float64
		want int64
	}{
		{30, 50, 15}, // rank ceil(15) = 15
		{30, 95, 29}, // ceil(28.5) = 29: the second largest
		{30, 99, 30}, // ceil(29.7) = 30: the largest
		{20, 95, 19}, // exactly 19, not rounded up to 20
		{10, 90, 9},
		{100, 99, 99},
		{1, 50, 1},
		{1, 99, 1},
		{4, 25, 1},
		{4, 100, 4},
		{4, 0.1, 1},
	} {
		if got := results.Percentile(seq(tc.n), tc.p); got != tc.want {
			t.Errorf("p%g of 1..%d = %d, want %d", tc.p, tc.n, got, tc.want)
		}
	}
	if got := results.Percentile([]int64{}, 50); got != 0 {
		t.Errorf("p50 of nothing = %d", got)
	}
	if got := results.Percentile([]int64{3, 1}, 0); got != 0 {
		t.Errorf("p0 = %d, want 0 (out of range)", got)
	}
	in := []float64{3, 1, 2}
	results.Percentile(in, 50)
	if in[0] != 3 {
		t.Error("Percentile sorted its argument")
	}
}

func TestDistribution(t *testing.T) {
	d := results.Distribution([]int64{50, 10, 40, 20, 30})
	want := results.Dist{N: 5, MinNS: 10, MeanNS: 30, P50NS: 30, P95NS: 50, P99NS: 50, MaxNS: 50}
	if d != want {
		t.Errorf("Distribution = %+v, want %+v", d, want)
	}
	if d := results.Distribution(nil); d != (results.Dist{}) {
		t.Errorf("Distribution(nil) = %+v", d)
	}
	if m := results.Mean([]int{1, 2, 4}); m != 7.0/3 {
		t.Errorf("Mean = %v", m)
	}
}

func TestSummarize(t *testing.T) {
	det := func(ns int64) *int64 { return &ns }
	runs := []results.Run{
		{Index: 1, OK: true, TimeToLeaderNS: 100, DetectionNS: det(80), Messages: map[string]int{"HALT": 2, "COORDINATOR": 3}},
		{Index: 2, OK: true, TimeToLeaderNS: 300, DetectionNS: det(90), Messages: map[string]int{"HALT": 4, "ELECTION": 5, "COORDINATOR": 3}},
		{Index: 3, FailureKind: results.FailLiveness, Failure: "no leader", Messages: map[string]int{"REJECT": 99}},
		{Index: 4, OK: true, TimeToLeaderNS: 200, Messages: map[string]int{"COORDINATOR": 3}},
		{Index: 5, FailureKind: results.FailLiveness, Failure: "wrong leader"},
		{Index: 6, FailureKind: results.FailSafety, Failure: "two leaders"},
	}
	s := results.Summarize(runs)
	if s.Runs != 6 || s.OK != 3 || s.Failed != 3 {
		t.Errorf("counts %d/%d/%d", s.Runs, s.OK, s.Failed)
	}
	if s.TimeToLeader.P50NS != 200 || s.TimeToLeader.MaxNS != 300 || s.TimeToLeader.N != 3 {
		t.Errorf("time to leader %+v", s.TimeToLeader)
	}
	if s.Detection == nil || s.Detection.N != 2 || s.Detection.MaxNS != 90 {
		t.Errorf("detection %+v: want the two runs that measured it", s.Detection)
	}
	// Failed runs do not count, absent types count as 0.
	if _, ok := s.Messages["REJECT"]; ok {
		t.Error("a failed run's messages were counted")
	}
	if c := s.Messages["ELECTION"]; c.Max != 5 || c.Mean != 5.0/3 {
		t.Errorf("ELECTION %+v", c)
	}
	if c := s.MessagesTotal; c.Max != 12 || c.Mean != (5+12+3)/3.0 {
		t.Errorf("total %+v", c)
	}
	if len(s.Failures) != 2 || s.Failures[0].Kind != results.FailLiveness || len(s.Failures[0].Runs) != 2 ||
		s.Failures[0].Example != "no leader" || s.Failures[1].Kind != results.FailSafety {
		t.Errorf("failures %+v", s.Failures)
	}
}
