package history

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/wire/bounded"
)

// Metric is a per-entry value whose history check follows. Every metric
// is lower-is-better, so a rise is a regression.
type Metric struct {
	// Name is as --metric gives it; Title as reports show it.
	Name, Title string
	// Floor is the smallest change that counts, in the metric's unit,
	// whatever its relative size: compare's noise floors.
	Floor float64
	// Value is the entry's value; Samples its runs'.
	Value   func(*Entry) float64
	Samples func(*Entry) []float64
	Format  func(float64) string
}

// Metrics are the metrics check knows, by name.
var Metrics = []Metric{
	{Name: "ttl", Title: "time to leader p50", Floor: 1e6,
		Value: func(e *Entry) float64 { return float64(e.TTLP50NS) },
		Samples: func(e *Entry) []float64 {
			out := make([]float64, len(e.TTLNS))
			for i, v := range e.TTLNS {
				out[i] = float64(v)
			}
			return out
		},
		Format: func(v float64) string { return strconv.FormatFloat(v/1e6, 'f', 1, 64) + "ms" }},
	{Name: "messages", Title: "messages per election mean", Floor: 0.5,
		Value: func(e *Entry) float64 { return e.MessagesMean },
		Samples: func(e *Entry) []float64 {
			out := make([]float64, len(e.Messages))
			for i, v := range e.Messages {
				out[i] = float64(v)
			}
			return out
		},
		Format: func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }},
}

// MetricNames lists Metrics' names.
func MetricNames() []string {
	var out []string
	for _, m := range Metrics {
		out = append(out, m.Name)
	}
	return out
}

func metricNamed(name string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// CheckOptions are `bullylab history check`'s.
type CheckOptions struct {
	File    string
	Metrics []string
	// MinEffect is the smallest relative change of a series' median that
	// check reports as a regression or an improvement, such as 0.1.
	MinEffect float64
	Detect    DetectOptions
	// Markdown and HTML, when not empty, are files to write the report to.
	Markdown, HTML string
	// Last is how many of a series' newest entries the markdown lists.
	Last int
}

// DefaultMinEffect is check's minimum relative effect: 10%, compare's
// default --max-regress. Same-build benches of 10 runs on a shared 2-core
// machine moved their median by up to 8% as its load changed, a real
// change of the measurements that a smaller effect gates as a regression.
const DefaultMinEffect = 0.10

// Validate checks what needs no file.
func (o *CheckOptions) Validate() error {
	if o.File == "" {
		return errors.New("--file: want the history file")
	}
	if len(o.Metrics) == 0 {
		return fmt.Errorf("--metric: want one or more of %s", strings.Join(MetricNames(), ", "))
	}
	for _, m := range o.Metrics {
		if _, ok := metricNamed(m); !ok {
			return fmt.Errorf("--metric %s: want one or more of %s", bounded.Quote(m), strings.Join(MetricNames(), ", "))
		}
	}
	if !(o.MinEffect >= 0 && o.MinEffect < 1) {
		return fmt.Errorf("--min-effect %g: want a share in [0, 1), such as 10%%", o.MinEffect)
	}
	if o.Last < 1 {
		return fmt.Errorf("--last %d: want 1 or more entries", o.Last)
	}
	return o.Detect.Validate()
}

// Verdicts of a series.
const (
	// VerdictRegression: the newest entry started a regression: the last
	// change point, a rise beyond the minimum effect, is not in the
	// history without it. The only verdict that fails check.
	VerdictRegression = "regression"
	// VerdictRegressed: the series rose at its last change point, found
	// before the newest entry too: a known regression, not gated again.
	VerdictRegressed = "regressed"
	VerdictImproved  = "improved"
	// VerdictSmall: the last change point is below the minimum effect.
	VerdictSmall    = "small change"
	VerdictSteady   = "no change point"
	VerdictTooFew   = "too few entries"
	VerdictNoneOK   = "no run passed"
	VerdictNotGated = "not in the newest commit"
)

// Shift is a change point of a series in its context.
type Shift struct {
	ChangePoint
	Commit string
	// Before and After are the medians of the segments on either side;
	// Relative is (After - Before) / Before.
	Before, After, Relative float64
	// Effect says the change is beyond the minimum effect and the
	// metric's floor.
	Effect bool
	// Settings are the settings that differ between the entries either
	// side, "name old -> new".
	Settings []string
}

// Worse says the shift is a rise: every metric is lower-is-better.
func (s *Shift) Worse() bool { return s.After > s.Before }

// Series is one metric of one scenario and algorithm on one topology,
// over the history, and what check makes of it.
type Series struct {
	Key    string
	Metric Metric
	// Entries are the series' entries, oldest first; Points the indexes
	// of those with a value (a passed run), Values those values.
	Entries []Entry
	Points  []int
	Values  []float64
	Shifts  []Shift
	Verdict string
	// MinSegment is the detection's, which the verdict of too few
	// entries names.
	MinSegment int
	// Cause is the shift the verdict is about, when there is one.
	Cause *Shift
}

// Report is what check found in a history.
type Report struct {
	File      string
	Entries   int
	Newest    string // the newest entry's commit
	MinEffect float64
	Detect    DetectOptions
	Series    []Series
}

// Regressed says the newest entry started a regression in some series.
func (r *Report) Regressed() bool {
	for _, s := range r.Series {
		if s.Verdict == VerdictRegression || s.Verdict == VerdictNoneOK {
			return true
		}
	}
	return false
}

// Check reads the history, finds every series' change points and writes
// one verdict line per series to w, and the markdown and HTML reports
// asked for. Its errors are *InputError for a history that cannot be
// used.
func Check(opts CheckOptions, w io.Writer) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, &InputError{err}
	}
	entries, err := ReadFile(opts.File, false)
	if err != nil {
		return nil, &InputError{err}
	}
	if len(entries) == 0 {
		return nil, &InputError{fmt.Errorf("%s: no entries", opts.File)}
	}
	rep := Analyze(entries, opts)
	rep.File = opts.File
	for _, s := range rep.Series {
		if _, err := fmt.Fprintln(w, s.VerdictLine(rep.MinEffect)); err != nil {
			return nil, err
		}
	}
	if opts.Markdown != "" {
		if err := results.WriteOutputFile(opts.Markdown, func(w io.Writer) error { return rep.WriteMarkdown(w, opts.Last) }); err != nil {
			return nil, fmt.Errorf("writing %s: %w", opts.Markdown, err)
		}
	}
	if opts.HTML != "" {
		if err := results.WriteOutputFile(opts.HTML, rep.WriteHTML); err != nil {
			return nil, fmt.Errorf("writing %s: %w", opts.HTML, err)
		}
	}
	return rep, nil
}

