package results

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire/bounded"
)

// Verdict is the outcome of a comparison, as `bullylab compare` exits.
type Verdict int

const (
	Pass      Verdict = 0 // no metric regressed beyond the threshold
	Regressed Verdict = 1 // some metric did
	Unusable  Verdict = 2 // the inputs cannot be compared
)

func (v Verdict) String() string {
	switch v {
	case Pass:
		return "pass"
	case Regressed:
		return "regressed"
	case Unusable:
		return "unusable"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// ExitCode is the process exit status for v.
func (v Verdict) ExitCode() int { return int(v) }

// UnusableError says why two inputs cannot be compared: an unreadable
// file, another schema, another topology or other scenarios.
type UnusableError struct{ Err error }

func (e *UnusableError) Error() string { return e.Err.Error() }

func (e *UnusableError) Unwrap() error { return e.Err }

func unusable(format string, args ...any) error {
	return &UnusableError{Err: fmt.Errorf(format, args...)}
}

// VerdictOf maps Compare's outcome to a verdict: Unusable for any error.
func VerdictOf(c *Comparison, err error) Verdict {
	if err != nil || c == nil {
		return Unusable
	}
	return c.Verdict()
}

// CompareOptions tune Compare.
type CompareOptions struct {
	// MaxRegress is the largest relative growth of a metric that is not a
	// regression, as a fraction: 0.10 for --max-regress 10%.
	MaxRegress float64
	// MinTime and MinMessages are absolute floors: a change smaller than
	// them is noise whatever its relative size. A mean of 0.03 REJECTs
	// growing to 0.07 is +133% and means one more REJECT in 30 runs.
	// Zero means 1ms and 0.5 messages.
	MinTime     time.Duration
	MinMessages float64
	// Alpha sets the confidence of each row's interval, 1 - Alpha: a
	// change is a regression (or an improvement) only when the bootstrap
	// interval of its difference excludes zero. Zero means DefaultAlpha.
	Alpha float64
}

// DefaultAlpha is compare's significance level: 95% intervals.
const DefaultAlpha = 0.05

// ParseThreshold reads --max-regress: a percentage with its sign ("10%",
// "2.5%"), from 0% up to 1000%. A bare number is refused: "0.01" could
// mean 1% or 0.01%.
func ParseThreshold(s string) (float64, error) {
	t := strings.TrimSpace(s)
	num, ok := strings.CutSuffix(t, "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	switch {
	case !ok && err == nil:
		n := strings.TrimSpace(num)
		return 0, fmt.Errorf("--max-regress %s: a bare number is ambiguous: write %s%% for the fraction %s, or %s%%", bounded.Quote(s),
			strconv.FormatFloat(f*100, 'g', -1, 64), n, n)
	case !ok || err != nil || !(f >= 0 && f <= 1000):
		return 0, fmt.Errorf("--max-regress %s: want a percentage from 0%% to 1000%%, such as 10%%", bounded.Quote(s))
	}
	return f / 100, nil
}

// ChangeStatus is what a metric's change amounts to.
type ChangeStatus string

const (
	Same        ChangeStatus = "~"         // within the threshold or the noise floor
	Improved    ChangeStatus = "improved"  // shrank beyond the threshold
	Regression  ChangeStatus = "REGRESSED" // grew beyond the threshold
	Unavailable ChangeStatus = "n/a"       // one side has no value (no run passed)
)

// Change is one metric of one scenario in both inputs. Every metric is
// lower-is-better.
type Change struct {
	Scenario string
	Metric   string
	Unit     string // "ns", "msgs", "changes" (leader changes) or "runs"
	Base     float64
	New      float64
	// HasBase and HasNew are false when that side has no value.
	HasBase, HasNew bool
	// Delta is New-Base relative to Base: +0.25 for 25% more, +Inf when
	// Base is 0 and New is not.
	Delta  float64
	Status ChangeStatus
	// Runs of each side, for failed runs: Base and New count failures.
	BaseRuns, NewRuns int
	// BaseN and NewN are the runs behind Base and New (those that passed
	// and measured the metric).
	BaseN, NewN int
	// Interval is the bootstrap interval of the difference of the
	// statistic the row shows (its percentile, its mean) between the two
	// sides' runs, nil when there is none: failed runs, a side with fewer
	// than BootstrapMinRuns values.
	Interval *Interval
}

// Comparison is the result of Compare.
type Comparison struct {
	Base, New  string // input names
	Topology   string
	MaxRegress float64
	Alpha      float64
	Changes    []Change
	// Notes are differences that do not prevent comparing, such as other
	// timings or another seed, and the Partial warnings first.
	Notes []string
	// Partial says, one line per side, which input is a partial bench
	// (Results.Partial): its runs are those that finished before it
	// stopped, fewer than planned. `bullylab compare` warns of them.
	Partial []string
}

// Verdict is Regressed when some change is a regression.
func (c *Comparison) Verdict() Verdict {
	if len(c.Regressions()) > 0 {
		return Regressed
	}
	return Pass
}

// Regressions returns the changes that regressed.
func (c *Comparison) Regressions() []Change {
	var out []Change
	for _, ch := range c.Changes {
		if ch.Status == Regression {
			out = append(out, ch)
		}
	}
	return out
}

// LoadComparable reads results.json or bench.txt, told apart by their
// first non-blank byte: '{' starts JSON.
func LoadComparable(path string) (*Results, error) {
	data, err := bounded.ReadFile("results", path, MaxResultsSize)
	if err != nil {
		return nil, &UnusableError{Err: err}
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		r, err := DecodeResults(path, data)
		if err != nil {
			return nil, &UnusableError{Err: err}
		}
		r.Summarize()
		return r, nil
	}
	bt, err := ParseBenchText(path, data)
	if err != nil {
		return nil, &UnusableError{Err: err}
	}
	r, err := ResultsFromBenchText(path, bt)
	if err != nil {
		return nil, &UnusableError{Err: err}
	}
	return r, nil
}

// CompareFiles compares two results.json or bench.txt files.
func CompareFiles(basePath, newPath string, opts CompareOptions) (*Comparison, error) {
	base, err := LoadComparable(basePath)
	if err != nil {
		return nil, err
	}
	nw, err := LoadComparable(newPath)
	if err != nil {
		return nil, err
	}
	return Compare(basePath, base, newPath, nw, opts)
}

// Compare compares the summaries of two benches of one topology and one
// set of scenarios; anything else is an *UnusableError naming what
// differs. Summaries are recomputed from the runs.
func Compare(baseName string, base *Results, newName string, nw *Results, opts CompareOptions) (*Comparison, error) {
	if opts.MinTime == 0 {
		opts.MinTime = time.Millisecond
	}
	if opts.MinMessages == 0 {
		opts.MinMessages = 0.5
	}
	if math.IsNaN(opts.MaxRegress) || opts.MaxRegress < 0 {
		return nil, errors.New("compare: negative threshold")
	}
	if base.Topology.Name != nw.Topology.Name {
		return nil, unusable("different topologies: %s is %s, %s is %s; %s", baseName, clip(base.Topology.Name), newName, clip(nw.Topology.Name),
			DiffersLine(baseName, base, newName, nw))
	}
	if b, n := base.Topology.Nodes, nw.Topology.Nodes; b > 0 && n > 0 && b != n {
		return nil, unusable("topology %s has %d nodes in %s and %d in %s; %s", clip(base.Topology.Name), b, baseName, n, newName,
			DiffersLine(baseName, base, newName, nw))
	}
	if opts.Alpha == 0 {
		opts.Alpha = DefaultAlpha
	}
	if !(opts.Alpha > 0 && opts.Alpha < 1) {
		return nil, fmt.Errorf("compare: significance level %g is not in (0, 1)", opts.Alpha)
	}
	c := &Comparison{Base: baseName, New: newName, Topology: base.Topology.Name, MaxRegress: opts.MaxRegress, Alpha: opts.Alpha}
	keyOf := (*ScenarioResult).Key
	ba, na := base.Algorithms(), nw.Algorithms()
	if len(ba) == 1 && len(na) == 1 && ba[0] != na[0] {
		// One algorithm against another: the same scenarios, contrasted.
		keyOf = (*ScenarioResult).ScenarioKey
	}
	baseByKey := map[string]*ScenarioResult{}
	newByKey := map[string]*ScenarioResult{}
	for i := range base.Scenarios {
		baseByKey[keyOf(&base.Scenarios[i])] = &base.Scenarios[i]
	}
	for i := range nw.Scenarios {
		newByKey[keyOf(&nw.Scenarios[i])] = &nw.Scenarios[i]
	}
	var onlyBase, onlyNew []string
	for k := range baseByKey {
		if newByKey[k] == nil {
			onlyBase = append(onlyBase, k)
		}
	}
	for k := range newByKey {
		if baseByKey[k] == nil {
			onlyNew = append(onlyNew, k)
		}
	}
	if len(onlyBase)+len(onlyNew) > 0 {
		slices.Sort(onlyBase)
		slices.Sort(onlyNew)
		var parts []string
		if len(onlyBase) > 0 {
			parts = append(parts, fmt.Sprintf("only in %s: %s", baseName, clipList(onlyBase)))
		}
		if len(onlyNew) > 0 {
			parts = append(parts, fmt.Sprintf("only in %s: %s", newName, clipList(onlyNew)))
		}
		return nil, unusable("different scenarios: %s", strings.Join(parts, "; "))
	}
	for _, side := range []struct {
		name string
		r    *Results
	}{{baseName, base}, {newName, nw}} {
		if p := side.r.Partial; p != nil {
			c.Partial = append(c.Partial, fmt.Sprintf("%s is partial: %s after %d of %d runs", side.name, clip(oneLine(p.Reason)), p.RunsDone, p.RunsPlanned))
		}
	}
	c.Notes = append(slices.Clone(c.Partial), notes(baseName, base, newName, nw)...)

	for i := range base.Scenarios {
		sb := &base.Scenarios[i]
		key := keyOf(sb)
		sn := newByKey[key]
		if len(sb.Runs) == 0 {
			return nil, unusable("scenario %s has no runs in %s", clip(key), baseName)
		}
		if len(sn.Runs) == 0 {
			return nil, unusable("scenario %s has no runs in %s", clip(key), newName)
		}
		c.Changes = append(c.Changes, scenarioChanges(key, sb.Runs, sn.Runs, opts)...)
		if note := fewRunsNote(key, sb.Runs, sn.Runs); note != "" {
			c.Notes = append(c.Notes, note)
		}
	}
	return c, nil
}

// clip cuts a name from an input short for an error.
func clip(s string) string { return bounded.Clip(s, bounded.MaxQuoted) }

// maxListed is how many names an error lists.
const maxListed = 10

// clipList lists names for an error: at most maxListed, each cut short.
func clipList(names []string) string {
	var parts []string
	for i, n := range names {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-maxListed))
			break
		}
		parts = append(parts, clip(n))
	}
	return strings.Join(parts, ", ")
}

