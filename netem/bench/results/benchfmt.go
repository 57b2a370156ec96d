package results

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire/bounded"
)

// The Go benchmark format (golang.org/design/14313-benchmark-format, as
// golang.org/x/perf/benchfmt reads it), which bench.txt follows:
//
//   - A configuration line is "key: value"; key starts with a lower-case
//     letter and holds no space and no upper-case letter. It applies to
//     every result after it until the key comes again.
//   - A result line is "BenchmarkNAME ITERATIONS VALUE UNIT [VALUE UNIT...]"
//     split on white space; iterations is an integer, values are floats.
//     NAME's "/key=value" parts are per-benchmark configuration, and a
//     trailing "-N" is read as GOMAXPROCS.
//   - "Unit UNIT key=value..." gives unit metadata such as better=lower.
//   - Every other line (blank, "#...", "PASS") is ignored.
//
// benchstat groups results into tables by all file configuration keys, so
// bench.txt keeps to the ones that stay put between two benches of one
// machine (goos, goarch, pkg, cpu); versions and seeds go in comments, or
// `benchstat old.txt new.txt` would print two tables and compare nothing.

// BenchPackage is the pkg: bench.txt names.
const BenchPackage = "github.com/bullylab/bullylab"

// Units of bench.txt. Time to leader is ns/op, which benchstat knows to
// show as sec/op; message counts per type are TYPE-msgs/op, lower case.
const (
	UnitTimeToLeader = "ns/op"
	UnitDetection    = "detection-ns/op"
	UnitMessages     = "msgs/op"
	msgsSuffix       = "-msgs/op"
)

// MessageUnit is the unit of a message type's count.
func MessageUnit(typ string) string { return strings.ToLower(typ) + msgsSuffix }

// BenchName is the benchmark name of a scenario's runs:
// BenchmarkElection/topology=T/scenario=S/algorithm=A, then the labels in
// key order. The algorithm is always named, so that `benchstat -col
// /algorithm` sets the algorithms side by side; a name without it, from a
// bench.txt before there was a choice, is Bully's.
func BenchName(topology string, sc *ScenarioResult) string {
	var b strings.Builder
	b.WriteString("BenchmarkElection/topology=" + nameValue(topology) + "/scenario=" + nameValue(sc.Name) +
		"/" + AlgorithmKey + "=" + nameValue(sc.AlgorithmName()))
	keys := make([]string, 0, len(sc.Labels))
	for k := range sc.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("/" + nameValue(k) + "=" + nameValue(sc.Labels[k]))
	}
	name := b.String()
	// A name ending in -digits has them read as GOMAXPROCS.
	if i := strings.LastIndexByte(name, '-'); i > 0 && i < len(name)-1 && strings.Trim(name[i+1:], "0123456789") == "" {
		name = name[:i] + "_" + name[i+1:]
	}
	return name
}

// AlgorithmKey is the benchmark name's key of the algorithm.
const AlgorithmKey = "algorithm"

// nameValue keeps a name part to what benchmark names can carry: no white
// space (it ends the name), no '/' or '=' (they split it).
func nameValue(s string) string {
	if s == "" {
		return "_"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '/' || r == '=' {
			return '_'
		}
		return r
	}, s)
}

