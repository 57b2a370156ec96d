package history

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/wire/bounded"
)

// Entry is one line of a history file: one scenario and algorithm of one
// bench, measured at one commit.
type Entry struct {
	Time      time.Time `json:"time"`
	Commit    string    `json:"commit"`
	Topology  string    `json:"topology"`
	Scenario  string    `json:"scenario"`
	Algorithm string    `json:"algorithm"`
	Runs      int       `json:"runs"`
	OK        int       `json:"ok"`
	Partial   bool      `json:"partial,omitempty"`
	// TTLP50NS and TTLMeanNS are over the runs that passed, as the bench's
	// summary has them; TTLNS are those runs' times, in run order.
	TTLP50NS  int64   `json:"ttl_p50_ns"`
	TTLMeanNS int64   `json:"ttl_mean_ns"`
	TTLNS     []int64 `json:"ttl_ns"`
	// MessagesMean is the mean messages per election (HEARTBEATs left
	// out) over the runs that passed; Messages each run's.
	MessagesMean float64 `json:"messages_mean"`
	Messages     []int   `json:"messages"`
	// Settings are what the runs were measured with that can differ
	// between entries of one series: the topology's timings and the
	// scenario parameters given.
	Settings map[string]string `json:"settings,omitempty"`
}

// SeriesKey names the series the entry belongs to: topology, scenario key
// (name and labels) and algorithm.
func (e *Entry) SeriesKey() string {
	return e.Topology + " " + e.Scenario + " " + e.Algorithm
}

// MaxFileSize bounds a history file: a line of 30 runs takes about 1 KiB,
// so this holds tens of thousands of benches.
const MaxFileSize = 64 << 20

// FormatLine is e as one line of a history file, without the line break.
func FormatLine(e *Entry) ([]byte, error) {
	c := *e
	c.Time = c.Time.UTC()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// ParseLine reads one line of a history file; its errors name the field
// and say what is wrong, and File and Line are left for the caller.
func ParseLine(line []byte) (*Entry, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var e Entry
	if err := dec.Decode(&e); err != nil {
		return nil, lineError(err)
	}
	if dec.More() {
		return nil, &results.FileError{Msg: "more than one JSON value on the line"}
	}
	if err := e.validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

func lineError(err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return &results.FileError{Field: bounded.Clip(typ.Field, 80), Msg: fmt.Sprintf("want %s, got JSON %s", typ.Type, bounded.Clip(typ.Value, bounded.MaxQuoted))}
	}
	// time is the one field whose type decodes itself, and its errors do
	// not name it.
	var perr *time.ParseError
	if errors.As(err, &perr) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON") {
		return &results.FileError{Field: "time", Msg: "want an RFC 3339 time in a string, such as \"2026-11-27T20:30:00Z\""}
	}
	if errors.Is(err, io.EOF) {
		return &results.FileError{Msg: "empty"}
	}
	return &results.FileError{Msg: bounded.Clip(err.Error(), 120)}
}

func (e *Entry) validate() error {
	bad := func(field, format string, args ...any) error {
		return &results.FileError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case e.Time.IsZero():
		return bad("time", "missing")
	case e.Commit == "":
		return bad("commit", "missing")
	case strings.ContainsAny(e.Commit, " \t\r\n"):
		return bad("commit", "%s holds white space", bounded.Quote(e.Commit))
	case e.Topology == "":
		return bad("topology", "missing")
	case e.Scenario == "":
		return bad("scenario", "missing")
	case e.Algorithm == "":
		return bad("algorithm", "missing")
	case e.Runs < 1:
		return bad("runs", "%d, want 1 or more", e.Runs)
	case e.OK < 0 || e.OK > e.Runs:
		return bad("ok", "%d, want 0 to runs (%d)", e.OK, e.Runs)
	case len(e.TTLNS) != e.OK:
		return bad("ttl_ns", "%d times for %d passed runs", len(e.TTLNS), e.OK)
	case len(e.Messages) != e.OK:
		return bad("messages", "%d counts for %d passed runs", len(e.Messages), e.OK)
	case e.TTLP50NS < 0:
		return bad("ttl_p50_ns", "negative")
	case e.TTLMeanNS < 0:
		return bad("ttl_mean_ns", "negative")
	case e.MessagesMean < 0:
		return bad("messages_mean", "negative")
	case e.OK == 0 && (e.TTLP50NS != 0 || e.MessagesMean != 0):
		return bad("ok", "0 passed runs with a time to leader or messages")
	}
	for i, t := range e.TTLNS {
		if t < 0 {
			return bad(fmt.Sprintf("ttl_ns[%d]", i), "negative")
		}
	}
	for i, m := range e.Messages {
		if m < 0 {
			return bad(fmt.Sprintf("messages[%d]", i), "negative")
		}
	}
	return nil
}

