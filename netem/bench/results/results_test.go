package results_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
)

func TestResultsRoundTrip(t *testing.T) {
	r := resultstest.Sample(1)
	path := filepath.Join(t.TempDir(), "results.json")
	if err := r.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := results.ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	// JSON keeps times to the nanosecond but drops the monotonic clock and
	// location; compare through JSON.
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		t.Error("results changed in a write and read")
	}
	if back.Schema != results.Schema {
		t.Errorf("schema %q", back.Schema)
	}
}

// The documented field names are the ones written.
func TestResultsFieldNames(t *testing.T) {
	var buf bytes.Buffer
	if err := resultstest.Sample(1).Write(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, field := range []string{`"schema": "bullylab.bench/v1"`, `"tool"`, `"go_version"`, `"host"`, `"kernel"`, `"cores"`,
		`"topology"`, `"heartbeat_ns"`, `"seed"`, `"settings"`, `"sle2_bound_ns"`, `"scenarios"`, `"runs"`, `"index"`,
		`"ok"`, `"failure_kind": "liveness"`, `"time_to_leader_ns"`, `"detection_ns"`, `"messages"`, `"counters"`,
		`"capture"`, `"schedule"`, `"checks"`, `"leaders_per_epoch"`, `"leader_overlaps"`, `"convergence_ns"`,
		`"summary"`, `"p50_ns"`, `"p95_ns"`, `"p99_ns"`, `"max_ns"`, `"messages_total"`, `"failures"`} {
		if !strings.Contains(out, field) {
			t.Errorf("results.json lacks %s", field)
		}
	}
}

func TestDecodeResultsErrors(t *testing.T) {
	good := func() string {
		var buf bytes.Buffer
		resultstest.Sample(1).Write(&buf)
		return buf.String()
	}()
	for _, tc := range []struct{ in, want string }{
		{"", "r.json:1: unexpected end of JSON input"},
		{"[]", "r.json:1: want struct"},
		{`{"tool": {}}`, "r.json: schema: missing (not a bullylab results.json?)"},
		{`{"schema": "bullylab.bench/v2"}`, `r.json: schema: "bullylab.bench/v2" is not bullylab.bench/v1 (written by another bullylab version)`},
		{`{"schema": "other"}`, `r.json: schema: "other" is not bullylab.bench/v1`},
		{strings.Replace(good, `"seed": 1,`, `"seed": "one",`, 1), `r.json:27: seed: want int64, got JSON string`},
		{strings.Replace(good, `"nodes": 16`, `"nodes": -1`, 1), "r.json: topology.nodes: negative"},
		{strings.Replace(good, `"index": 2,`, `"index": 1,`, 1), "r.json: scenarios[0].runs[1].index: run 1 is listed twice"},
		{strings.Replace(good, `"failure_kind": "liveness",`, ``, 1), "r.json: scenarios[0].runs[6].failure_kind: missing for a failed run"},
		{strings.Replace(good, `"scenarios": [`, `"scenarios": [], "x": [`, 1), "r.json: scenarios: no scenario"},
		{good[:len(good)/2], "r.json:"},
	} {
		_, err := results.DecodeResults("r.json", []byte(tc.in))
		if err == nil {
			t.Errorf("%.40q: decoded, want %q", tc.in, tc.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%.40q:\n got %v\nwant %s", tc.in, err, tc.want)
		}
		if strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
	// Fields a later v1 adds are ignored.
	added := strings.Replace(good, `"seed": 1,`, `"seed": 1, "future_field": {"x": [1]},`, 1)
	if _, err := results.DecodeResults("r.json", []byte(added)); err != nil {
		t.Errorf("unknown field: %v", err)
	}
}

func TestTopologyOf(t *testing.T) {
	topo, err := topologies.Parse("t.yaml", []byte("name: t\nnodes:\n  - a\n  - {name: b, heartbeat: 50ms}\n  - c\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := results.TopologyOf(topo)
	want := results.TopologyInfo{Name: "t", Source: "t.yaml", Nodes: 3,
		Settings:     results.Timing{HeartbeatNS: 100e6, FailureTimeoutNS: 500e6, ElectionTimeoutNS: 200e6, DetectionStaggerNS: 50e6},
		NodeSettings: map[string]results.Timing{"b": {HeartbeatNS: 50e6, FailureTimeoutNS: 500e6, ElectionTimeoutNS: 200e6, DetectionStaggerNS: 50e6}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TopologyOf = %+v\nwant %+v", got, want)
	}
}

func TestResultOf(t *testing.T) {
	scs, err := scenario.Builtin("cascade", scenario.Params{K: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := results.ResultOf(scs[0], "bully")
	if err != nil {
		t.Fatal(err)
	}
	if res.Key() != "cascade k=2" || res.Source != "built-in cascade" {
		t.Errorf("key %q source %q", res.Key(), res.Source)
	}
	// The definition parses back to the scenario that ran.
	back, err := scenario.Parse("definition", []byte(res.Definition))
	if err != nil {
		t.Fatalf("definition does not parse: %v\n%s", err, res.Definition)
	}
	if back.Key() != "cascade k=2" || len(back.Steps) != len(scs[0].Steps) {
		t.Errorf("definition is another scenario:\n%s", res.Definition)
	}
}

// TestLongValuesInErrors: an error quoting a value of results.json or
// bench.txt shows its start and its length, not all of it.
func TestLongValuesInErrors(t *testing.T) {
	long := strings.Repeat("x", 1<<19) // bench.txt lines end at 1 MiB
	digits := strings.Repeat("9", 1<<20)
	encode := func(r *results.Results) string {
		var buf bytes.Buffer
		r.Write(&buf)
		return buf.String()
	}
	good := encode(resultstest.Sample(1))
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		if msg := err.Error(); len(msg) > 400 || strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, "bytes)") {
			t.Errorf("%s: error of %d bytes: %.500s", what, len(msg), msg)
		}
	}
	twice := resultstest.Sample(1)
	twice.Scenarios[0].Name = long
	twice.Scenarios[1] = twice.Scenarios[0]
	for what, in := range map[string]string{
		"schema":       `{"schema": "` + long + `"}`,
		"number":       strings.Replace(good, `"seed": 1,`, `"seed": 1`+digits+`,`, 1),
		"message type": strings.Replace(good, `"HALT": 14`, `"`+long+`": -1`, 1),
		"scenario key": encode(twice),
	} {
		_, err := results.DecodeResults("r.json", []byte(in))
		check(what, err)
	}
	for what, in := range map[string]string{
		"iterations":    "BenchmarkElection/topology=t/scenario=s " + long + " 5 ns/op\n",
		"value":         "BenchmarkElection/topology=t/scenario=s 1 " + long + " ns/op\n",
		"unit metadata": "Unit ns/op " + long + "\n",
		"no topology":   "BenchmarkElection/" + long + " 1 5 ns/op\n",
		"topology":      "BenchmarkElection/topology=t/scenario=s 1 5 ns/op\nBenchmarkElection/topology=" + long + "/scenario=s 1 5 ns/op\n",
	} {
		bt, err := results.ParseBenchText("b.txt", []byte(in))
		if err == nil {
			_, err = results.ResultsFromBenchText("b.txt", bt)
		}
		check(what, err)
	}
	_, err := results.ParseThreshold(long)
	check("--max-regress", err)

	// compare names topologies and scenarios from the files.
	base, other := resultstest.Sample(1), resultstest.Sample(1)
	other.Topology.Name = long
	_, err = results.Compare("a", base, "b", other, results.CompareOptions{MaxRegress: 0.1})
	check("topology", err)
	other = resultstest.Sample(1)
	sc := other.Scenarios[0]
	other.Scenarios = nil
	for i := range 1000 {
		sc.Name = fmt.Sprintf("s%d-%s", i, long[:1000])
		other.Scenarios = append(other.Scenarios, sc)
	}
	_, err = results.Compare("a", base, "b", other, results.CompareOptions{MaxRegress: 0.1})
	if err == nil || len(err.Error()) > 2000 || !strings.Contains(err.Error(), "and 990 more") {
		t.Errorf("1000 scenarios only in one input: %.3000v", err)
	}
}

// Runs say which detection started their election; the summary counts
// them and the CLI summary says so per scenario. Results without it, as
// written before, still decode, with no line.
func TestDetectedBy(t *testing.T) {
	if got := results.DetectedByReason("leader-crashed"); got != results.DetectedByCrash {
		t.Errorf("leader-crashed: %q", got)
	}
	if got := results.DetectedByReason("leader-failed"); got != results.DetectedByTimeout {
		t.Errorf("leader-failed: %q", got)
	}
	if got := results.DetectedByReason("leader-left"); got != "leader-left" {
		t.Errorf("leader-left: %q", got)
	}

	r := resultstest.Sample(1)
	sc := &r.Scenarios[0]
	for i := range sc.Runs {
		sc.Runs[i].DetectedBy = ""
	}
	var old bytes.Buffer
	if err := r.Write(&old); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(old.String(), "detected_by") {
		t.Fatal("results without a detection name it")
	}
	back, err := results.DecodeResults("old.json", old.Bytes())
	if err != nil {
		t.Fatalf("results without detected_by: %v", err)
	}
	var sum bytes.Buffer
	if err := results.WriteSummary(&sum, back, results.SummaryOptions{Width: -1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sum.String(), "detection: ") {
		t.Errorf("summary of results without detected_by:\n%s", sum.String())
	}

	ok := 0
	for i := range sc.Runs {
		if sc.Runs[i].OK {
			ok++
			sc.Runs[i].DetectedBy = results.DetectedByCrash
			if ok == 1 {
				sc.Runs[i].DetectedBy = results.DetectedByTimeout
			}
		}
	}
	if ok < 2 {
		t.Fatalf("the sample has %d runs that passed, want 2 or more", ok)
	}
	sc.Summary = results.Summarize(sc.Runs)
	if got := sc.Summary.DetectedBy; got[results.DetectedByCrash] != ok-1 || got[results.DetectedByTimeout] != 1 {
		t.Errorf("summary counts %v", got)
	}
	sum.Reset()
	if err := results.WriteSummary(&sum, r, results.SummaryOptions{Width: -1}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s: detection: crash evidence %d/%d, failure timeout 1/%d", sc.Key(), ok-1, ok, ok)
	if !strings.Contains(sum.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, sum.String())
	}
}