func notes(baseName string, base *Results, newName string, nw *Results) []string {
	var out []string
	note := func(what, b, n string) {
		if b != n && b != "" && n != "" {
			out = append(out, fmt.Sprintf("%s differs: %s in %s, %s in %s", what, b, baseName, n, newName))
		}
	}
	note("algorithm", strings.Join(base.Algorithms(), ","), strings.Join(nw.Algorithms(), ","))
	if d := DiffersLine(baseName, base, newName, nw); d != "" {
		out = append(out, d)
	}
	if base.Tool.Name != "" && nw.Tool.Name != "" { // bench.txt keeps no seed
		note("seed", strconv.FormatInt(base.Seed, 10), strconv.FormatInt(nw.Seed, 10))
	}
	note("version", base.Tool.Version, nw.Tool.Version)
	note("impairment backend", base.Settings.Backend, nw.Settings.Backend)
	note("kernel", base.Host.Kernel, nw.Host.Kernel)
	return out
}

func scenarioChanges(key string, baseRuns, newRuns []Run, opts CompareOptions) []Change {
	b, n := Summarize(baseRuns), Summarize(newRuns)
	var out []Change
	timeFloor := float64(opts.MinTime)
	// Each metric's test is of its family's per-run values: the time to
	// leader percentiles all of the runs' times to leader, and so on.
	family := func(metric string) func(Run) (float64, bool) {
		if get := availabilityFamily(metric); get != nil {
			return get
		}
		switch {
		case strings.HasPrefix(metric, "time to leader"):
			return func(r Run) (float64, bool) { return float64(r.TimeToLeaderNS), true }
		case strings.HasPrefix(metric, "detection"):
			return func(r Run) (float64, bool) {
				if r.DetectionNS == nil {
					return 0, false
				}
				return float64(*r.DetectionNS), true
			}
		case metric == "messages mean":
			return func(r Run) (float64, bool) {
				total := 0
				for _, v := range r.Messages {
					total += v
				}
				return float64(total), true
			}
		}
		typ := strings.TrimSuffix(metric, " mean")
		return func(r Run) (float64, bool) { return float64(r.Messages[typ]), true }
	}
	add := func(metric, unit string, bv, nv float64, hb, hn bool, floor float64) {
		ch := Change{Scenario: key, Metric: metric, Unit: unit, Base: bv, New: nv, HasBase: hb, HasNew: hn}
		get := family(metric)
		bs, ns := passedValues(baseRuns, get), passedValues(newRuns, get)
		ch.BaseN, ch.NewN = len(bs), len(ns)
		significant := false
		if iv, ok := BootstrapInterval(bs, ns, statOf(metric), opts.Alpha, key+"\x00"+metric); ok {
			ch.Interval = &iv
			significant = iv.Excludes0()
		}
		ch.Delta, ch.Status = judge(bv, nv, hb && hn, floor, opts.MaxRegress)
		if !significant && (ch.Status == Regression || ch.Status == Improved) {
			ch.Status = Same
		}
		out = append(out, ch)
	}
	hb, hn := b.OK > 0, n.OK > 0
	for _, p := range TimePercentiles {
		bt, nt := b.TimeToLeader, n.TimeToLeader
		if !pctComparable(p.Name, bt, nt, hb, hn) {
			continue
		}
		add("time to leader "+p.Name, "ns", float64(p.Of(&bt)), float64(p.Of(&nt)), hb, hn, timeFloor)
	}
	if b.Detection != nil || n.Detection != nil {
		var bd, nd Dist
		if b.Detection != nil {
			bd = *b.Detection
		}
		if n.Detection != nil {
			nd = *n.Detection
		}
		add("detection p50", "ns", float64(bd.P50NS), float64(nd.P50NS), b.Detection != nil, n.Detection != nil, timeFloor)
		if pctComparable("p95", bd, nd, b.Detection != nil, n.Detection != nil) {
			add("detection p95", "ns", float64(bd.P95NS), float64(nd.P95NS), b.Detection != nil, n.Detection != nil, timeFloor)
		}
	}
	availabilityChanges(b, n, add, timeFloor)
	add("messages mean", "msgs", b.MessagesTotal.Mean, n.MessagesTotal.Mean, hb, hn, opts.MinMessages)
	types := map[string]bool{}
	for t := range b.Messages {
		types[t] = true
	}
	for t := range n.Messages {
		types[t] = true
	}
	for _, t := range SortMessageTypes(types) {
		if b.Messages[t].Max == 0 && n.Messages[t].Max == 0 {
			continue // a type neither bench's elections sent: a row of zeros
		}
		add(t+" mean", "msgs", b.Messages[t].Mean, n.Messages[t].Mean, hb, hn, opts.MinMessages)
	}

	// Failed runs are not noise: any larger share of them regresses.
	fb, fn := float64(b.Failed)/float64(b.Runs), float64(n.Failed)/float64(n.Runs)
	ch := Change{Scenario: key, Metric: "failed runs", Unit: "runs", Base: float64(b.Failed), New: float64(n.Failed),
		HasBase: true, HasNew: true, BaseRuns: b.Runs, NewRuns: n.Runs, Status: Same}
	ch.Delta = relative(fb, fn)
	switch {
	case fn > fb:
		ch.Status = Regression
	case fn < fb:
		ch.Status = Improved
	}
	return append(out, ch)
}

