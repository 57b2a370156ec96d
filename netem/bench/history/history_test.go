package history

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

func TestEntriesOfResults(t *testing.T) {
	r := resultstest.Sample(1)
	es := EntriesOf(r, "abc123", time.Time{})
	if len(es) != 2 {
		t.Fatalf("%d entries of a bench of 2 scenarios", len(es))
	}
	e := es[0]
	sum := r.Scenarios[0].Summary
	if e.Commit != "abc123" || !e.Time.Equal(r.Finished) || e.Topology != "star16" || e.Scenario != "leader-crash" || e.Algorithm != "bully" ||
		e.Runs != 30 || e.OK != 29 || e.TTLP50NS != sum.TimeToLeader.P50NS || e.MessagesMean != sum.MessagesTotal.Mean ||
		len(e.TTLNS) != 29 || len(e.Messages) != 29 || e.Settings["failure_timeout"] != "500ms" || e.Settings["impair_backend"] != "netem" {
		t.Errorf("entry %+v", e)
	}
	if es[1].Scenario != "latency-sweep delay=50ms" {
		t.Errorf("the sweep point's scenario is %q", es[1].Scenario)
	}
	line, err := FormatLine(&e)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(line, []byte{'\n'}) || !bytes.HasPrefix(line, []byte(`{"time":"2026-03-14T09:30:53Z","commit":"abc123",`)) {
		t.Errorf("line %s", line)
	}
	back, err := ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := FormatLine(back)
	if !bytes.Equal(line, again) {
		t.Errorf("a line read back writes as\n%s\nnot\n%s", again, line)
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	good, _ := FormatLine(&seriesOf([]float64{450e6})[0])
	g := string(good)
	for _, c := range []struct{ line, want string }{
		{`{"time":`, "h.jsonl:3: unexpected EOF"},
		{`[1]`, "h.jsonl:3: want history.Entry, got JSON array"},
		{strings.Replace(g, `"commit":"c01"`, `"commit":""`, 1), "h.jsonl:3: commit: missing"},
		{strings.Replace(g, `"commit":"c01"`, `"commit":"c 1"`, 1), `h.jsonl:3: commit: "c 1" holds white space`},
		{strings.Replace(g, `"runs":1`, `"runs":"1"`, 1), "h.jsonl:3: runs: want int, got JSON string"},
		{strings.Replace(g, `"runs":1`, `"runs":1,"colour":"red"`, 1), `h.jsonl:3: json: unknown field "colour"`},
		{strings.Replace(g, `"ttl_ns":[450000000]`, `"ttl_ns":[]`, 1), "h.jsonl:3: ttl_ns: 0 times for 1 passed runs"},
		{strings.Replace(g, `"ok":1`, `"ok":2`, 1), "h.jsonl:3: ok: 2, want 0 to runs (1)"},
		{strings.Replace(g, `"time":"2026-11-27T20:00:00Z"`, `"time":"yesterday"`, 1), "h.jsonl:3: time: want an RFC 3339 time"},
		{g + " {}", "h.jsonl:3: more than one JSON value"},
	} {
		_, err := Parse("h.jsonl", []byte(g+"\n\n"+c.line+"\n"))
		var fe *results.FileError
		if err == nil || !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("line %s: error %v, want one line starting %q", c.line, err, c.want)
		}
	}
}

// Two branches that each appended entries merge, as git's union merge
// does, into the lines of both in either order: the history reads back
// as the one both would have written, the same entry on both read once.
func TestUnionMerge(t *testing.T) {
	es := seriesOf([]float64{450e6, 460e6, 455e6, 470e6})
	var base, ours, theirs bytes.Buffer
	Write(&base, es[:2])
	Write(&ours, []Entry{es[2], es[1]})
	Write(&theirs, []Entry{es[3], es[1]})
	merged := base.String() + strings.TrimPrefix(theirs.String(), base.String()) + ours.String()
	got, err := Parse("merged.jsonl", []byte(merged))
	if err != nil {
		t.Fatal(err)
	}
	Sort(got)
	var a, b bytes.Buffer
	Write(&a, got)
	Write(&b, es)
	if a.String() != b.String() {
		t.Errorf("merged history\n%s\nwant\n%s", a.String(), b.String())
	}
	other := es[1]
	other.TTLP50NS++
	var conflict bytes.Buffer
	Write(&conflict, []Entry{es[0], es[1], other})
	if _, err := Parse("h.jsonl", conflict.Bytes()); err == nil || !strings.Contains(err.Error(), "h.jsonl:3: star5 leader-crash bully at c02: also on line 2, with other values") {
		t.Errorf("two entries of one bench that differ: %v", err)
	}
}

