package results_test

import (
	"bufio"
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// perfRecord is what golang.org/x/perf/benchfmt's Reader yields for a
// line; perfParse below follows that reader's rules (reader.go and
// result.go of x/perf) rather than this package's parser, so that the test
// checks bench.txt against benchstat's reading, not against itself.
type perfRecord struct {
	line   int
	err    string
	name   string
	base   string
	parts  []string // sub-name configuration parts, "/k=v"
	procs  string   // "-N" GOMAXPROCS part
	iters  int
	values map[string]float64
	config map[string]string // file configuration in force
}

func perfParse(data []byte) (recs []perfRecord, units map[string]string) {
	config := map[string]string{}
	units = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "Benchmark") {
			rec := perfRecord{line: n, values: map[string]float64{}, config: map[string]string{}}
			for k, v := range config {
				rec.config[k] = v
			}
			f := strings.Fields(line[len("Benchmark"):])
			switch {
			case len(f) < 2:
				rec.err = "missing iteration count"
			default:
				rec.name = "Benchmark" + f[0]
				it, err := strconv.Atoi(f[1])
				if err != nil {
					rec.err = "parsing iteration count"
					break
				}
				rec.iters = it
				vals := f[2:]
				if len(vals) == 0 {
					rec.err = "missing measurements"
				}
				for i := 0; i < len(vals); i += 2 {
					v, err := strconv.ParseFloat(vals[i], 64)
					if err != nil {
						rec.err = "parsing measurement"
						break
					}
					if i+1 >= len(vals) {
						rec.err = "missing units"
						break
					}
					rec.values[vals[i+1]] = v
				}
				// Name.Parts: a trailing -digits is GOMAXPROCS, then split on '/'.
				name := rec.name
				for i := len(name) - 1; i >= 0; i-- {
					if name[i] == '-' && i < len(name)-1 {
						name, rec.procs = name[:i], name[i:]
						break
					}
					if name[i] < '0' || name[i] > '9' {
						break
					}
				}
				parts := strings.Split(name, "/")
				rec.base = parts[0]
				for _, p := range parts[1:] {
					rec.parts = append(rec.parts, "/"+p)
				}
			}
			recs = append(recs, rec)
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && f[0] == "Unit" {
			for _, kv := range f[2:] {
				units[f[1]+" "+kv] = kv
			}
			continue
		}
		// parseKeyValueLine: a lower-case first rune, no space or upper
		// case before the colon, then spaces before the value.
		for i, r := range line {
			if i == 0 && !unicode.IsLower(r) || unicode.IsSpace(r) || unicode.IsUpper(r) {
				break
			}
			if i > 0 && r == ':' {
				val := line[i+1:]
				if val == "" {
					delete(config, line[:i])
				} else if val[0] == ' ' || val[0] == '\t' {
					config[line[:i]] = strings.TrimLeft(val, " \t")
				}
				break
			}
		}
	}
	return recs, units
}

func TestBenchTextFormat(t *testing.T) {
	r := resultstest.Sample(1)
	var buf bytes.Buffer
	if err := results.WriteBenchText(&buf, r); err != nil {
		t.Fatal(err)
	}
	recs, units := perfParse(buf.Bytes())
	if len(recs) != 29+30 {
		t.Fatalf("%d result lines, want one per run that passed (59)", len(recs))
	}
	wantConfig := map[string]string{"goos": "linux", "goarch": "amd64", "pkg": results.BenchPackage, "cpu": "AMD EPYC 7B13"}
	perScenario := map[string][]perfRecord{}
	for _, rec := range recs {
		if rec.err != "" {
			t.Fatalf("line %d: %s", rec.line, rec.err)
		}
		// Only keys that stay put between two benches of one machine, or
		// benchstat splits old and new into separate tables.
		if !reflect.DeepEqual(rec.config, wantConfig) {
			t.Errorf("line %d: configuration %v, want %v", rec.line, rec.config, wantConfig)
		}
		if rec.base != "BenchmarkElection" || rec.procs != "" || rec.iters != 1 {
			t.Errorf("line %d: base %q procs %q iters %d", rec.line, rec.base, rec.procs, rec.iters)
		}
		perScenario[strings.Join(rec.parts, "")] = append(perScenario[strings.Join(rec.parts, "")], rec)
	}
	crash := perScenario["/topology=star16/scenario=leader-crash/algorithm=bully"]
	sweep := perScenario["/topology=star16/scenario=latency-sweep/algorithm=bully/delay=50ms"]
	if len(crash) != 29 || len(sweep) != 30 || len(perScenario) != 2 {
		t.Fatalf("scenarios: %d, %d runs of %d names", len(crash), len(sweep), len(perScenario))
	}
	// Every line of a scenario has the same units, the messages add up,
	// and the values are the runs'.
	first := r.Scenarios[0].Runs[0]
	if v := crash[0].values; v["ns/op"] != float64(first.TimeToLeaderNS) || v["detection-ns/op"] != float64(*first.DetectionNS) ||
		v["halt-msgs/op"] != 14 || v["halt_ack-msgs/op"] != 14 || v["election-msgs/op"] != 0 || v["msgs/op"] != 42 {
		t.Errorf("run 1: %v", v)
	}
	for _, rec := range crash {
		if len(rec.values) != len(crash[0].values) {
			t.Errorf("line %d has units %v, line %d %v", rec.line, rec.values, crash[0].line, crash[0].values)
		}
		sum := 0.0
		for u, v := range rec.values {
			if strings.HasSuffix(u, "-msgs/op") {
				sum += v
			}
		}
		if sum != rec.values["msgs/op"] {
			t.Errorf("line %d: types add up to %g, msgs/op is %g", rec.line, sum, rec.values["msgs/op"])
		}
	}
	for _, u := range []string{"msgs/op", "detection-ns/op", "election-msgs/op", "halt_ack-msgs/op"} {
		if units[u+" better=lower"] == "" {
			t.Errorf("no better=lower for %s", u)
		}
	}
	if !strings.Contains(buf.String(), "\n# failed BenchmarkElection/topology=star16/scenario=leader-crash/algorithm=bully run 7 liveness: step 2 (wait_leader)") {
		t.Error("failed run 7 not recorded as a comment")
	}
}

