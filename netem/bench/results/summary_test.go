package results_test

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// twelveScenarios is a bench of 12 scenarios with long keys, one with 5
// runs and one whose elections take seconds, built from resultstest.Sample's.
func twelveScenarios() *results.Results {
	r := resultstest.Sample(3)
	base := r.Scenarios
	r.Scenarios = nil
	for i, key := range []struct{ name, label, value string }{
		{"leader-crash", "", ""}, {"loss", "loss", "20%"}, {"loss", "loss", "5%"},
		{"latency-sweep", "delay", "10ms"}, {"latency-sweep", "delay", "50ms"}, {"latency-sweep", "delay", "100ms"},
		{"partition-minority", "", ""}, {"partition-majority", "", ""}, {"pause-leader", "", ""},
		{"cascade", "k", "3"}, {"jitter", "jitter", "20ms"}, {"cold-start", "", ""},
	} {
		sc := base[i%len(base)]
		sc.Name, sc.Labels = key.name, nil
		if key.label != "" {
			sc.Labels = map[string]string{key.label: key.value}
		}
		sc.Runs = append([]results.Run(nil), sc.Runs...)
		switch key.name {
		case "cascade":
			sc.Runs = sc.Runs[:5]
		case "partition-majority":
			for j := range sc.Runs {
				sc.Runs[j].TimeToLeaderNS += int64(12 * time.Second)
			}
		}
		sc.Summary = results.Summary{}
		r.Scenarios = append(r.Scenarios, sc)
	}
	r.Summarize()
	return r
}

func render(t *testing.T, r *results.Results, width int) string {
	t.Helper()
	var out bytes.Buffer
	if err := results.WriteSummary(&out, r, results.SummaryOptions{Width: width}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// tableLines are the lines of the table, above the notes under it.
func tableLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "percentiles") {
			break
		}
		lines = append(lines, l)
	}
	return lines
}

// TestSummaryFitsWidth: below 100 columns the compact table, from 100 the
// full one where it fits, each within its width, 12 scenarios with long
// keys included.
func TestSummaryFitsWidth(t *testing.T) {
	r := twelveScenarios()
	for _, tc := range []struct {
		width int
		full  bool
	}{{80, false}, {99, false}, {100, false}, {160, true}} {
		out := render(t, r, tc.width)
		for _, l := range strings.Split(out, "\n") { // the notes below it too
			if n := utf8.RuneCountInString(l); n > tc.width {
				t.Errorf("at %d columns a line is %d wide: %q\n%s", tc.width, n, l, out)
			}
		}
		if boxed := strings.Contains(out, "┌"); boxed != tc.full {
			t.Errorf("at %d columns full layout %v, want %v:\n%s", tc.width, boxed, tc.full, out)
		}
		for _, key := range []string{"loss loss=20%", "latency-sweep delay=100ms"} {
			if !strings.Contains(out, key) && !strings.Contains(out, strings.Replace(key, " ", "\n", 1)) {
				// Wrapped keys are checked word by word.
				for _, w := range strings.Fields(key) {
					if !strings.Contains(out, w) {
						t.Errorf("at %d columns the table lacks %q of %q:\n%s", tc.width, w, key, out)
					}
				}
			}
		}
		if testing.Verbose() {
			t.Logf("at %d columns:\n%s", tc.width, out)
		}
	}
	// Two scenarios fit the full table in fewer columns than twelve.
	two := resultstest.Sample(1)
	full := render(t, two, -1)
	width := 0
	for _, l := range tableLines(full) {
		width = max(width, utf8.RuneCountInString(l))
	}
	if width < 100 || width > 160 {
		t.Errorf("the full table of two scenarios is %d wide:\n%s", width, full)
	}
	for _, w := range []int{width - 1, width} {
		if got, want := slices.Equal(tableLines(render(t, two, w)), tableLines(full)), w == width; got != want {
			t.Errorf("at %d columns, the full table %d wide chosen %v, want %v", w, width, got, want)
		}
	}
	if testing.Verbose() {
		t.Logf("two scenarios at 80 columns:\n%s\nat 160:\n%s", render(t, two, 80), render(t, two, 160))
	}
}

// TestSummaryCompactLongKeysWrap: at 80 columns a key longer than the
// scenario column gets wraps at its space, its words whole.
func TestSummaryCompactLongKeysWrap(t *testing.T) {
	out := render(t, twelveScenarios(), 80)
	lines := tableLines(out)
	for i, l := range lines {
		if strings.HasPrefix(l, "latency-sweep ") && !strings.Contains(l, "delay=") {
			if i+1 == len(lines) || !strings.HasPrefix(lines[i+1], "delay=") {
				t.Errorf("latency-sweep's key is cut elsewhere than its space:\n%s", out)
			}
			return
		}
	}
	if !strings.Contains(out, "latency-sweep delay=100ms") {
		t.Errorf("no latency-sweep delay=100ms in:\n%s", out)
	}
}

var unitInCell = regexp.MustCompile(`│ +[0-9.]+ ?(ms|s|µs) │`)

// TestSummaryUnits: a column holds one unit, named in its header: the
// seconds-long scenario turns its own columns to s in full, and every
// other column reads ms; no cell carries a unit.
func TestSummaryUnits(t *testing.T) {
	r := twelveScenarios()
	full := render(t, r, 160)
	for _, h := range []string{"p50 (s)", "max (s)", "detection", "p50 (ms)", "p95 (ms)"} {
		if !strings.Contains(full, h) {
			t.Errorf("full table lacks header %q:\n%s", h, full)
		}
	}
	for _, l := range tableLines(full) {
		if unitInCell.MatchString(l) {
			t.Errorf("a cell carries its unit: %q", l)
		}
	}
	compact := render(t, r, 80)
	if !strings.Contains(compact, "time to leader (s)") || !strings.Contains(compact, "detection (ms)") {
		t.Errorf("compact table does not name its groups' units:\n%s", compact)
	}
	// 12.6 s and 578 ms in one column of seconds: 12.6 and 0.6.
	if !strings.Contains(compact, "12.") {
		t.Errorf("compact table lacks the 12 s run in seconds:\n%s", compact)
	}
}