func TestAppend(t *testing.T) {
	dir := t.TempDir()
	benchDir := filepath.Join(dir, "bench-out")
	os.Mkdir(benchDir, 0o755)
	r := resultstest.Sample(1)
	if err := r.WriteFile(filepath.Join(benchDir, "results.json")); err != nil {
		t.Fatal(err)
	}
	later := resultstest.Sample(2)
	later.Finished = later.Finished.Add(time.Hour)
	laterPath := filepath.Join(dir, "later.json")
	later.WriteFile(laterPath)
	h := filepath.Join(dir, "history.jsonl")
	// The later bench first: the file keeps time order whatever the order
	// of appends.
	if added, err := Append(AppendOptions{File: h, Commit: "b2", Inputs: []string{laterPath}}); err != nil || len(added) != 2 {
		t.Fatalf("append: %d entries, %v", len(added), err)
	}
	if added, err := Append(AppendOptions{File: h, Commit: "a1", Inputs: []string{benchDir}}); err != nil || len(added) != 2 {
		t.Fatalf("append: %d entries, %v", len(added), err)
	}
	if added, err := Append(AppendOptions{File: h, Commit: "a1", Inputs: []string{benchDir}}); err != nil || len(added) != 0 {
		t.Errorf("appending a bench again: %d entries added, %v", len(added), err)
	}
	es, err := ReadFile(h, false)
	if err != nil {
		t.Fatal(err)
	}
	var commits []string
	for _, e := range es {
		commits = append(commits, e.Commit+" "+e.Scenario)
	}
	if want := []string{"a1 latency-sweep delay=50ms", "a1 leader-crash", "b2 latency-sweep delay=50ms", "b2 leader-crash"}; !slices.Equal(commits, want) {
		t.Errorf("history holds %q, want %q", commits, want)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if _, err := Append(AppendOptions{File: h, Commit: "c3", Time: at, Inputs: []string{benchDir}}); err != nil {
		t.Fatal(err)
	}
	es, _ = ReadFile(h, false)
	if last := es[len(es)-1]; last.Commit != "c3" || !last.Time.Equal(at) {
		t.Errorf("--time: last entry %s at %s", last.Commit, last.Time)
	}

	_, err = Append(AppendOptions{File: h, Commit: "x", Inputs: []string{filepath.Join(dir, "nosuch.json")}})
	var ie *InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "nosuch.json") {
		t.Errorf("a missing results.json: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "bad.jsonl"), []byte("{}\n"), 0o644)
	if _, err := Append(AppendOptions{File: filepath.Join(dir, "bad.jsonl"), Commit: "x", Inputs: []string{benchDir}}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "bad.jsonl:1: time: missing") {
		t.Errorf("a bad history: %v", err)
	}
	t.Chdir(dir)
	if _, err := Append(AppendOptions{File: h, Inputs: []string{benchDir}}); !errors.As(err, &ie) || !strings.Contains(err.Error(), "--commit") {
		t.Errorf("no --commit outside a git work tree: %v", err)
	}
}

// FuzzParseLine: any line parses into an entry that writes and reads back
// as itself, or fails with one line.
func FuzzParseLine(f *testing.F) {
	for _, e := range seriesOf([]float64{450e6, 0}) {
		line, _ := FormatLine(&e)
		f.Add(line)
	}
	es := EntriesOf(resultstest.SampleFirstRuns(3), "abc", time.Time{})
	line, _ := FormatLine(&es[0])
	f.Add(line)
	f.Add([]byte(`{"time":"2026-01-02T03:04:05Z","commit":"c","topology":"t","scenario":"s","algorithm":"a","runs":1,"ok":0,"ttl_p50_ns":0,"ttl_mean_ns":0,"ttl_ns":[],"messages_mean":0,"messages":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		out, err := FormatLine(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseLine(out)
		if err != nil {
			t.Fatalf("%s does not read back: %v", out, err)
		}
		again, _ := FormatLine(back)
		if !bytes.Equal(out, again) {
			t.Fatalf("%s reads back as %s", out, again)
		}
		Analyze([]Entry{*e, *back}, defaultCheck())
	})
}
