package results

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bullylab/bullylab/topologies"
	"github.com/olekukonko/tablewriter/tw"
)

// SummaryOptions say how WriteSummary lays out its table.
type SummaryOptions struct {
	// Width is the width of the terminal in columns: below CompactBelow
	// the compact layout, else the full one, or the compact one when the
	// full one would not fit. 0 detects it: on a terminal $COLUMNS when
	// set, else the terminal's own width; elsewhere (a file, a pipe) no
	// width, the full layout. Negative means no width, the full layout.
	Width int
}

// CompactBelow is the terminal width below which the summary is compact.
const CompactBelow = 100

// summaryWidth is the width WriteSummary lays out for on w: $COLUMNS or
// the window size of a terminal, else -1. $COLUMNS counts only on a
// terminal, so that a log or a file gets the same full table whatever the
// environment of the bench that wrote it.
func summaryWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !IsTerminal(f) {
		return -1
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return TerminalWidth(f)
}

// TimePercentile is one percentile column of a distribution.
type TimePercentile struct {
	Name string // p50, p95, p99 or max
	Of   func(*Dist) int64
}

// TimePercentiles are the percentile columns of a time distribution, in
// order.
var TimePercentiles = []TimePercentile{
	{"p50", func(d *Dist) int64 { return d.P50NS }},
	{"p95", func(d *Dist) int64 { return d.P95NS }},
	{"p99", func(d *Dist) int64 { return d.P99NS }},
	{"max", func(d *Dist) int64 { return d.MaxNS }},
}

// detectionPcts are the detection percentiles that report.html shows.
var detectionPcts = TimePercentiles[:2]

// timeColumn is a column of durations: its header and its cells, in one
// unit.
type timeColumn struct {
	group, name string // "time to leader", "p50"
	unit        string // ms or s
	cells       []string
}

// timeColumns are the columns of pcts of the distributions dists (one
// per scenario, nil where it has none) that some scenario has enough
// values to show; a scenario with too few shows "-". Each column picks
// its own unit.
func timeColumns(group string, pcts []TimePercentile, dists []*Dist) []timeColumn {
	type shown struct {
		p    TimePercentile
		vals []int64
	}
	var shownPcts []shown
	for _, p := range pcts {
		var vals []int64
		for _, d := range dists {
			if d != nil && PercentileShown(p.Name, d.N) {
				vals = append(vals, p.Of(d))
			}
		}
		if len(vals) > 0 {
			shownPcts = append(shownPcts, shown{p, vals})
		}
	}
	cols := make([]timeColumn, len(shownPcts))
	for i, s := range shownPcts {
		u := pickUnit(s.vals)
		cols[i] = timeColumn{group: group, name: s.p.Name, unit: u.name}
		for _, d := range dists {
			cell := "-"
			if d != nil && PercentileShown(s.p.Name, d.N) {
				cell = u.format(s.p.Of(d))
			}
			cols[i].cells = append(cols[i].cells, cell)
		}
	}
	return cols
}

// timeUnit prints durations in one unit with one number of decimals.
type timeUnit struct {
	name     string
	scale    float64 // nanoseconds per unit
	decimals int
}

func (u timeUnit) format(ns int64) string {
	return strconv.FormatFloat(float64(ns)/u.scale, 'f', u.decimals, 64)
}

// pickUnit is the unit of a column of vals: milliseconds, in which
// elections are read, unless the largest reaches 10 s; with one number of
// decimals, so that the column's numbers align on the point: enough for
// three significant digits of the largest and two of the smallest, at
// most two.
func pickUnit(vals []int64) timeUnit {
	top, bottom := int64(0), int64(math.MaxInt64)
	for _, v := range vals {
		top, bottom = max(top, v), min(bottom, v)
	}
	u := timeUnit{name: "ms", scale: 1e6}
	if top >= 10e9 {
		u = timeUnit{name: "s", scale: 1e9}
	}
	u.decimals = min(max(3-intDigits(float64(top)/u.scale), 2-intDigits(float64(bottom)/u.scale), 0), 2)
	return u
}

// intDigits is the digits of x's integer part, 1 for 0; below 1 it is
// less, one fewer per leading zero after the point (0.05: -1).
func intDigits(x float64) int {
	if x <= 0 {
		return 1
	}
	return int(math.Floor(math.Log10(x))) + 1
}

// sideBySide reports whether the summary names each row's algorithm in
// a column of its own: when r holds any but Bully's, whose keys (Key)
// would otherwise say it among the labels.
func sideBySide(r *Results) bool {
	as := r.Algorithms()
	return len(as) > 1 || len(as) == 1 && as[0] != topologies.DefaultAlgorithm
}

