package results_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
	"github.com/bullylab/bullylab/topologies"
)

func TestDiffersLine(t *testing.T) {
	set := func(r *results.Results, name string, v, was time.Duration) {
		r.Topology.Overrides = append(r.Topology.Overrides, results.OverridesOf([]topologies.SettingOverride{{Name: name, Value: v, Was: was}})...)
	}
	a, b := resultstest.Sample(1), resultstest.Sample(1)
	if got := results.DiffersLine("a", a, "b", b); got != "" {
		t.Errorf("alike benches: %q, want none", got)
	}
	a.Topology.Settings.FailureTimeoutNS = int64(500 * time.Millisecond)
	b.Topology.Settings.FailureTimeoutNS = int64(600 * time.Millisecond)
	set(b, "failure_timeout", 600*time.Millisecond, 500*time.Millisecond)
	if got, want := results.DiffersLine("a", a, "b", b), "b differs: failure_timeout 500ms -> 600ms (--set)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	c, err := results.Compare("a", a, "b", b, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(c.Notes, "\n"), "b differs: failure_timeout 500ms -> 600ms (--set)"); n != 1 {
		t.Errorf("the line is among the notes %d times, want once:\n%s", n, strings.Join(c.Notes, "\n"))
	}

	b.Topology.Name = "star16-slow"
	b.Topology.Settings.HeartbeatNS += int64(10 * time.Millisecond)
	want := "b differs: topology star16 -> star16-slow, heartbeat 100ms -> 110ms (topology), failure_timeout 500ms -> 600ms (--set)"
	if got := results.DiffersLine("a", a, "b", b); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	_, err = results.Compare("a", a, "b", b, results.CompareOptions{MaxRegress: 0.1})
	var ue *results.UnusableError
	if !errors.As(err, &ue) || !strings.HasSuffix(err.Error(), "; "+want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("topologies differ: %v, want an UnusableError ending in the line", err)
	}
}

func TestOverridesRecorded(t *testing.T) {
	r := resultstest.Sample(1)
	r.Topology.Overrides = results.OverridesOf([]topologies.SettingOverride{{Name: "failure_timeout", Value: 600 * time.Millisecond, Was: 500 * time.Millisecond}})
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"overrides": [
      {
        "name": "failure_timeout",
        "value_ns": 600000000,
        "topology_ns": 500000000
      }
    ]`) {
		t.Errorf("results.json lacks the override:\n%s", b.String()[:min(b.Len(), 1500)])
	}
	back, err := results.DecodeResults("r.json", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Topology.Overrides) != 1 || back.Topology.Overrides[0] != r.Topology.Overrides[0] {
		t.Errorf("read back %+v", back.Topology.Overrides)
	}
	if got, want := results.OverridesText(back.Topology.Overrides), "failure_timeout 600ms (topology: 500ms) by --set"; got != want {
		t.Errorf("OverridesText = %q, want %q", got, want)
	}
	var sum strings.Builder
	if err := results.WriteSummary(&sum, back, results.SummaryOptions{Width: -1}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sum.String(), "timings: failure_timeout 600ms (topology: 500ms) by --set") {
		t.Errorf("summary lacks the overrides:\n%s", sum.String())
	}
}
