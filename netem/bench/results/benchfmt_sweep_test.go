package results_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// sweepScenario is a scenario of runs that pass with times to leader of
// ms milliseconds and msgs election messages, and fail runs that fail.
func sweepScenario(name string, labels map[string]string, fail int, ms ...float64) results.ScenarioResult {
	sc := results.ScenarioResult{Name: name, Labels: labels}
	for i, v := range ms {
		sc.Runs = append(sc.Runs, results.Run{Index: len(sc.Runs) + 1, OK: true, TimeToLeaderNS: int64(v * 1e6),
			Messages: map[string]int{"ELECTION": 4 + i, "COORDINATOR": 4}})
	}
	for range fail {
		sc.Runs = append(sc.Runs, results.Run{Index: len(sc.Runs) + 1, FailureKind: results.FailLiveness, Failure: "no leader"})
	}
	sc.Summary = results.Summarize(sc.Runs)
	return sc
}

func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func sweepResults() *results.Results {
	r := sampleResults(3)
	r.Topology.Name, r.Topology.Nodes = "star5", 5
	r.Scenarios = []results.ScenarioResult{
		sweepScenario("leader-crash", nil, 0, 700, 710),
		sweepScenario("latency-sweep", lbl("delay", "0s"), 0, 700, 720, 750),
		sweepScenario("latency-sweep", lbl("delay", "10ms"), 0, 760, 790),
		sweepScenario("latency-sweep", lbl("delay", "50ms"), 2),
		sweepScenario("latency-sweep", lbl("delay", "100ms"), 1, 1100, 1300),
		sweepScenario("loss", lbl("loss", "1"), 0, 720),
		sweepScenario("loss", lbl("loss", "5"), 0, 730),
		sweepScenario("loss", lbl("loss", "10"), 0, 790),
		sweepScenario("loss", lbl("loss", "20"), 0, 900),
	}
	return r
}

// TestBenchTextSweepKeys: each point of a sweep is its own benchmark,
// its label a name key, so that benchstat -col /delay or /loss slices
// them.
func TestBenchTextSweepKeys(t *testing.T) {
	var buf bytes.Buffer
	if err := results.WriteBenchText(&buf, sweepResults()); err != nil {
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
			if want := []string{"topology", "scenario", k}; !reflect.DeepEqual(keys, want) {
				t.Errorf("line %d: keys %v, want %v", res.Line, keys, want)
			}
			if byKey[k] == nil {
				byKey[k] = map[string]int{}
			}
			byKey[k][values[k]]++
		case "leader-crash":
			if len(keys) != 2 {
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
		"BenchmarkElection/topology=star5/scenario=latency-sweep/delay=10ms",
		"BenchmarkElection/topology=star5/scenario=loss/loss=20",
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
