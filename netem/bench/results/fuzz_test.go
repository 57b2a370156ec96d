package results_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// small is the sample with three runs per scenario, the failed one kept.
func small() *results.Results {
	r := resultstest.Sample(1)
	for i := range r.Scenarios {
		r.Scenarios[i].Runs = r.Scenarios[i].Runs[4:7]
	}
	r.Summarize()
	return r
}

func oneLineNamingFile(t *testing.T, err error, file string) {
	t.Helper()
	msg := err.Error()
	if strings.ContainsAny(msg, "\r\n") {
		t.Fatalf("error is not one line: %q", msg)
	}
	if !strings.HasPrefix(msg, file) {
		t.Fatalf("error does not name the file: %q", msg)
	}
	if len(msg) > 1024 {
		t.Fatalf("error of %d bytes: %.2000q", len(msg), msg)
	}
}

// FuzzDecodeResults: any input decodes into results that summarise,
// compare with themselves and render, or fails with one line naming the
// file.
func FuzzDecodeResults(f *testing.F) {
	// Small seeds: the fuzzer minimises every new input, which on the
	// 100 KiB of a 60-run sample takes longer than the run.
	var buf bytes.Buffer
	small().Write(&buf)
	f.Add(buf.Bytes())
	f.Add([]byte(`{"schema":"bullylab.bench/v1","topology":{"name":"t"},"scenarios":[{"name":"s","runs":[{"index":1,"ok":true,"time_to_leader_ns":5,"messages":{"X":1}}]}]}`))
	f.Add([]byte(`{"schema":"bullylab.bench/v1","topology":{"name":"t"},"scenarios":[{"name":"s","runs":[]}]}`))
	f.Add([]byte(`{"schema":"bullylab.bench/v2"}`))
	f.Add([]byte(`{"schema":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := results.DecodeResults("fuzz.json", data)
		if err != nil {
			oneLineNamingFile(t, err, "fuzz.json")
			return
		}
		r.Summarize()
		c, err := results.Compare("a", r, "b", r, results.CompareOptions{MaxRegress: 0.1})
		if err == nil && c.Verdict() != results.Pass {
			t.Fatalf("results regress against themselves: %+v", c.Regressions())
		}
		var out bytes.Buffer
		if err := results.WriteSummary(&out, r); err != nil {
			t.Fatal(err)
		}
		if err := results.WriteBenchText(&out, r); err != nil {
			t.Fatal(err)
		}
		if err := report.Write(&out, r); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParseBenchText: any input parses, or fails with one line naming the
// file and line; what parses converts to results without a panic.
func FuzzParseBenchText(f *testing.F) {
	var buf bytes.Buffer
	results.WriteBenchText(&buf, small())
	f.Add(buf.Bytes())
	f.Add([]byte("goos: linux\nBenchmarkElection/topology=t/scenario=s-8 1 5 ns/op 3 msgs/op\n"))
	f.Add([]byte("BenchmarkElection/topology=t/scenario=s 1 -5 ns/op\n# failed BenchmarkElection/topology=t/scenario=s run 2 liveness: x\n"))
	f.Add([]byte("Unit ns/op better=lower\nBenchmarkX 1 1e400 ns/op\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bt, err := results.ParseBenchText("fuzz.txt", data)
		if err != nil {
			oneLineNamingFile(t, err, "fuzz.txt")
			return
		}
		r, err := results.ResultsFromBenchText("fuzz.txt", bt)
		if err != nil {
			oneLineNamingFile(t, err, "fuzz.txt")
			return
		}
		if r.Topology.Name == "" || len(r.Scenarios) == 0 {
			t.Fatalf("results without topology or scenarios: %+v", r)
		}
		// What bench.txt gives, bench.txt writes again the same way.
		var out bytes.Buffer
		if err := results.WriteBenchText(&out, r); err != nil {
			t.Fatal(err)
		}
		bt2, err := results.ParseBenchText("again.txt", out.Bytes())
		if err != nil {
			t.Fatalf("rewritten bench.txt does not parse: %v\n%s", err, out.Bytes())
		}
		r2, err := results.ResultsFromBenchText("again.txt", bt2)
		if err != nil {
			t.Fatalf("rewritten bench.txt: %v\n%s", err, out.Bytes())
		}
		if len(r2.Scenarios) != len(r.Scenarios) {
			t.Fatalf("%d scenarios became %d:\n%s", len(r.Scenarios), len(r2.Scenarios), out.Bytes())
		}
	})
}

func FuzzParseThreshold(f *testing.F) {
	for _, s := range []string{"10%", "10", "2.5 %", "-1", "1e3", "NaN", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := results.ParseThreshold(s)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\r\n") || len(err.Error()) > 1024 {
				t.Fatalf("error is not one short line: %.2000q", err)
			}
			return
		}
		if !(v >= 0 && v <= 10) {
			t.Fatalf("%q gave %v, outside 0..1000%%", s, v)
		}
	})
}
