package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
)

// Bench is one bench's results in a report of several: Source is the
// results.json they were read from.
type Bench struct {
	Source  string
	Results *results.Results
}

// BenchesOptions are the inputs and output of WriteBenchesReport.
type BenchesOptions struct {
	// Inputs are results.json files, or the directories benches wrote
	// them to.
	Inputs []string
	// Out is the directory report.html goes to, made when missing.
	Out string
}

// WriteBenchesReport reads the benches opts.Inputs name (ReadBenches)
// and writes their report (WriteBenches) to opts.Out/report.html, whose
// path it returns. A bad input, or an opts.Out that holds one of the
// benches (its own report.html would go), is a *results.UnusableError.
func WriteBenchesReport(opts BenchesOptions) (string, error) {
	benches, err := ReadBenches(opts.Inputs)
	if err != nil {
		return "", err
	}
	for _, b := range benches {
		if sameDir(filepath.Dir(b.Source), opts.Out) {
			return "", &results.UnusableError{Err: fmt.Errorf("%s holds the bench %s, whose own report.html this one would replace: write it to another directory", opts.Out, b.Source)}
		}
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(opts.Out, "report.html")
	if err := results.WriteOutputFile(path, func(w io.Writer) error { return WriteBenches(w, benches) }); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

// ReadBenches reads each input, a results.json or a directory holding
// one, in order. Each must hold a leader-crash scenario, whose messages
// the report draws against N; an input that does not, or that is not a
// results.json, is a *results.UnusableError naming the file.
func ReadBenches(inputs []string) ([]Bench, error) {
	if len(inputs) == 0 {
		return nil, &results.UnusableError{Err: fmt.Errorf("no bench given: name the results.json of each, or its directory")}
	}
	var out []Bench
	for _, in := range inputs {
		path := in
		if st, err := os.Stat(in); err == nil && st.IsDir() {
			path = filepath.Join(in, "results.json")
		}
		r, err := results.ReadResults(path)
		if err != nil {
			return nil, &results.UnusableError{Err: err}
		}
		if !slices.ContainsFunc(r.Scenarios, func(sc results.ScenarioResult) bool { return isLeaderCrash(&sc) }) {
			return nil, &results.UnusableError{Err: fmt.Errorf("%s: no %s scenario (%s), and the report draws the messages of leader crashes against N",
				path, leaderCrashScenario, strings.Join(scenarioKeys(r), ", "))}
		}
		r.Summarize()
		out = append(out, Bench{Source: path, Results: r})
	}
	return out, nil
}

// sameDir says whether a and b name one directory.
func sameDir(a, b string) bool {
	if sa, err := os.Stat(a); err == nil {
		if sb, err := os.Stat(b); err == nil {
			return os.SameFile(sa, sb)
		}
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// scenarioKeys name r's scenarios, at most maxKeysNamed of them.
func scenarioKeys(r *results.Results) []string {
	var keys []string
	for i := range r.Scenarios {
		if k := r.Scenarios[i].Key(); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	switch {
	case len(keys) == 0:
		return []string{"none"}
	case len(keys) > maxKeysNamed:
		return append(keys[:maxKeysNamed:maxKeysNamed], fmt.Sprintf("%d more", len(keys)-maxKeysNamed))
	}
	return keys
}

// maxKeysNamed keeps the error of a bench of many scenarios one short line.
const maxKeysNamed = 5

type benchesSection struct {
	Bench
	Rows []benchesRow
}

type benchesRow struct {
	Scenario, Algorithm string
	Summary             results.Summary
}

// benchesPoint is a point of the messages-against-N chart as its table
// lists it, with the closed form to compare.
type benchesPoint struct {
	MessagesPoint
	Topologies string
	ClosedForm int
	HasClosed  bool
}

type benchesData struct {
	Title    string
	Benches  []benchesSection
	Messages template.HTML
	Points   []benchesPoint
	// NoPoint are the benches none of whose leader-crash runs passed.
	NoPoint []string
	// TriggerWindow is as in reportData, for the shared definitions.
	TriggerWindow string
}

// WriteBenches writes one self-contained page of several benches, of
// different topologies as a rule: the mean messages of their leader-crash
// elections against N per algorithm over the closed forms
// (MessagesByNSVG), those points as a table, and per bench the summary of
// its scenarios with the algorithms side by side: runs and failed, time to
// leader p50 and p95, detection p50, messages per election by type.
func WriteBenches(w io.Writer, benches []Bench) error {
	d := benchesData{TriggerWindow: capture.DefaultTriggerWindow.String()}
	var names []string
	var rs []*results.Results
	for _, b := range benches {
		r := b.Results
		rs = append(rs, r)
		names = append(names, r.Topology.Name)
		sec := benchesSection{Bench: b}
		for i := range r.Scenarios {
			sc := &r.Scenarios[i]
			s := sc.Summary
			if s.Runs == 0 && len(sc.Runs) > 0 {
				s = results.Summarize(sc.Runs)
			}
			sec.Rows = append(sec.Rows, benchesRow{Scenario: sc.ScenarioKey(), Algorithm: sc.AlgorithmName(), Summary: s})
		}
		d.Benches = append(d.Benches, sec)
		if len(MessagesPoints(r)) == 0 {
			d.NoPoint = append(d.NoPoint, b.Source)
		}
	}
	d.Title = strings.Join(names, ", ")
	pts := MessagesPoints(rs...)
	d.Messages = template.HTML(MessagesByNSVG(pts))
	for _, p := range pts {
		bp := benchesPoint{MessagesPoint: p}
		var tops []string
		for _, r := range rs {
			if r.Topology.Nodes == p.N && !slices.Contains(tops, r.Topology.Name) {
				tops = append(tops, r.Topology.Name)
			}
		}
		bp.Topologies = strings.Join(tops, ", ")
		bp.ClosedForm, bp.HasClosed = LeaderCrashMessages(p.Algorithm, p.N)
		d.Points = append(d.Points, bp)
	}
	return reportTmpl().ExecuteTemplate(w, "benches", d)
}

// isLeaderCrash says whether sc is a leader crash the closed forms
// count: the built-in scenario, no label varied.
func isLeaderCrash(sc *results.ScenarioResult) bool {
	return sc.Name == leaderCrashScenario && len(sc.Labels) == 0
}