func TestBenchName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"leader-crash", nil, "BenchmarkElection/topology=star16/scenario=leader-crash/algorithm=bully"},
		{"latency-sweep", map[string]string{"delay": "10ms", "a": "b"}, "BenchmarkElection/topology=star16/scenario=latency-sweep/algorithm=bully/a=b/delay=10ms"},
		// Trailing -digits would be read as GOMAXPROCS.
		{"cascade-3", map[string]string{"k": "3-3"}, "BenchmarkElection/topology=star16/scenario=cascade-3/algorithm=bully/k=3_3"},
		{"my scenario/x=y", nil, "BenchmarkElection/topology=star16/scenario=my_scenario_x_y/algorithm=bully"},
	} {
		if got := results.BenchName("star16", &results.ScenarioResult{Name: tc.name, Labels: tc.labels}); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.name, tc.labels, got, tc.want)
		}
	}
}

// bench.txt carries what compare needs: the same summaries as results.json.
func TestResultsFromBenchText(t *testing.T) {
	r := resultstest.Sample(1)
	var buf bytes.Buffer
	if err := results.WriteBenchText(&buf, r); err != nil {
		t.Fatal(err)
	}
	bt, err := results.ParseBenchText("bench.txt", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	back, err := results.ResultsFromBenchText("bench.txt", bt)
	if err != nil {
		t.Fatal(err)
	}
	if back.Topology.Name != "star16" || len(back.Scenarios) != 2 {
		t.Fatalf("topology %q, %d scenarios", back.Topology.Name, len(back.Scenarios))
	}
	for i, sc := range back.Scenarios {
		orig := r.Scenarios[i]
		if sc.Key() != orig.Key() {
			t.Errorf("scenario %q, want %q", sc.Key(), orig.Key())
		}
		a, b := orig.Summary, sc.Summary
		// bench.txt keeps no run numbers of passed runs, and no convergence.
		a.Failures, b.Failures = nil, nil
		a.Convergence = nil
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: summary from bench.txt\n%+v\nfrom results\n%+v", sc.Key(), b, a)
		}
		if len(sc.Summary.Failures) != len(orig.Summary.Failures) {
			t.Errorf("%s: failures %+v", sc.Key(), sc.Summary.Failures)
		}
	}
}

func TestParseBenchTextErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"BenchmarkX 1 2\n", "b.txt:1: result line has 3 fields"},
		{"goos: linux\nBenchmarkX x 2 ns/op\n", `b.txt:2: iteration count "x" is not a count`},
		{"BenchmarkX 1 NaN ns/op\n", `b.txt:1: value "NaN" of unit ns/op is not a number`},
		{"Unit x better\n", `b.txt:1: unit metadata "better" is not key=value`},
		{"# failed BenchmarkX run x y: z\n", "b.txt:1: malformed failure comment"},
	} {
		_, err := results.ParseBenchText("b.txt", []byte(tc.in))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		}
	}
	bt, err := results.ParseBenchText("b.txt", []byte("PASS\nKey: x\ngoos:linux\ncpu: a\ncpu:\nBenchmarkFoo-8 10 5 ns/op\nok  pkg 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bt.Results) != 1 || len(bt.Results[0].Config) != 0 || len(bt.Config) != 2 {
		t.Errorf("ignored lines read: %+v", bt)
	}
	if _, err := results.ResultsFromBenchText("b.txt", bt); err == nil || !strings.Contains(err.Error(), "no BenchmarkElection results") {
		t.Errorf("someone else's benchmarks: %v", err)
	}
}
