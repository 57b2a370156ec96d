package results_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

func writeResults(t *testing.T, r *results.Results, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if strings.HasSuffix(name, ".txt") {
		var buf bytes.Buffer
		if err := results.WriteBenchText(&buf, r); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if err := r.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// slower is sample with leader-crash 120ms slower in every run, a REJECT
// in one run, and one failed run more.
func slower() *results.Results {
	r := resultstest.Sample(1)
	runs := r.Scenarios[0].Runs
	for i := range runs {
		runs[i].TimeToLeaderNS += int64(120 * time.Millisecond)
	}
	runs[3].Messages["REJECT"] = 1
	runs[9].OK, runs[9].FailureKind, runs[9].Failure = false, results.FailSafety, "n15 and n16 led at once for 40ms"
	r.Summarize()
	return r
}

// shiftedTail is n runs of times from 500 ms a millisecond apart, the
// slowest tail of them shifted by extra: the same median, another p95.
func shiftedTail(n, tail int, extra time.Duration) *results.Results {
	r := resultstest.Sample(1)
	sc := &r.Scenarios[0]
	sc.Runs = sc.Runs[:0]
	for i := range n {
		ttl := 500*time.Millisecond + time.Duration(i)*time.Millisecond
		if i >= n-tail {
			ttl += extra
		}
		sc.Runs = append(sc.Runs, results.Run{Index: i + 1, OK: true, TimeToLeaderNS: int64(ttl), Messages: map[string]int{"COORDINATOR": 4}})
	}
	r.Scenarios = r.Scenarios[:1]
	r.Summarize()
	return r
}

// TestCompareRowTests: each row is tested for what it shows. A p95 shifted
// by 37% with the median unchanged regresses on the p95 row and not on
// p50; identical samples never regress; the intervals are the same every
// time.
func TestCompareRowTests(t *testing.T) {
	base, tail := shiftedTail(40, 10, 0), shiftedTail(40, 10, 200*time.Millisecond)
	c, err := results.Compare("base", base, "new", tail, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	key := base.Scenarios[0].Key()
	if ch := change(t, c, key, "time to leader p95"); ch.Status != results.Regression || ch.Interval == nil || !(ch.Interval.Low > 0) {
		t.Errorf("p95 %+.1f%% interval %+v: %s, want a regression", ch.Delta*100, ch.Interval, ch.Status)
	}
	if ch := change(t, c, key, "time to leader p50"); ch.Status != results.Same || ch.Interval == nil || ch.Interval.Excludes0() {
		t.Errorf("p50 %+.1f%% interval %+v: %s, want ~ with an interval about zero", ch.Delta*100, ch.Interval, ch.Status)
	}
	again, err := results.Compare("base", base, "new", tail, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Changes, again.Changes) {
		t.Error("two comparisons of the same files differ")
	}
	for _, r := range []*results.Results{base, tail, resultstest.Sample(1), resultstest.Sample(2)} {
		c, err := results.Compare("a", r, "b", r, results.CompareOptions{MaxRegress: 0})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Changes {
			if ch.Status != results.Same {
				t.Errorf("identical samples: %s %s is %s, interval %+v", ch.Scenario, ch.Metric, ch.Status, ch.Interval)
			}
		}
	}
}

func change(t *testing.T, c *results.Comparison, scenario, metric string) results.Change {
	t.Helper()
	for _, ch := range c.Changes {
		if ch.Scenario == scenario && ch.Metric == metric {
			return ch
		}
	}
	t.Fatalf("no change %s %s", scenario, metric)
	return results.Change{}
}

func TestCompareRegression(t *testing.T) {
	base := writeResults(t, resultstest.Sample(1), "base.json")
	for _, newName := range []string{"new.json", "new.txt"} {
		nw := writeResults(t, slower(), newName)
		c, err := results.CompareFiles(base, nw, results.CompareOptions{MaxRegress: 0.10})
		if err != nil {
			t.Fatalf("%s: %v", newName, err)
		}
		if v := results.VerdictOf(c, err); v != results.Regressed || v.ExitCode() != 1 {
			t.Errorf("%s: verdict %v", newName, v)
		}
		p50 := change(t, c, "leader-crash", "time to leader p50")
		if p50.Status != results.Regression || p50.Delta < 0.19 || p50.Delta > 0.22 {
			t.Errorf("%s: p50 %+v, want a regression of about +20%%", newName, p50)
		}
		// 0.03 more REJECTs per election is +Inf relative, but under the
		// noise floor of half a message.
		if rej := change(t, c, "leader-crash", "REJECT mean"); rej.Status != results.Same || !math.IsInf(rej.Delta, 1) {
			t.Errorf("%s: REJECT %+v, want within the floor", newName, rej)
		}
		if f := change(t, c, "leader-crash", "failed runs"); f.Status != results.Regression || f.Base != 1 || f.New != 2 {
			t.Errorf("%s: failed runs %+v", newName, f)
		}
		// The untouched scenario does not move.
		for _, ch := range c.Changes {
			if ch.Scenario == "latency-sweep delay=50ms" && ch.Status != results.Same {
				t.Errorf("%s: %s %s is %s", newName, ch.Scenario, ch.Metric, ch.Status)
			}
		}
		var out bytes.Buffer
		if err := results.WriteComparison(&out, c); err != nil {
			t.Fatal(err)
		}
		if newName == "new.json" {
			t.Logf("compare table:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "REGRESSED beyond 10%: leader-crash time to leader p50 +") {
			t.Errorf("%s: verdict line missing:\n%s", newName, out.String())
		}
	}
}

func TestComparePass(t *testing.T) {
	base := writeResults(t, resultstest.Sample(1), "base.json")
	c, err := results.CompareFiles(base, base, results.CompareOptions{MaxRegress: 0.10})
	if err != nil {
		t.Fatal(err)
	}
	if v := results.VerdictOf(c, err); v != results.Pass || v.ExitCode() != 0 {
		t.Errorf("a bench against itself: %v", v)
	}
	// Faster is not a regression but says so.
	c, err = results.CompareFiles(writeResults(t, slower(), "slow.json"), base, results.CompareOptions{MaxRegress: 0.10})
	if err != nil {
		t.Fatal(err)
	}
	if c.Verdict() != results.Pass || change(t, c, "leader-crash", "time to leader p50").Status != results.Improved {
		t.Errorf("faster: %v, p50 %+v", c.Verdict(), change(t, c, "leader-crash", "time to leader p50"))
	}
	// A 20% regression passes a 25% threshold.
	c, err = results.CompareFiles(base, writeResults(t, slower(), "slow.json"), results.CompareOptions{MaxRegress: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if p50 := change(t, c, "leader-crash", "time to leader p50"); p50.Status != results.Same {
		t.Errorf("+20%% at 25%%: %+v", p50)
	}
}

func TestCompareUnusable(t *testing.T) {
	dir := t.TempDir()
	base := writeResults(t, resultstest.Sample(1), "base.json")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	other := resultstest.Sample(1)
	other.Topology.Name = "star5"
	moreNodes := resultstest.Sample(1)
	moreNodes.Topology.Nodes = 17
	fewer := resultstest.Sample(1)
	fewer.Scenarios = fewer.Scenarios[:1]
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.json"), "no such file"},
		{"/dev/zero", "results /dev/zero: larger than 64 MiB"},
		{fifo, fifo + ": no BenchmarkElection results"},
		{write("v2.json", `{"schema": "bullylab.bench/v2"}`), `schema: "bullylab.bench/v2" is not bullylab.bench/v1`},
		{write("garbage.json", `{"schema": `), "unexpected end of JSON input"},
		{write("empty.txt", "goos: linux\n"), "no BenchmarkElection results"},
		{writeResults(t, other, "other.json"), "different topologies: " + base + " is star16, "},
		{writeResults(t, moreNodes, "more.json"), "topology star16 has 16 nodes in " + base + " and 17 in "},
		{writeResults(t, fewer, "fewer.json"), "different scenarios: only in " + base + ": latency-sweep delay=50ms"},
	} {
		c, err := results.CompareFiles(base, tc.path, results.CompareOptions{MaxRegress: 0.1})
		var ue *results.UnusableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an UnusableError saying %q", filepath.Base(tc.path), err, tc.want)
		}
		if v := results.VerdictOf(c, err); v != results.Unusable || v.ExitCode() != 2 {
			t.Errorf("%s: verdict %v", filepath.Base(tc.path), v)
		}
	}
}

func TestCompareNotes(t *testing.T) {
	a, b := resultstest.Sample(1), resultstest.Sample(1)
	b.Seed = 2
	b.Topology.Settings.HeartbeatNS = int64(50 * time.Millisecond)
	c, err := results.Compare("a", a, "b", b, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(c.Notes, "\n")
	for _, want := range []string{"b differs: heartbeat 100ms -> 50ms (topology)", "seed differs: 1 in a, 2 in b"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}

func TestParseThreshold(t *testing.T) {
	for in, want := range map[string]float64{"10%": 0.10, " 2.5% ": 0.025, "0%": 0, "150%": 1.5} {
		got, err := results.ParseThreshold(in)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "%", "-5%", "ten", "NaN", "1e9", "10%%", "1001%"} {
		if got, err := results.ParseThreshold(in); err == nil {
			t.Errorf("%q parsed as %v", in, got)
		}
	}
	// A bare number could be a fraction or a percentage: refused, with
	// the percentage spelled out.
	for _, in := range []string{"0.01", "10", "0"} {
		_, err := results.ParseThreshold(in)
		if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), in+"%") {
			t.Errorf("%q: %v, want it refused as ambiguous", in, err)
		}
	}
}

// TestCompareNoise: two benches of the same code, seeds 1 and 2, differ
// by a few percent at p50 by chance; with a 1% threshold the test keeps
// that from being a regression, and each change carries n and P.
func TestCompareNoise(t *testing.T) {
	c, err := results.Compare("a", resultstest.Sample(1), "b", resultstest.Sample(2), results.CompareOptions{MaxRegress: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range c.Changes {
		if ch.Status == results.Regression {
			t.Errorf("%s %s %+.1f%% interval %+v: a regression of noise", ch.Scenario, ch.Metric, ch.Delta*100, ch.Interval)
		}
	}
	ch := change(t, c, "leader-crash", "time to leader p50")
	okA, okB := resultstest.Sample(1).Scenarios[0].Summary.OK, resultstest.Sample(2).Scenarios[0].Summary.OK
	if ch.Interval == nil || ch.BaseN != okA || ch.NewN != okB {
		t.Errorf("time to leader p50: n %d/%d, want %d/%d, interval %v", ch.BaseN, ch.NewN, okA, okB, ch.Interval)
	}
	var out bytes.Buffer
	if err := results.WriteComparison(&out, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "n base/new") || !strings.Contains(out.String(), fmt.Sprintf("%d/%d", okA, okB)) || !strings.Contains(out.String(), "95% interval") || !strings.Contains(out.String(), "2000 resamples") {
		t.Errorf("table without n and intervals:\n%s", out.String())
	}
}

// TestCompareTooFewRuns: three runs a side get no interval, so a
// large slowdown is no regression, and a note says why; a failed run
// still is.
func TestCompareTooFewRuns(t *testing.T) {
	base, slow := resultstest.Sample(1), slower()
	for _, r := range []*results.Results{base, slow} {
		for i := range r.Scenarios {
			r.Scenarios[i].Runs = r.Scenarios[i].Runs[:3]
		}
		r.Summarize()
	}
	slow.Scenarios[0].Runs[2].OK, slow.Scenarios[0].Runs[2].FailureKind = false, results.FailSafety
	slow.Summarize()
	c, err := results.Compare("base", base, "new", slow, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if ch := change(t, c, "leader-crash", "time to leader p50"); ch.Status != results.Same {
		t.Errorf("time to leader p50 %+.1f%% interval %v with 3 and 2 runs: %s", ch.Delta*100, ch.Interval, ch.Status)
	}
	if ch := change(t, c, "leader-crash", "failed runs"); ch.Status != results.Regression {
		t.Errorf("failed runs: %s", ch.Status)
	}
	found := false
	for _, n := range c.Notes {
		found = found || (strings.Contains(n, "leader-crash: with 3 and 2 passed runs") && strings.Contains(n, "no change"))
	}
	if !found {
		t.Errorf("no note on too few runs: %q", c.Notes)
	}
}

// TestComparisonFormats: the JSON document carries the verdict, exit code,
// n and p of every change; the markdown is one table row per change with
// the regressions in bold, cells that hold a '|' escaped.
func TestComparisonFormats(t *testing.T) {
	c, err := results.Compare("base|1", resultstest.Sample(1), "new", slower(), results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := results.WriteComparisonAs(&js, c, results.FormatJSON); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema   string `json:"schema"`
		Verdict  string `json:"verdict"`
		ExitCode int    `json:"exit_code"`
		Changes  []struct {
			Metric   string `json:"metric"`
			Interval *struct {
				Low, High, Confidence float64
			} `json:"interval"`
			NBase  int    `json:"n_base"`
			Status string `json:"status"`
		} `json:"changes"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, js.String())
	}
	if doc.Schema != results.CompareSchema || doc.Verdict != "regressed" || doc.ExitCode != 1 || len(doc.Changes) != len(c.Changes) {
		t.Errorf("document %+v", doc)
	}
	if ch := doc.Changes[0]; ch.Metric != "time to leader p50" || ch.Interval == nil || ch.Interval.Low <= 0 || ch.NBase == 0 || ch.Status != "REGRESSED" {
		t.Errorf("first change %+v", ch)
	}
	var md bytes.Buffer
	if err := results.WriteComparisonAs(&md, c, results.FormatMarkdown); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, l := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| scenario |") {
			rows++
		}
	}
	if rows != len(c.Changes) || !strings.Contains(md.String(), "**REGRESSED**") || !strings.Contains(md.String(), `base\|1`) {
		t.Errorf("%d rows for %d changes:\n%s", rows, len(c.Changes), md.String())
	}
	if err := results.WriteComparisonAs(&md, c, "yaml"); err == nil || !strings.Contains(err.Error(), "table, json, markdown") {
		t.Errorf("format yaml: %v", err)
	}
}

// A partial side is compared on the runs it holds, and said to be
// partial: in Partial, one line per side naming its file, and first among
// the notes every format prints.
func TestComparePartial(t *testing.T) {
	full, cut := resultstest.Sample(1), resultstest.Sample(1)
	cut.Partial = &results.Partial{Reason: "interrupted by SIGTERM", RunsPlanned: 120, RunsDone: 60}
	basePath, newPath := writeResults(t, full, "results.json"), writeResults(t, cut, "results.json")
	c, err := results.CompareFiles(basePath, newPath, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	want := newPath + " is partial: interrupted by SIGTERM after 60 of 120 runs"
	if len(c.Partial) != 1 || c.Partial[0] != want {
		t.Errorf("Partial %q, want [%q]", c.Partial, want)
	}
	if len(c.Notes) == 0 || c.Notes[0] != want {
		t.Errorf("notes %q, want %q first", c.Notes, want)
	}
	if v := c.Verdict(); v != results.Pass {
		t.Errorf("verdict %v: the same runs, partial or not, are no regression", v)
	}
	for _, format := range results.ComparisonFormats {
		var out bytes.Buffer
		if err := results.WriteComparisonAs(&out, c, format); err != nil {
			t.Fatal(err)
		}
		text := out.String()
		if format == results.FormatJSON {
			var doc struct{ Notes []string }
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			text = strings.Join(doc.Notes, "\n")
		}
		if !strings.Contains(text, want) {
			t.Errorf("%s output does not say %q:\n%s", format, want, out.String())
		}
	}

	// Both sides partial: a line each, base first; a reason from the file
	// is one line.
	full.Partial = &results.Partial{Reason: "interrupted\nby SIGINT", RunsPlanned: 90, RunsDone: 60}
	c, err = results.Compare("a.json", full, "b.json", cut, results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	wantBoth := []string{"a.json is partial: interrupted by SIGINT after 60 of 90 runs", "b.json is partial: interrupted by SIGTERM after 60 of 120 runs"}
	if strings.Join(c.Partial, "\n") != strings.Join(wantBoth, "\n") {
		t.Errorf("Partial %q, want %q", c.Partial, wantBoth)
	}
	// Neither partial: nothing said.
	c, err = results.Compare("a.json", resultstest.Sample(1), "b.json", resultstest.Sample(1), results.CompareOptions{MaxRegress: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Partial) != 0 || len(c.Notes) != 0 {
		t.Errorf("full benches: Partial %q, notes %q", c.Partial, c.Notes)
	}
}

// TestCompareRowsTheRunsSupport: a percentile the runs of a side do not
// support is the slowest run again, so it gets no row of its own beside
// max; nor does a message type that neither bench sent.
func TestCompareRowsTheRunsSupport(t *testing.T) {
	for _, tc := range []struct {
		runs    int
		want    []string
		notWant []string
	}{
		{10, []string{"time to leader p50", "time to leader max", "detection p50"},
			[]string{"time to leader p95", "time to leader p99", "detection p95"}},
		{30, []string{"time to leader p50", "time to leader p95", "time to leader max", "detection p95"},
			[]string{"time to leader p99"}},
	} {
		base, next := resultstest.SampleFirstRuns(tc.runs), resultstest.SampleFirstRuns(tc.runs)
		// Runs count every type, sent or not: REJECT 0 in every run.
		for _, r := range []*results.Results{base, next} {
			for i := range r.Scenarios[0].Runs {
				r.Scenarios[0].Runs[i].Messages["REJECT"] = 0
			}
			r.Summarize()
		}
		c, err := results.Compare("a", base, "b", next, results.CompareOptions{MaxRegress: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		has := map[string]bool{}
		for _, ch := range c.Changes {
			has[ch.Metric] = true
		}
		for _, m := range tc.want {
			if !has[m] {
				t.Errorf("%d runs a side: no %q row", tc.runs, m)
			}
		}
		for _, m := range tc.notWant {
			if has[m] {
				t.Errorf("%d runs a side: a %q row", tc.runs, m)
			}
		}
		if has["REJECT mean"] {
			t.Errorf("%d runs a side: a row for REJECT, which no run sent", tc.runs)
		}
	}
}

// The algorithm is part of a scenario's key: a bench of both compares
// each with its own, a results.json from before there was a choice reads
// as Bully's, and one algorithm's bench against another's contrasts them
// scenario by scenario, saying so.
func TestCompareAlgorithms(t *testing.T) {
	both := resultstest.AlgorithmsSample()
	for _, name := range []string{"both.json", "both.txt"} {
		path := writeResults(t, both, name)
		c, err := results.CompareFiles(path, path, results.CompareOptions{MaxRegress: 0.10, Alpha: results.DefaultAlpha})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, key := range []string{"leader-crash", "leader-crash algorithm=ring"} {
			if ch := change(t, c, key, "time to leader p50"); ch.Status != results.Same {
				t.Errorf("%s: %s against itself: %+v", name, key, ch)
			}
		}
		back, err := results.LoadComparable(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := back.Algorithms(); !slices.Equal(got, []string{"bully", "ring"}) {
			t.Errorf("%s reads back algorithms %v", name, got)
		}
	}

	// A results.json without the field, as benches wrote before.
	old := resultstest.Sample(1)
	var buf bytes.Buffer
	if err := old.Write(&buf); err != nil {
		t.Fatal(err)
	}
	data := strings.ReplaceAll(buf.String(), `"algorithm": "bully",`, "")
	if strings.Contains(data, `"algorithm"`) {
		t.Fatal("the sample still names its algorithm")
	}
	oldPath := filepath.Join(t.TempDir(), "old.json")
	if err := os.WriteFile(oldPath, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := results.ReadResults(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if a := r.Scenarios[0].Algorithm; a != "bully" {
		t.Errorf("an old results.json reads as algorithm %q", a)
	}
	if _, err := results.CompareFiles(oldPath, writeResults(t, resultstest.Sample(1), "new.json"), results.CompareOptions{MaxRegress: 0.10, Alpha: results.DefaultAlpha}); err != nil {
		t.Errorf("old against new Bully: %v", err)
	}

	bully, ring := resultstest.AlgorithmsSample(), resultstest.AlgorithmsSample()
	bully.Scenarios, ring.Scenarios = bully.Scenarios[:1], ring.Scenarios[1:]
	c, err := results.CompareFiles(writeResults(t, bully, "bully.json"), writeResults(t, ring, "ring.json"), results.CompareOptions{MaxRegress: 0.10, Alpha: results.DefaultAlpha})
	if err != nil {
		t.Fatal(err)
	}
	change(t, c, "leader-crash", "time to leader p50")
	if !slices.ContainsFunc(c.Notes, func(n string) bool { return strings.HasPrefix(n, "algorithm differs: bully in ") }) {
		t.Errorf("no note of the algorithms: %q", c.Notes)
	}

	bad := strings.Replace(buf.String(), `"algorithm": "bully"`, `"algorithm": "raft"`, 1)
	if _, err := results.DecodeResults("bad.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), `scenarios[0].algorithm: "raft" is not an election algorithm`) {
		t.Errorf("an unknown algorithm: %v", err)
	}
}