// WriteBenchText writes r as bench.txt: one result line per run that
// passed, so that benchstat sees every run and computes the distribution;
// failed runs as "# failed" comments that benchstat skips and
// ParseBenchText reads back.
func WriteBenchText(w io.Writer, r *Results) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# bullylab bench: %s %s (%s), topology %s (%d nodes), seed %d, %d runs per scenario\n",
		orDash(r.Tool.Name), orDash(r.Tool.Version), orDash(r.Tool.GoVersion), r.Topology.Name, r.Topology.Nodes, r.Seed, r.Settings.Runs)
	fmt.Fprintf(bw, "# results.json beside this file has everything (%s); compare two of these with: benchstat old.txt new.txt\n", Schema)
	goos, goarch := r.Host.OS, r.Host.Arch
	if goos == "" {
		goos, goarch = runtime.GOOS, runtime.GOARCH
	}
	fmt.Fprintf(bw, "goos: %s\ngoarch: %s\npkg: %s\n", configValue(goos), configValue(goarch), BenchPackage)
	if r.Host.CPU != "" {
		fmt.Fprintf(bw, "cpu: %s\n", configValue(r.Host.CPU))
	}
	units := []string{UnitDetection, UnitMessages}
	for _, sc := range r.Scenarios {
		for _, t := range messageTypes(sc.Runs) {
			if u := MessageUnit(t); !slices.Contains(units, u) {
				units = append(units, u)
			}
		}
	}
	for _, u := range units {
		fmt.Fprintf(bw, "Unit %s better=lower\n", u)
	}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		name := BenchName(r.Topology.Name, sc)
		types := messageTypes(sc.Runs)
		for _, run := range sc.Runs {
			if !run.OK {
				fmt.Fprintf(bw, "# failed %s run %d %s: %s\n", name, run.Index, nameValue(run.FailureKind), oneLine(run.Failure))
				continue
			}
			fmt.Fprintf(bw, "%s 1 %d %s", name, run.TimeToLeaderNS, UnitTimeToLeader)
			if run.DetectionNS != nil {
				fmt.Fprintf(bw, " %d %s", *run.DetectionNS, UnitDetection)
			}
			total := 0
			for _, t := range types {
				total += run.Messages[t]
			}
			fmt.Fprintf(bw, " %d %s", total, UnitMessages)
			for _, t := range types {
				fmt.Fprintf(bw, " %d %s", run.Messages[t], MessageUnit(t))
			}
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// configValue keeps a configuration value to one line.
func configValue(s string) string { return oneLine(strings.TrimSpace(s)) }

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// BenchText is a parsed Go benchmark file.
type BenchText struct {
	Config  []ConfigLine // file configuration, in file order; later lines override
	Results []BenchResult
	Units   map[string]map[string]string // unit -> key -> value
	Failed  []BenchFailure               // bullylab's "# failed" comments
}

// ConfigLine is one configuration line.
type ConfigLine struct{ Key, Value string }

// BenchResult is one result line.
type BenchResult struct {
	Line   int
	Name   string // full name, "Benchmark" included
	Iters  int
	Values []BenchValue
	// Config is the file configuration in force at this line.
	Config map[string]string
}

// BenchValue is one value/unit pair.
type BenchValue struct {
	Value float64
	Unit  string
}

// Value returns the value of unit.
func (r *BenchResult) Value(unit string) (float64, bool) {
	for _, v := range r.Values {
		if v.Unit == unit {
			return v.Value, true
		}
	}
	return 0, false
}

// BenchFailure is a failed run bench.txt records as a comment.
type BenchFailure struct {
	Line   int
	Name   string
	Run    int
	Kind   string
	Reason string
}

// maxBenchLine bounds one line; a result line of every message type is
// well under 1 KiB.
const maxBenchLine = 1 << 20

// ParseBenchText parses the Go benchmark format as the rules above state
// them. Unlike benchfmt, which reports a malformed result line and goes
// on, it stops at the first one: a bench.txt that bullylab wrote has none.
// Errors are one line: "name:line: what is wrong".
func ParseBenchText(name string, data []byte) (*BenchText, error) {
	bt := &BenchText{Units: map[string]map[string]string{}}
	config := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), maxBenchLine)
	lineNo := 0
	fail := func(format string, args ...any) error {
		return &FileError{File: name, Line: lineNo, Msg: fmt.Sprintf(format, args...)}
	}
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if !utf8.ValidString(line) {
			return nil, fail("not UTF-8")
		}
		switch {
		case strings.HasPrefix(line, "Benchmark"):
			f := strings.Fields(line)
			if len(f) < 4 || len(f)%2 != 0 {
				return nil, fail("result line has %d fields, want an even number, at least 4", len(f))
			}
			iters, err := strconv.Atoi(f[1])
			if err != nil || iters < 0 {
				return nil, fail("iteration count %s is not a count", bounded.Quote(f[1]))
			}
			res := BenchResult{Line: lineNo, Name: f[0], Iters: iters, Config: map[string]string{}}
			for k, v := range config {
				res.Config[k] = v
			}
			for i := 2; i < len(f); i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fail("value %s of unit %s is not a number", bounded.Quote(f[i]), bounded.Clip(f[i+1], bounded.MaxQuoted))
				}
				res.Values = append(res.Values, BenchValue{Value: v, Unit: f[i+1]})
			}
			bt.Results = append(bt.Results, res)
		case strings.HasPrefix(line, "Unit ") || strings.HasPrefix(line, "Unit\t"):
			f := strings.Fields(line)
			if len(f) < 2 {
				return nil, fail("unit line names no unit")
			}
			for _, kv := range f[2:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return nil, fail("unit metadata %s is not key=value", bounded.Quote(kv))
				}
				if bt.Units[f[1]] == nil {
					bt.Units[f[1]] = map[string]string{}
				}
				bt.Units[f[1]][k] = v
			}
		case strings.HasPrefix(line, "# failed "):
			bf, ok := parseFailed(line)
			if !ok {
				return nil, fail("malformed failure comment")
			}
			bf.Line = lineNo
			bt.Failed = append(bt.Failed, bf)
		default:
			if k, v, ok := configLine(line); ok {
				if v == "" {
					delete(config, k)
				} else {
					config[k] = v
				}
				bt.Config = append(bt.Config, ConfigLine{Key: k, Value: v})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &FileError{File: name, Line: lineNo + 1, Msg: err.Error()}
	}
	return bt, nil
}

// configLine reads "key: value" by the format's rules.
func configLine(line string) (key, value string, ok bool) {
	i := strings.IndexByte(line, ':')
	if i <= 0 {
		return "", "", false
	}
	key = line[:i]
	for j, r := range key {
		if j == 0 && !unicode.IsLower(r) || unicode.IsSpace(r) || unicode.IsUpper(r) {
			return "", "", false
		}
	}
	rest := line[i+1:]
	if rest == "" {
		return key, "", true
	}
	if rest[0] != ' ' && rest[0] != '\t' {
		return "", "", false
	}
	return key, strings.TrimLeft(rest, " \t"), true
}