// Analyze finds the change points of every series of entries and gives
// each its verdict.
func Analyze(entries []Entry, opts CheckOptions) *Report {
	sorted := slices.Clone(entries)
	Sort(sorted)
	rep := &Report{Entries: len(sorted), Newest: sorted[len(sorted)-1].Commit, MinEffect: opts.MinEffect, Detect: opts.Detect}
	bySeries := map[string][]Entry{}
	for _, e := range sorted {
		bySeries[e.SeriesKey()] = append(bySeries[e.SeriesKey()], e)
	}
	for _, key := range slices.Sorted(maps.Keys(bySeries)) {
		for _, name := range opts.Metrics {
			m, _ := metricNamed(name)
			s := Series{Key: key, Metric: m, Entries: bySeries[key]}
			s.analyze(rep.Newest, opts)
			rep.Series = append(rep.Series, s)
		}
	}
	return rep
}

func (s *Series) analyze(newest string, opts CheckOptions) {
	s.MinSegment = opts.Detect.MinSegment
	for i := range s.Entries {
		if s.Entries[i].OK > 0 {
			s.Points = append(s.Points, i)
			s.Values = append(s.Values, s.Metric.Value(&s.Entries[i]))
		}
	}
	s.Shifts = s.shifts(s.Values, opts)
	last := &s.Entries[len(s.Entries)-1]
	switch {
	case last.Commit != newest:
		s.Verdict = VerdictNotGated
		return
	case last.OK == 0:
		s.Verdict = VerdictNoneOK
		return
	case len(s.Values) < 2*opts.Detect.MinSegment:
		s.Verdict = VerdictTooFew
		return
	case len(s.Shifts) == 0:
		s.Verdict = VerdictSteady
		return
	}
	cause := &s.Shifts[len(s.Shifts)-1]
	s.Cause = cause
	switch {
	case !cause.Effect:
		s.Verdict = VerdictSmall
	case !cause.Worse():
		s.Verdict = VerdictImproved
	case s.knownBefore(cause, opts):
		s.Verdict = VerdictRegressed
	default:
		s.Verdict = VerdictRegression
	}
}

// knownBefore says a history without the newest entry, or without up to
// MinSegment newest entries, has a rise beyond the minimum effect within
// one entry of cause: a change point that moved by one as values came
// in, or that a value or two left short of significance and the next
// brought back, is the same change, gated once.
func (s *Series) knownBefore(cause *Shift, opts CheckOptions) bool {
	for drop := 1; drop <= opts.Detect.MinSegment && len(s.Values)-drop >= 2*opts.Detect.MinSegment; drop++ {
		for _, sh := range s.shifts(s.Values[:len(s.Values)-drop], opts) {
			if sh.Effect && sh.Worse() && sh.Index >= cause.Index-1 && sh.Index <= cause.Index+1 {
				return true
			}
		}
	}
	return false
}

