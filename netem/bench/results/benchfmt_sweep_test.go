package results_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// TestBenchTextSweepKeys: each point of a sweep is its own benchmark,
// its label a name key, so that benchstat -col /delay or /loss slices
// them.
func TestBenchTextSweepKeys(t *testing.T) {
	var buf bytes.Buffer
	if err := results.WriteBenchText(&buf, resultstest.SweepSample()); err != nil {
		t.Fatal(err)
	}
	bt, err := results.ParseBenchText("bench.txt", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]map[string]int{} // key -> value -> lines
	names := map[string]bool{}
	for _, res := range bt.Results {
		names[res.Name] = true
		base, keys, values := results.NameParts(res.Name)
		if base != "BenchmarkElection" || values["topology"] != "star5" {
			t.Errorf("line %d: %s", res.Line, res.Name)
		}
		switch values["scenario"] {
		case "latency-sweep", "loss":
			k := map[string]string{"latency-sweep": "delay", "loss": "loss"}[values["scenario"]]
			if want := []string{"topology", "scenario", "algorithm", k}; !reflect.DeepEqual(keys, want) {
				t.Errorf("line %d: keys %v, want %v", res.Line, keys, want)
			}
			if byKey[k] == nil {
				byKey[k] = map[string]int{}
			}
			byKey[k][values[k]]++
		case "leader-crash":
			if len(keys) != 3 {
				t.Errorf("line %d: keys %v", res.Line, keys)
			}
		default:
			t.Errorf("line %d: scenario %q", res.Line, values["scenario"])
		}
	}
	// A line per run that passed: none for 50ms, which is a "# failed".
	want := map[string]map[string]int{
		"delay": {"0s": 3, "10ms": 2, "100ms": 2},
		"loss":  {"1": 1, "5": 1, "10": 1, "20": 1},
	}
	if !reflect.DeepEqual(byKey, want) {
		t.Errorf("lines by key %v, want %v", byKey, want)
	}
	for _, n := range []string{
		"BenchmarkElection/topology=star5/scenario=latency-sweep/algorithm=bully/delay=10ms",
		"BenchmarkElection/topology=star5/scenario=loss/algorithm=bully/loss=20",
	} {
		if !names[n] {
			t.Errorf("no line named %s", n)
		}
	}
	failed := 0
	for _, f := range bt.Failed {
		if strings.HasSuffix(f.Name, "/delay=50ms") {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d failed runs of delay=50ms, want 2", failed)
	}
	// benchfmt's own reading agrees (perfParse follows x/perf/benchfmt).
	recs, _ := perfParse(buf.Bytes())
	for _, rec := range recs {
		if rec.err != "" || rec.procs != "" {
			t.Errorf("line %d: %s procs %q", rec.line, rec.err, rec.procs)
		}
	}
}