// rowKey is the scenario cell of row i: its key, or with the algorithm
// in a column of its own the scenario's alone.
func rowKey(r *Results, i int, algorithmColumn bool) string {
	if algorithmColumn {
		return r.Scenarios[i].ScenarioKey()
	}
	return r.Scenarios[i].Key()
}

// summaryRows are the scenarios' summaries, computed where results hold
// runs but none.
func summaryRows(r *Results) []Summary {
	rows := make([]Summary, len(r.Scenarios))
	for i := range r.Scenarios {
		rows[i] = summaryOf(&r.Scenarios[i])
	}
	return rows
}

// dists are the scenarios' distributions of what of, nil where no run
// measured it.
func dists(rows []Summary, of func(*Summary) *Dist) []*Dist {
	ds := make([]*Dist, len(rows))
	for i := range rows {
		if d := of(&rows[i]); d != nil && rows[i].OK > 0 && d.N > 0 {
			ds[i] = d
		}
	}
	return ds
}

func ttlOf(s *Summary) *Dist { return &s.TimeToLeader }

func detOf(s *Summary) *Dist { return s.Detection }

// summaryTimeColumns are the time columns of both layouts: time to
// leader, then detection as report.html shows it.
func summaryTimeColumns(rows []Summary) [][]timeColumn {
	return [][]timeColumn{
		timeColumns("time to leader", TimePercentiles, dists(rows, ttlOf)),
		timeColumns("detection", detectionPcts, dists(rows, detOf)),
	}
}

// writeFullSummary is the summary as a boxed table, a column per
// percentile with its unit, the messages of an election by type.
func writeFullSummary(w io.Writer, r *Results) error {
	rows := summaryRows(r)
	L, R := tw.AlignLeft, tw.AlignRight
	header := []string{"scenario", "runs", "failed"}
	align := []tw.Align{L, R, R}
	algCol := sideBySide(r)
	if algCol {
		header = slices.Insert(header, 1, "algorithm")
		align = slices.Insert(align, 1, L)
	}
	later := anyLaterChanges(rows)
	if later {
		header = append(header, "later leader\nchanges")
		align = append(align, R)
	}
	var cols []timeColumn
	for _, group := range summaryTimeColumns(rows) {
		for i, c := range group {
			h := fmt.Sprintf("%s (%s)", c.name, c.unit)
			// Named as report.html names them: the group on the first
			// time to leader column, on every detection column.
			if i == 0 || c.group == "detection" {
				h = c.group + "\n" + h
			}
			header = append(header, h)
			align = append(align, R)
		}
		cols = append(cols, group...)
	}
	header = append(header, "messages per election\nmean (max)")
	align = append(align, L)
	t := newTable(w, header, align)
	typeWidth := messageTypeWidth(rows)
	for i := range r.Scenarios {
		s := rows[i]
		row := []string{rowKey(r, i, algCol), strconv.Itoa(s.Runs), strconv.Itoa(s.Failed)}
		if algCol {
			row = slices.Insert(row, 1, r.Scenarios[i].AlgorithmName())
		}
		if later {
			row = append(row, laterChangesCell(s))
		}
		for _, c := range cols {
			row = append(row, c.cells[i])
		}
		row = append(row, messagesCell(s, typeWidth))
		if err := t.Append(row); err != nil {
			return err
		}
	}
	return t.Render()
}

// writeCompactSummary is the summary in at most width columns where it
// can be: no box, the runs that passed of all in one column, a group's
// unit named once above it when its columns share it, the messages of an
// election only in all, and scenario keys wrapped at their spaces into
// what width leaves them.
func writeCompactSummary(w io.Writer, r *Results, width int) error {
	rows := summaryRows(r)
	passed := plainCol{name: "passed", right: true}
	for _, s := range rows {
		passed.cells = append(passed.cells, fmt.Sprintf("%d/%d", s.OK, s.Runs))
	}
	cols := []plainCol{{name: "scenario"}, passed}
	algCol := sideBySide(r)
	if algCol {
		alg := plainCol{name: "algorithm"}
		for i := range r.Scenarios {
			alg.cells = append(alg.cells, r.Scenarios[i].AlgorithmName())
		}
		cols = slices.Insert(cols, 1, alg)
	}
	if anyLaterChanges(rows) {
		lc := plainCol{name: "later", right: true}
		for _, s := range rows {
			lc.cells = append(lc.cells, laterChangesCell(s))
		}
		cols = append(cols, lc)
	}
	for _, group := range summaryTimeColumns(rows) {
		shared := true
		for _, c := range group {
			shared = shared && c.unit == group[0].unit
		}
		for i, c := range group {
			pc := plainCol{name: c.name, right: true, cells: c.cells}
			if !shared {
				pc.name += " (" + c.unit + ")"
			}
			if i == 0 {
				pc.group, pc.span = c.group, len(group)
				if shared {
					pc.group += " (" + c.unit + ")"
				}
			}
			cols = append(cols, pc)
		}
	}
	msgs := plainCol{group: "messages", span: 1, name: "mean (max)"}
	for _, s := range rows {
		cell := "-"
		if s.OK > 0 {
			cell = fmt.Sprintf("%s (%d)", FormatMean(s.MessagesTotal.Mean), s.MessagesTotal.Max)
		}
		msgs.cells = append(msgs.cells, cell)
	}
	cols = append(cols, msgs)
	// The scenario column gets what the others leave, at least its
	// longest word.
	rest := 0
	for _, wd := range plainWidths(cols)[1:] {
		rest += plainGap + wd
	}
	var keys []string
	for i := range r.Scenarios {
		keys = append(keys, rowKey(r, i, algCol))
	}
	cols[0].cells = wrapWords(keys, width-rest)
	_, err := io.WriteString(w, renderPlain(cols))
	return err
}