// shifts are the change points of values, the first len(values) of the
// series' points, with their segments' medians.
func (s *Series) shifts(values []float64, opts CheckOptions) []Shift {
	cps := EDivisive(values, opts.Detect)
	out := make([]Shift, len(cps))
	for i, cp := range cps {
		from, to := 0, len(values)
		if i > 0 {
			from = cps[i-1].Index
		}
		if i+1 < len(cps) {
			to = cps[i+1].Index
		}
		before, after := median(values[from:cp.Index]), median(values[cp.Index:to])
		sh := Shift{ChangePoint: cp, Before: before, After: after, Commit: s.Entries[s.Points[cp.Index]].Commit}
		if before != 0 {
			sh.Relative = (after - before) / before
		}
		sh.Effect = math.Abs(after-before) >= s.Metric.Floor && (before == 0 || math.Abs(sh.Relative) >= opts.MinEffect)
		sh.Settings = settingsDiff(s.Entries[s.Points[cp.Index-1]].Settings, s.Entries[s.Points[cp.Index]].Settings)
		out[i] = sh
	}
	return out
}

// median is the nearest-rank p50, as the benches' own.
func median(v []float64) float64 { return results.Percentile(v, 50) }

func settingsDiff(a, b map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if nv, ok := b[k]; !ok {
			out = append(out, k+" "+a[k]+" -> (none)")
		} else if nv != a[k] {
			out = append(out, k+" "+a[k]+" -> "+nv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			out = append(out, k+" (none) -> "+b[k])
		}
	}
	return out
}

// Title names the series and its metric: "star5 leader-crash bully, time
// to leader p50".
func (s *Series) Title() string { return s.Key + ", " + s.Metric.Title }

// VerdictLine is the series' verdict in one line.
func (s *Series) VerdictLine(minEffect float64) string {
	last := &s.Entries[len(s.Entries)-1]
	head := s.Title() + ": "
	switch s.Verdict {
	case VerdictNotGated:
		return head + fmt.Sprintf("%s (last measured at %s)", VerdictNotGated, last.Commit)
	case VerdictNoneOK:
		return head + fmt.Sprintf("REGRESSION: %s at %s (%d runs)", VerdictNoneOK, last.Commit, last.Runs)
	case VerdictTooFew:
		return head + fmt.Sprintf("%s (%d with a passed run; a change point needs %d)", VerdictTooFew, len(s.Values), 2*s.MinSegment)
	case VerdictSteady:
		return head + fmt.Sprintf("%s in %d entries, latest %s", VerdictSteady, len(s.Values), s.Metric.Format(s.Values[len(s.Values)-1]))
	}
	c := s.Cause
	what := map[string]string{
		VerdictRegression: "REGRESSION at " + c.Commit + ", started by " + last.Commit,
		VerdictRegressed:  "regressed at " + c.Commit + " (known before " + last.Commit + ", not gated again)",
		VerdictImproved:   "improved at " + c.Commit,
		VerdictSmall: fmt.Sprintf("small change at %s (under the %s minimum effect or the floor of %s)",
			c.Commit, percent(minEffect), s.Metric.Format(s.Metric.Floor)),
	}[s.Verdict]
	return head + what + ": " + s.ShiftText(c)
}

// ShiftText is a shift's medians, change and p-value, and the settings
// that changed with it.
func (s *Series) ShiftText(c *Shift) string {
	t := fmt.Sprintf("%s -> %s (%s, p=%.3f)", s.Metric.Format(c.Before), s.Metric.Format(c.After), signedPercent(c.Relative), c.PValue)
	if len(c.Settings) > 0 {
		t += "; settings changed: " + strings.Join(c.Settings, ", ")
	}
	return t
}

func percent(v float64) string { return strconv.FormatFloat(v*100, 'f', -1, 64) + "%" }

func signedPercent(v float64) string {
	return fmt.Sprintf("%+.1f%%", v*100)
}

// ExitCode is check's exit status for rep: 1 when the newest entry
// started a regression, else 0.
func (r *Report) ExitCode() int {
	if r.Regressed() {
		return 1
	}
	return 0
}

// ParsePercent reads a share written as a percentage, such as "10%".
func ParsePercent(s string) (float64, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || !(f >= 0 && f < 100) {
		return 0, fmt.Errorf("%s: want a percentage from 0%% to under 100%%, such as 10%%", bounded.Quote(s))
	}
	return f / 100, nil
}