// TestSummaryPercentilesShown: p95 shows from 20 runs, p99 from 100; a
// scenario with fewer shows "-" where others show a value, and the line
// under the table says what was left out.
func TestSummaryPercentilesShown(t *testing.T) {
	for _, tc := range []struct {
		runs            int
		p95, p99        bool
		wantLine        string
		detectionHeader string
	}{
		{5, false, false, "percentiles are nearest-rank over the 5 runs that passed: p50 is the 3rd fastest run; max is the slowest; p95 and p99 are left out below 20 and 100 runs\n", ""},
		{30, true, false, "p50 is the 15th fastest run; p95 is the 2nd slowest; max is the slowest; p99 is left out below 100 runs\n", "p95 (ms)"},
	} {
		out := render(t, resultstest.SampleFirstRuns(tc.runs), 160)
		header := strings.Join(tableLines(out)[:3], "\n")
		if got := strings.Contains(header, "p95"); got != tc.p95 {
			t.Errorf("%d runs: p95 column %v, want %v:\n%s", tc.runs, got, tc.p95, out)
		}
		if got := strings.Contains(header, "p99"); got != tc.p99 {
			t.Errorf("%d runs: p99 column %v, want %v:\n%s", tc.runs, got, tc.p99, out)
		}
		// At 160 columns the note wraps at a space.
		if !strings.Contains(strings.ReplaceAll(out, "\n", " "), strings.TrimSuffix(tc.wantLine, "\n")) {
			t.Errorf("%d runs: summary lacks %q:\n%s", tc.runs, tc.wantLine, out)
		}
	}
	// 5 runs beside 30: the p95 column stays, "-" for the 5.
	r := twelveScenarios()
	out := render(t, r, 160)
	for _, l := range tableLines(out) {
		if strings.HasPrefix(l, "│ cascade k=3 ") && strings.Count(l, " - ") < 2 {
			t.Errorf("cascade's 5 runs show a p95: %q", l)
		}
	}
	if !strings.Contains(out, "percentiles of cascade k=3 are nearest-rank over the 5 runs that passed") {
		t.Errorf("no percentile line for cascade's 5 runs:\n%s", out)
	}
}

// TestSummaryDetectionAsReport: the table shows the detection p50 and
// p95, as report.html does.
func TestSummaryDetectionAsReport(t *testing.T) {
	r := resultstest.SampleFirstRuns(30)
	d := r.Scenarios[0].Summary.Detection
	for _, width := range []int{80, 160} {
		out := render(t, r, width)
		for _, v := range []int64{d.P50NS, d.P95NS} {
			if ms := fmt.Sprintf("%.0f", float64(v)/1e6); !strings.Contains(out, ms) {
				t.Errorf("at %d columns detection %s ms is missing:\n%s", width, ms, out)
			}
		}
	}
}

// TestSummaryPlainOffTerminal: written to a file, the summary is the full
// table whatever $COLUMNS says.
func TestSummaryPlainOffTerminal(t *testing.T) {
	t.Setenv("COLUMNS", "60")
	f, err := os.Create(t.TempDir() + "/summary.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := results.WriteSummary(f, twelveScenarios()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "┌") || !strings.Contains(string(b), "HALT_ACK") {
		t.Errorf("summary in a file is not the full table:\n%s", b)
	}
}

// A bench of both algorithms sets them side by side: a row per scenario
// and algorithm, the algorithm in a column of its own, each with its own
// messages; a Bully-only bench has no such column.
func TestSummaryAlgorithmsSideBySide(t *testing.T) {
	r := resultstest.AlgorithmsSample()
	for _, width := range []int{80, 200} {
		out := render(t, r, width)
		lines := tableLines(out)
		if !strings.Contains(strings.Join(lines, "\n"), "algorithm") {
			t.Errorf("width %d: no algorithm column:\n%s", width, out)
		}
		var rows []string
		for _, l := range lines {
			if f := strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == '│' }); len(f) > 1 && f[0] == "leader-crash" {
				rows = append(rows, f[1])
			}
		}
		if !slices.Equal(rows, []string{"bully", "ring"}) {
			t.Errorf("width %d: rows of leader-crash by algorithm %q:\n%s", width, rows, out)
		}
		if width == 200 && (!strings.Contains(out, "RING_ELECTION") || !strings.Contains(out, "HALT_ACK")) {
			t.Errorf("the full table lacks a type of either algorithm:\n%s", out)
		}
		if width == 200 {
			// The counts line up across the rows: the type column is as
			// wide in Bully's rows as in the ring's.
			at := map[int][]string{}
			for _, l := range lines {
				if f := strings.Fields(strings.TrimRight(l, "│ ")); len(f) > 3 && slices.Contains([]string{"HALT", "HALT_ACK", "COORDINATOR", "RING_ELECTION", "ELECTED", "total"}, f[len(f)-3]) {
					at[strings.Index(l, "(")] = append(at[strings.Index(l, "(")], f[len(f)-3])
				}
			}
			if len(at) != 1 {
				t.Errorf("the messages' counts start at %d columns, want one:\n%s", len(at), out)
			}
		}
	}
	if out := render(t, resultstest.Sample(1), 200); strings.Contains(out, "algorithm") {
		t.Errorf("a Bully-only bench names the algorithm:\n%s", out)
	}
}