// parseFailed reads "# failed NAME run N KIND: REASON".
func parseFailed(line string) (BenchFailure, bool) {
	rest := strings.TrimPrefix(line, "# failed ")
	head, reason, ok := strings.Cut(rest, ": ")
	if !ok {
		head, reason = strings.TrimSuffix(rest, ":"), ""
	}
	f := strings.Fields(head)
	if len(f) != 4 || f[1] != "run" || !strings.HasPrefix(f[0], "Benchmark") {
		return BenchFailure{}, false
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 1 {
		return BenchFailure{}, false
	}
	return BenchFailure{Name: f[0], Run: n, Kind: f[3], Reason: reason}, true
}

// NameParts splits a benchmark name as benchfmt does: the base, then
// "/key=value" parts (a part without '=' is kept under its position,
// "#1", "#2"...), after setting aside a trailing "-N" GOMAXPROCS.
func NameParts(name string) (base string, keys []string, values map[string]string) {
	if i := strings.LastIndexByte(name, '-'); i > 0 && i < len(name)-1 && strings.Trim(name[i+1:], "0123456789") == "" {
		name = name[:i]
	}
	parts := strings.Split(name, "/")
	values = map[string]string{}
	for i, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			k, v = "#"+strconv.Itoa(i+1), p
		}
		if _, dup := values[k]; !dup {
			keys = append(keys, k)
		}
		values[k] = v
	}
	return parts[0], keys, values
}

// ResultsFromBenchText rebuilds the comparable part of results from
// bench.txt: topology and scenarios from the names, runs from the lines,
// failed runs from the "# failed" comments.
func ResultsFromBenchText(name string, bt *BenchText) (*Results, error) {
	r := &Results{Schema: Schema}
	byKey := map[string]*ScenarioResult{}
	var order []string
	scenarioOf := func(line int, full string) (*ScenarioResult, error) {
		base, keys, values := NameParts(full)
		if base != "BenchmarkElection" {
			return nil, nil // someone else's benchmark: ignored
		}
		topo, scName := values["topology"], values["scenario"]
		if topo == "" || scName == "" {
			return nil, &FileError{File: name, Line: line, Msg: fmt.Sprintf("%s names no topology= or scenario=", bounded.Clip(full, bounded.MaxQuoted))}
		}
		if r.Topology.Name == "" {
			r.Topology.Name = topo
		} else if topo != r.Topology.Name {
			return nil, &FileError{File: name, Line: line, Msg: fmt.Sprintf("topology %s, but earlier lines are %s",
				bounded.Clip(topo, bounded.MaxQuoted), bounded.Clip(r.Topology.Name, bounded.MaxQuoted))}
		}
		labels := map[string]string{}
		for _, k := range keys {
			if k != "topology" && k != "scenario" && k != AlgorithmKey {
				labels[k] = values[k]
			}
		}
		if len(labels) == 0 {
			labels = nil
		}
		algorithm := values[AlgorithmKey]
		if algorithm == "" {
			algorithm = topologies.DefaultAlgorithm
		}
		sc := &ScenarioResult{Name: scName, Labels: labels, Algorithm: algorithm}
		if have, ok := byKey[sc.Key()]; ok {
			return have, nil
		}
		byKey[sc.Key()] = sc
		order = append(order, sc.Key())
		return sc, nil
	}
	for _, res := range bt.Results {
		sc, err := scenarioOf(res.Line, res.Name)
		if err != nil {
			return nil, err
		}
		if sc == nil {
			continue
		}
		run := Run{Index: len(sc.Runs) + 1, OK: true, Messages: map[string]int{}}
		ttl, ok := res.Value(UnitTimeToLeader)
		if !ok || ttl < 0 {
			return nil, &FileError{File: name, Line: res.Line, Msg: "no time to leader (" + UnitTimeToLeader + ")"}
		}
		run.TimeToLeaderNS = int64(ttl)
		if d, ok := res.Value(UnitDetection); ok {
			ns := int64(d)
			run.DetectionNS = &ns
		}
		for _, v := range res.Values {
			if t, ok := strings.CutSuffix(v.Unit, msgsSuffix); ok && t != "" {
				run.Messages[strings.ToUpper(t)] = int(v.Value)
			}
		}
		sc.Runs = append(sc.Runs, run)
	}
	for _, f := range bt.Failed {
		sc, err := scenarioOf(f.Line, f.Name)
		if err != nil {
			return nil, err
		}
		if sc == nil {
			continue
		}
		sc.Runs = append(sc.Runs, Run{Index: len(sc.Runs) + 1, FailureKind: f.Kind, Failure: f.Reason})
	}
	if len(order) == 0 {
		return nil, &FileError{File: name, Msg: "no BenchmarkElection results"}
	}
	for _, k := range order {
		r.Scenarios = append(r.Scenarios, *byKey[k])
	}
	r.Summarize()
	return r, nil
}
