package results

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// newTable is the one table style of bullylab's reports: light box
// drawing, headers as written (not upper-cased), numbers right-aligned.
func newTable(w io.Writer, header []string, align []tw.Align) *tablewriter.Table {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	t.Header(header)
	return t
}

// WriteSummary prints the summary table of r: per scenario the time to
// leader and detection percentiles that its runs support, the messages of
// an election (mean and max); below the table which run each percentile
// is and which were left out, and the runs that failed and why; last,
// when the bench is partial, why. The table fits the width opts give, or
// the terminal w is (SummaryOptions).
func WriteSummary(w io.Writer, r *Results, opts ...SummaryOptions) error {
	width := 0
	if len(opts) > 0 {
		width = opts[0].Width
	}
	if width == 0 {
		width = summaryWidth(w)
	}
	var table strings.Builder
	if width < 0 || width >= CompactBelow {
		if err := writeFullSummary(&table, r); err != nil {
			return err
		}
	}
	if width >= 0 && (width < CompactBelow || widest(table.String()) > width) {
		table.Reset()
		if err := writeCompactSummary(&table, r, width); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, table.String()); err != nil {
		return err
	}
	lines := percentileLines(r.Scenarios)
	if o := OverridesText(r.Topology.Overrides); o != "" {
		lines = append([]string{"timings: " + o}, lines...)
	}
	if anyLaterChanges(summaryRows(r)) {
		lines = append(lines, laterChangesDefinition)
	}
	for i := range r.Scenarios {
		sc := &r.Scenarios[i]
		s := summaryOf(sc)
		for _, g := range s.Failures {
			lines = append(lines, failureLine(sc.Key(), g, s.Runs))
		}
		if l := DetectedByText(s); l != "" {
			lines = append(lines, sc.Key()+": detection: "+l)
		}
		if l := laterChangesLine(sc.Key(), s); l != "" {
			lines = append(lines, l)
		}
		if l := availabilityLine(sc.Key(), s); l != "" {
			lines = append(lines, l)
		}
		if l := clockLine(sc.Key(), s); l != "" {
			lines = append(lines, l)
		}
		if l := hostFilesLine(sc.Key(), s); l != "" {
			lines = append(lines, l)
		}
	}
	if r.Partial != nil {
		lines = append(lines, r.Partial.String())
	}
	if width > 0 {
		// On a terminal the notes wrap at words, as the table's cells do,
		// rather than wherever the terminal cuts them.
		lines = wrapWords(lines, width-1)
	}
	for _, f := range lines {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}

// DetectedByText says which detection started the measured elections of
// the runs that passed, most frequent first: "crash evidence 10/10", or
// "crash evidence 7/10, failure timeout 3/10"; "" when no run says.
func DetectedByText(s Summary) string {
	total := 0
	var names []string
	for name, n := range s.DetectedBy {
		total += n
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := s.DetectedBy[b] - s.DetectedBy[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %d/%d", name, s.DetectedBy[name], total)
	}
	return strings.Join(parts, ", ")
}

// clockShare is the share of the median time to leader past which the
// hosts' clocks' error bound is called out as large.
const clockShare = 0.05

// clockLine says, for runs across hosts, within what the hosts' clocks
// let the times be known, and whether that is a large share of them.
func clockLine(key string, s Summary) string {
	if s.ClockErrorNS == 0 || s.OK == 0 {
		return ""
	}
	line := fmt.Sprintf("%s: across hosts, times are known within ±%s (the hosts' clock offsets)", key, FormatNS(s.ClockErrorNS))
	if ttl := s.TimeToLeader.P50NS; ttl > 0 && float64(s.ClockErrorNS) > clockShare*float64(ttl) {
		line += fmt.Sprintf(": %.0f%% of the median time to leader, too large a share to compare it with one host's", 100*float64(s.ClockErrorNS)/float64(ttl))
	}
	return line
}

// failureLine says which runs of a scenario failed on g's kind, and how
// the first of them did.
func failureLine(key string, g FailureGroup, runs int) string {
	which := "run " + joinInts(g.Runs)
	how := g.Example
	if len(g.Runs) > 1 {
		which, how = "runs "+joinInts(g.Runs), "the first: "+g.Example
	}
	if runs == 1 {
		return fmt.Sprintf("%s: the one run failed on %s: %s", key, g.Kind, how)
	}
	return fmt.Sprintf("%s: %d of %d runs failed on %s (%s): %s", key, len(g.Runs), runs, g.Kind, which, how)
}

// messageTypeWidth is the width of the type column of the messages
// cells of rows: their longest type shown, at least Bully's COORDINATOR,
// so that every row's counts line up, the ring's RING_ELECTION included.
func messageTypeWidth(rows []Summary) int {
	width := len("COORDINATOR")
	for _, s := range rows {
		if s.OK == 0 {
			continue
		}
		for t, c := range s.Messages {
			if c.Max > 0 {
				width = max(width, len(t))
			}
		}
	}
	return width
}

// messagesCell is a row's messages per election, a line per type padded
// to width (messageTypeWidth) and the total.
func messagesCell(s Summary, width int) string {
	if s.OK == 0 {
		return "-"
	}
	types := make(map[string]bool, len(s.Messages))
	for t := range s.Messages {
		types[t] = true
	}
	var lines []string
	for _, t := range SortMessageTypes(types) {
		if c := s.Messages[t]; c.Max > 0 {
			lines = append(lines, fmt.Sprintf("%-*s %5s (%d)", width, t, FormatMean(c.Mean), c.Max))
		}
	}
	lines = append(lines, fmt.Sprintf("%-*s %5s (%d)", width, "total", FormatMean(s.MessagesTotal.Mean), s.MessagesTotal.Max))
	return strings.Join(lines, "\n")
}

// WriteComparison prints c as a table of changes, then the verdict.
func WriteComparison(w io.Writer, c *Comparison) error {
	L, R := tw.AlignLeft, tw.AlignRight
	t := newTable(w, []string{"scenario", "metric", "base", "new", "change", "n base/new", intervalHeader(c), "verdict"},
		[]tw.Align{L, L, R, R, R, R, R, L})
	for _, ch := range c.Changes {
		if err := t.Append([]string{ch.Scenario, ch.Metric, fmtValue(ch, ch.Base, ch.HasBase, ch.BaseRuns),
			fmtValue(ch, ch.New, ch.HasNew, ch.NewRuns), fmtDelta(ch), fmtN(ch), fmtInterval(ch), string(ch.Status)}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, n := range c.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
	fmt.Fprintf(w, "intervals: of each row's own statistic (its percentile or its mean), new minus base, relative to base; bootstrap, %d resamples a side, seeded\n", BootstrapResamples)
	regs := c.Regressions()
	threshold := strconv.FormatFloat(c.MaxRegress*100, 'g', -1, 64) + "%"
	if len(regs) == 0 {
		_, err := fmt.Fprintf(w, "ok: no metric of %s regressed beyond %s with its %s above zero\n", c.Topology, threshold, intervalName(c))
		return err
	}
	var names []string
	for _, r := range regs {
		names = append(names, fmt.Sprintf("%s %s %s", r.Scenario, r.Metric, fmtDelta(r)))
	}
	_, err := fmt.Fprintf(w, "REGRESSED beyond %s: %s\n", threshold, strings.Join(names, "; "))
	return err
}

// fmtN is the runs behind a change, "-" for failed runs, whose counts
// are the values.
func fmtN(ch Change) string {
	if ch.Unit == "runs" {
		return "-"
	}
	return fmt.Sprintf("%d/%d", ch.BaseN, ch.NewN)
}

// CompareMethod says how compare tests each row, for its output and help.
const CompareMethod = "each row's test is of what it shows: the bootstrap interval of the difference (new minus base) of its " +
	"statistic, its percentile (nearest-rank) or its mean, each side's runs resampled with replacement 2000 times by a generator " +
	"seeded from the row's scenario and metric, so that a comparison always gives the same intervals; a side needs 5 passed runs. " +
	"A row regressed when the interval lies above zero and the change exceeds the threshold and its noise floor; " +
	"failed runs regress on any larger share of them"

// intervalName is "95% bootstrap interval", at c's confidence.
func intervalName(c *Comparison) string {
	return strconv.FormatFloat((1-c.Alpha)*100, 'g', 4, 64) + "% bootstrap interval"
}

// intervalHeader is the table's column of intervals.
func intervalHeader(c *Comparison) string {
	return strconv.FormatFloat((1-c.Alpha)*100, 'g', 4, 64) + "% interval"
}

// fmtInterval is a row's interval relative to its base, "+0.2%…+1.1%",
// or in its unit when the base is 0; "-" for none.
func fmtInterval(ch Change) string {
	iv := ch.Interval
	switch {
	case iv == nil:
		return "-"
	case ch.Base == 0:
		return fmtAbs(ch, iv.Low) + "…" + fmtAbs(ch, iv.High)
	}
	return fmt.Sprintf("%+.1f%%…%+.1f%%", iv.Low/ch.Base*100, iv.High/ch.Base*100)
}

// fmtAbs is a difference in ch's unit, signed.
func fmtAbs(ch Change, v float64) string {
	sign := "+"
	if v < 0 {
		sign, v = "-", -v
	}
	if ch.Unit == "ns" {
		return sign + FormatNS(int64(v))
	}
	return sign + FormatMean(v)
}

func fmtValue(ch Change, v float64, has bool, runs int) string {
	if !has {
		return "-"
	}
	switch ch.Unit {
	case "ns":
		return FormatNS(int64(v))
	case "runs":
		return fmt.Sprintf("%d/%d", int(v), runs)
	}
	return FormatMean(v)
}

func fmtDelta(ch Change) string {
	switch {
	case ch.Status == Unavailable:
		return "n/a"
	case math.IsInf(ch.Delta, 1):
		return "new"
	case ch.Delta == 0:
		return "0%"
	}
	return fmt.Sprintf("%+.1f%%", ch.Delta*100)
}

// FormatNS prints a duration to three significant digits, in the unit people
// read elections in.
func FormatNS(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d >= 100*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 0, 64) + "ms"
	case d >= 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms"
	case d >= time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + "ms"
	}
	return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + "µs"
}

// FormatMean prints a mean count; below one it keeps a second decimal, so
// that one REJECT in 30 runs shows as 0.03 rather than 0.0.
func FormatMean(v float64) string {
	if v != 0 && math.Abs(v) < 1 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// Comparison output formats (--format).
const (
	FormatTable    = "table"
	FormatJSON     = "json"
	FormatMarkdown = "markdown"
)

// ComparisonFormats lists the formats WriteComparisonAs takes.
var ComparisonFormats = []string{FormatTable, FormatJSON, FormatMarkdown}

// WriteComparisonAs prints c in format: a table for people, a JSON
// document (schema CompareSchema) for programs, or a markdown table that
// fits a CI job's summary page.
func WriteComparisonAs(w io.Writer, c *Comparison, format string) error {
	switch format {
	case FormatTable, "":
		return WriteComparison(w, c)
	case FormatJSON:
		return writeComparisonJSON(w, c)
	case FormatMarkdown:
		return writeComparisonMarkdown(w, c)
	}
	return fmt.Errorf("format %s: want one of %s", bounded.Quote(format), strings.Join(ComparisonFormats, ", "))
}

// CompareSchema names the JSON document of a comparison.
const CompareSchema = "bullylab.compare/v2"

type comparisonJSON struct {
	Schema     string       `json:"schema"`
	Base       string       `json:"base"`
	New        string       `json:"new"`
	Topology   string       `json:"topology"`
	MaxRegress float64      `json:"max_regress"` // a fraction: 0.1 for 10%
	Alpha      float64      `json:"alpha"`
	Method     string       `json:"method"`  // how each row is tested (CompareMethod)
	Verdict    string       `json:"verdict"` // pass or regressed
	ExitCode   int          `json:"exit_code"`
	Changes    []changeJSON `json:"changes"`
	Notes      []string     `json:"notes"`
}

type intervalJSON struct {
	Low        float64 `json:"low"`
	High       float64 `json:"high"`
	Confidence float64 `json:"confidence"`
}

type changeJSON struct {
	Scenario string   `json:"scenario"`
	Metric   string   `json:"metric"`
	Unit     string   `json:"unit"`
	Base     *float64 `json:"base"` // null: that side has no value
	New      *float64 `json:"new"`
	// Delta is the relative change, null when it cannot be had (a side
	// without value, or growth from 0).
	Delta *float64 `json:"delta"`
	BaseN int      `json:"n_base"`
	NewN  int      `json:"n_new"`
	// Interval is the bootstrap interval of the difference, new minus
	// base, in the unit; null without one.
	Interval *intervalJSON `json:"interval"`
	Status   string        `json:"status"`
}

func writeComparisonJSON(w io.Writer, c *Comparison) error {
	v := c.Verdict()
	doc := comparisonJSON{Schema: CompareSchema, Base: c.Base, New: c.New, Topology: c.Topology, MaxRegress: c.MaxRegress,
		Alpha: c.Alpha, Method: CompareMethod, Verdict: v.String(), ExitCode: v.ExitCode(), Changes: []changeJSON{}, Notes: c.Notes}
	if doc.Notes == nil {
		doc.Notes = []string{}
	}
	for _, ch := range c.Changes {
		j := changeJSON{Scenario: ch.Scenario, Metric: ch.Metric, Unit: ch.Unit, BaseN: ch.BaseN, NewN: ch.NewN, Status: string(ch.Status)}
		if iv := ch.Interval; iv != nil {
			j.Interval = &intervalJSON{Low: iv.Low, High: iv.High, Confidence: iv.Confidence}
		}
		if ch.HasBase {
			j.Base = ptr(ch.Base)
		}
		if ch.HasNew {
			j.New = ptr(ch.New)
		}
		if ch.Status != Unavailable && !math.IsInf(ch.Delta, 0) && !math.IsNaN(ch.Delta) {
			j.Delta = ptr(ch.Delta)
		}
		doc.Changes = append(doc.Changes, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func ptr(f float64) *float64 { return &f }

// writeComparisonMarkdown writes a GitHub-flavoured markdown table, the
// regressions in bold, then the notes and the verdict.
func writeComparisonMarkdown(w io.Writer, c *Comparison) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### bullylab compare: %s\n\n", mdCell(c.Topology))
	fmt.Fprintf(&b, "`%s` against `%s`; a regression grows beyond %s with its %s above zero.\n\n",
		mdCell(c.New), mdCell(c.Base), strconv.FormatFloat(c.MaxRegress*100, 'g', -1, 64)+"%", intervalName(c))
	b.WriteString("| scenario | metric | base | new | change | n base/new | " + intervalHeader(c) + " | verdict |\n")
	b.WriteString("|---|---|--:|--:|--:|--:|--:|---|\n")
	for _, ch := range c.Changes {
		verdict := string(ch.Status)
		if ch.Status == Regression {
			verdict = "**" + verdict + "**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(ch.Scenario), mdCell(ch.Metric),
			fmtValue(ch, ch.Base, ch.HasBase, ch.BaseRuns), fmtValue(ch, ch.New, ch.HasNew, ch.NewRuns),
			fmtDelta(ch), fmtN(ch), fmtInterval(ch), verdict)
	}
	for _, n := range c.Notes {
		b.WriteString("\n> note: " + mdCell(n) + "\n")
	}
	if regs := c.Regressions(); len(regs) > 0 {
		fmt.Fprintf(&b, "\n**Regressed** (%d metrics): exit 1\n", len(regs))
	} else {
		b.WriteString("\n**OK**: nothing regressed: exit 0\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell keeps a value from breaking a markdown table row.
func mdCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ").Replace(s)
}