// Parse reads a history file's contents; name is used in errors, which
// name the line: "name:line: field: what is wrong". Blank lines are
// skipped. Entries come back in the file's order (Sort orders them); two
// lines with the same time, commit and series must be identical, which
// is what a union merge of two branches that appended the same bench
// leaves, and are read as one.
func Parse(name string, data []byte) ([]Entry, error) {
	var out []Entry
	seen := map[string]int{}
	raw := map[string][]byte{}
	for n, line := range bytes.Split(data, []byte{'\n'}) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		e, err := ParseLine(line)
		if err != nil {
			var fe *results.FileError
			if errors.As(err, &fe) {
				fe.File, fe.Line = name, n+1
				return nil, fe
			}
			return nil, &results.FileError{File: name, Line: n + 1, Msg: err.Error()}
		}
		id := e.Time.UTC().Format(time.RFC3339Nano) + " " + e.Commit + " " + e.SeriesKey()
		if first, ok := seen[id]; ok {
			if !bytes.Equal(raw[id], line) {
				return nil, &results.FileError{File: name, Line: n + 1,
					Msg: fmt.Sprintf("%s at %s: also on line %d, with other values", e.SeriesKey(), e.Commit, first)}
			}
			continue
		}
		seen[id], raw[id] = n+1, line
		out = append(out, *e)
	}
	return out, nil
}

// ReadFile reads a history file; a missing file is an empty history when
// missingOK.
func ReadFile(path string, missingOK bool) ([]Entry, error) {
	data, err := bounded.ReadFile("history", path, MaxFileSize)
	if missingOK && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Sort orders entries by time, then commit, then series: the order a
// history file keeps, so that two branches that each appended lines merge
// line by line.
func Sort(entries []Entry) {
	slices.SortStableFunc(entries, func(a, b Entry) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Commit, b.Commit), cmp.Compare(a.SeriesKey(), b.SeriesKey()))
	})
}