// passedValues are get's values of the runs that passed.
func passedValues(runs []Run, get func(Run) (float64, bool)) []float64 {
	var out []float64
	for _, r := range runs {
		if !r.OK {
			continue
		}
		if v, ok := get(r); ok {
			out = append(out, v)
		}
	}
	return out
}

// statOf is the statistic of a metric's row: the percentile its name
// ends in, the max, or the mean.
func statOf(metric string) rowStat {
	last := metric[strings.LastIndex(metric, " ")+1:]
	switch {
	case last == "max":
		return percentileStat(100)
	case strings.HasPrefix(last, "p"):
		if p, err := strconv.ParseFloat(last[1:], 64); err == nil && p > 0 && p <= 100 {
			return percentileStat(p)
		}
	}
	return meanStat
}

// fewRunsNote says so when scenario key has too few passed runs on a side
// for an interval: then none of its metrics can regress, only its failed
// runs.
func fewRunsNote(key string, baseRuns, newRuns []Run) string {
	passed := func(runs []Run) int {
		n := 0
		for _, r := range runs {
			if r.OK {
				n++
			}
		}
		return n
	}
	nb, nn := passed(baseRuns), passed(newRuns)
	if nb == 0 || nn == 0 || min(nb, nn) >= BootstrapMinRuns {
		return ""
	}
	return fmt.Sprintf("%s: with %d and %d passed runs no interval is drawn (a side needs %d): "+
		"no change of its metrics can be shown, so none is a regression (its failed runs still are)", clip(key), nb, nn, BootstrapMinRuns)
}

// judge classifies a lower-is-better change.
func judge(base, nw float64, both bool, floor, threshold float64) (float64, ChangeStatus) {
	if !both {
		return 0, Unavailable
	}
	delta := relative(base, nw)
	switch diff := nw - base; {
	case delta > threshold && diff > floor:
		return delta, Regression
	case delta < -threshold && -diff > floor:
		return delta, Improved
	}
	return delta, Same
}

func relative(base, nw float64) float64 {
	switch {
	case base == nw:
		return 0
	case base == 0:
		return math.Inf(1)
	}
	return (nw - base) / base
}

// pctComparable reports whether percentile name is compared: where a
// side's runs do not support it (PercentileShown) its value is the slowest run's,
// which the max row already compares.
func pctComparable(name string, b, n Dist, hasBase, hasNew bool) bool {
	if hasBase && !PercentileShown(name, b.N) {
		return false
	}
	return !hasNew || PercentileShown(name, n.N)
}