// plainGap is the spaces between two columns of a plain table.
const plainGap = 2

// plainCol is a column of a plain table; a group label spans the column
// and the span-1 after it.
type plainCol struct {
	group string
	span  int
	name  string
	right bool
	cells []string // may hold several lines
}

func (c *plainCol) width() int {
	n := utf8.RuneCountInString(c.name)
	for _, cell := range c.cells {
		for _, l := range strings.Split(cell, "\n") {
			n = max(n, utf8.RuneCountInString(l))
		}
	}
	return n
}

// plainWidths are the widths of cols, a group's columns widened when the
// group's label is longer than they are together.
func plainWidths(cols []plainCol) []int {
	widths := make([]int, len(cols))
	for i := range cols {
		widths[i] = cols[i].width()
	}
	for i, c := range cols {
		if c.span == 0 {
			continue
		}
		span := -plainGap
		for _, wd := range widths[i : i+c.span] {
			span += plainGap + wd
		}
		// Spread the excess over the group's columns, the last first.
		for k := 0; k < utf8.RuneCountInString(c.group)-span; k++ {
			widths[i+c.span-1-k%c.span]++
		}
	}
	return widths
}

// renderPlain lays cols out with plainGap spaces between them: the group
// labels, the names, a rule, the rows.
func renderPlain(cols []plainCol) string {
	widths := plainWidths(cols)
	groups := false
	for _, c := range cols {
		groups = groups || c.span > 0
	}
	total := -plainGap
	for _, wd := range widths {
		total += plainGap + wd
	}
	var b strings.Builder
	line := func(cells []string, right func(i int) bool) {
		var s strings.Builder
		for i, cell := range cells {
			if i > 0 {
				s.WriteString(strings.Repeat(" ", plainGap))
			}
			pad := strings.Repeat(" ", max(widths[i]-utf8.RuneCountInString(cell), 0))
			if right(i) {
				s.WriteString(pad + cell)
			} else {
				s.WriteString(cell + pad)
			}
		}
		b.WriteString(strings.TrimRight(s.String(), " ") + "\n")
	}
	if groups {
		var s strings.Builder
		for i, c := range cols {
			at := -plainGap
			for _, wd := range widths[:i] {
				at += plainGap + wd
			}
			at = max(at+plainGap, 0)
			if c.span > 0 {
				s.WriteString(strings.Repeat(" ", max(at-utf8.RuneCountInString(s.String()), 0)) + c.group)
			}
		}
		b.WriteString(strings.TrimRight(s.String(), " ") + "\n")
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	line(names, func(i int) bool { return cols[i].right })
	b.WriteString(strings.Repeat("─", total) + "\n")
	for r := range cols[0].cells {
		lines := make([][]string, len(cols))
		height := 0
		for i, c := range cols {
			lines[i] = strings.Split(c.cells[r], "\n")
			height = max(height, len(lines[i]))
		}
		for k := range height {
			cells := make([]string, len(cols))
			for i := range cols {
				if k < len(lines[i]) {
					cells[i] = lines[i][k]
				}
			}
			line(cells, func(i int) bool { return cols[i].right })
		}
	}
	return b.String()
}

// wrapWords breaks each of texts at its spaces into lines of at most
// width runes where its words allow.
func wrapWords(texts []string, width int) []string {
	out := make([]string, len(texts))
	for i, t := range texts {
		var lines []string
		cur := ""
		for _, word := range strings.Fields(t) {
			switch {
			case cur == "":
				cur = word
			case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(word) <= width:
				cur += " " + word
			default:
				lines = append(lines, cur)
				cur = word
			}
		}
		out[i] = strings.Join(append(lines, cur), "\n")
	}
	return out
}

// widest is the rune count of the longest line of s.
func widest(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, utf8.RuneCountInString(l))
	}
	return n
}