// Write writes entries, sorted, one line each.
func Write(w io.Writer, entries []Entry) error {
	sorted := slices.Clone(entries)
	Sort(sorted)
	for i := range sorted {
		line, err := FormatLine(&sorted[i])
		if err != nil {
			return err
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// EntriesOf are the entries of one bench: one per scenario and
// algorithm. t is their time: the zero time takes the bench's (its end,
// else its start).
func EntriesOf(r *results.Results, commit string, t time.Time) []Entry {
	if t.IsZero() {
		t = r.Finished
		if t.IsZero() {
			t = r.Started
		}
	}
	settings := settingsOf(r)
	var out []Entry
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		s := results.Summarize(sc.Runs)
		e := Entry{Time: t.UTC(), Commit: commit, Topology: r.Topology.Name, Scenario: sc.ScenarioKey(),
			Algorithm: sc.AlgorithmName(), Runs: len(sc.Runs), OK: s.OK, Partial: r.Partial != nil,
			TTLP50NS: s.TimeToLeader.P50NS, TTLMeanNS: s.TimeToLeader.MeanNS, MessagesMean: s.MessagesTotal.Mean,
			TTLNS: []int64{}, Messages: []int{}, Settings: settings}
		for _, run := range sc.Runs {
			if !run.OK {
				continue
			}
			total := 0
			for _, n := range run.Messages {
				total += n
			}
			e.TTLNS = append(e.TTLNS, run.TimeToLeaderNS)
			e.Messages = append(e.Messages, total)
		}
		out = append(out, e)
	}
	return out
}

// settingsOf is what r was measured with that a history tells apart: the
// timings every node shared (a node's own as NODE.NAME), the scenario
// parameters given, the impairment backend.
func settingsOf(r *results.Results) map[string]string {
	s := map[string]string{}
	timing := func(prefix string, t results.Timing) {
		s[prefix+"heartbeat"] = time.Duration(t.HeartbeatNS).String()
		s[prefix+"failure_timeout"] = time.Duration(t.FailureTimeoutNS).String()
		s[prefix+"election_timeout"] = time.Duration(t.ElectionTimeoutNS).String()
		if t.DetectionStaggerNS != 0 {
			s[prefix+"detection_stagger"] = time.Duration(t.DetectionStaggerNS).String()
		}
	}
	timing("", r.Topology.Settings)
	for node, t := range r.Topology.NodeSettings {
		timing(node+".", t)
	}
	for k, v := range r.Settings.Params {
		s[k] = v
	}
	if r.Settings.Backend != "" {
		s["impair_backend"] = r.Settings.Backend
	}
	return s
}

// AppendOptions are `bullylab history append`'s.
type AppendOptions struct {
	// File is the history; it is created when missing.
	File string
	// Commit labels the entries; empty takes `git rev-parse HEAD` of the
	// working directory.
	Commit string
	// Time is the entries' time; zero takes each bench's own.
	Time time.Time
	// Inputs are results.json files or the bench directories holding
	// them.
	Inputs []string
}

// Validate checks what needs no file.
func (o *AppendOptions) Validate() error {
	switch {
	case o.File == "":
		return errors.New("--file: want the history file")
	case len(o.Inputs) == 0:
		return errors.New("want one or more results.json files or bench directories")
	case strings.ContainsAny(o.Commit, " \t\r\n"):
		return fmt.Errorf("--commit %s: holds white space", bounded.Quote(o.Commit))
	}
	return nil
}

// InputError is an input that cannot be used: a results.json or history
// that does not read, a commit that cannot be found.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Append adds the inputs' entries to the history file, which it rewrites
// sorted, and returns the entries added. An entry already there (the same
// time, commit and series, the same values) is not added twice.
func Append(opts AppendOptions) ([]Entry, error) {
	if err := opts.Validate(); err != nil {
		return nil, &InputError{err}
	}
	commit := opts.Commit
	if commit == "" {
		c, err := gitHead()
		if err != nil {
			return nil, &InputError{fmt.Errorf("--commit: not given, and %v", err)}
		}
		commit = c
	}
	entries, err := ReadFile(opts.File, true)
	if err != nil {
		return nil, &InputError{err}
	}
	var added []Entry
	for _, in := range opts.Inputs {
		path := in
		if st, err := os.Stat(in); err == nil && st.IsDir() {
			path = filepath.Join(in, "results.json")
		}
		r, err := results.ReadResults(path)
		if err != nil {
			return nil, &InputError{err}
		}
		added = append(added, EntriesOf(r, commit, opts.Time)...)
	}
	have := map[string]bool{}
	for i := range entries {
		line, err := FormatLine(&entries[i])
		if err != nil {
			return nil, err
		}
		have[string(line)] = true
	}
	var fresh []Entry
	for i := range added {
		line, err := FormatLine(&added[i])
		if err != nil {
			return nil, err
		}
		if !have[string(line)] {
			have[string(line)] = true
			fresh = append(fresh, added[i])
		}
	}
	all := append(entries, fresh...)
	// What is written must read back: an entry of the same time, commit
	// and series as one there, with other values, is refused here.
	var b bytes.Buffer
	if err := Write(&b, all); err != nil {
		return nil, err
	}
	if _, err := Parse(opts.File, b.Bytes()); err != nil {
		return nil, &InputError{err}
	}
	if err := writeFileAtomic(opts.File, all); err != nil {
		return nil, err
	}
	return fresh, nil
}

func writeFileAtomic(path string, entries []Entry) error {
	return results.WriteOutputFile(path, func(w io.Writer) error { return Write(w, entries) })
}

// gitHead is the commit checked out in the working directory.
func gitHead() (string, error) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", errors.New("`git rev-parse HEAD` found no commit here (not in a git work tree?)")
	}
	return strings.TrimSpace(string(out)), nil
}
