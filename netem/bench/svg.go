package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The report's figures are SVG written here, inline in the page: no
// script, no font or style sheet from elsewhere, so report.html opens the
// same from a CI artifact, a mail attachment or a laptop offline.

// Sequence is one election drawn as a message sequence (Lamport) diagram:
// a lifeline per node, an arrow per message from its send to its receipt.
type Sequence struct {
	Title string
	// Nodes are the lifelines from left to right; lowest ID first reads
	// like the algorithm (elections go right, HALTs and COORDINATORs left).
	Nodes    []string
	Messages []SequenceMessage
	Faults   []FaultMark
	// Origin is time zero of the time axis, normally the measured fault;
	// zero means the earliest event.
	Origin time.Time
}

// SequenceMessage is one frame between two nodes.
type SequenceMessage struct {
	Time     time.Time // sent: the capture's timestamp on the sender's port
	RecvTime time.Time // received; zero when unknown (a capture sees each frame once)
	From, To string
	Type     string // wire type name: ELECTION, HALT...
	Epoch    uint64
}

// FaultMark is a fault drawn as a band across the lifelines, from Time to
// End (zero End: an instant), with the nodes it struck marked.
type FaultMark struct {
	Time  time.Time
	End   time.Time
	Text  string
	Nodes []string
}

// typeColors are distinct in colour and in lightness, so the diagram
// survives a grey-scale print.
var typeColors = map[string]string{
	"ELECTION":    "#d35400",
	"ANSWER":      "#2471a3",
	"HALT":        "#c0392b",
	"HALT_ACK":    "#d98880",
	"REJECT":      "#7d3c98",
	"COORDINATOR": "#1e8449",
	"HEARTBEAT":   "#99a3a4",
	"JOIN":        "#148f77",
	"LEAVE":       "#5d6d7e",
	"MEMBERS":     "#9a7d0a",
}

const otherColor = "#515a5a"

func colorOf(typ string) string {
	if c, ok := typeColors[typ]; ok {
		return c
	}
	return otherColor
}

// esc escapes text for SVG text content and attribute values.
func esc(s string) string { return html.EscapeString(s) }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// niceStep returns the smallest of 1, 2, 2.5 and 5 times a power of ten
// that is at least raw: tick spacing for an axis.
func niceStep(raw float64) float64 { return nice(raw, []float64{1, 2, 2.5, 5, 10}, true) }

// niceCount is niceStep without 2.5, for axes that count runs.
func niceCount(raw float64) float64 { return math.Max(1, nice(raw, []float64{1, 2, 5, 10}, true)) }

// niceBin returns the largest of 1, 2, 2.5 and 5 times a power of ten that
// is at most raw: a bin width that gives at least the bins asked for.
func niceBin(raw float64) float64 { return nice(raw, []float64{1, 2, 2.5, 5, 10}, false) }

func nice(raw float64, mults []float64, up bool) float64 {
	if !(raw > 0) || math.IsInf(raw, 0) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	if up {
		for _, m := range mults {
			if m*exp >= raw*(1-1e-9) {
				return m * exp
			}
		}
		return 10 * exp
	}
	best := exp
	for _, m := range mults {
		if m*exp <= raw*(1+1e-9) {
			best = m * exp
		}
	}
	return best
}

// fmtTick prints a tick value with no more decimals than its step needs.
func fmtTick(v, step float64) string {
	dec := 0
	for s := step; s < 1 && dec < 6; s *= 10 {
		dec++
	}
	if math.Abs(step*math.Pow(10, float64(dec))-math.Round(step*math.Pow(10, float64(dec)))) > 1e-9 {
		dec++
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

// Layout of the distribution plot.
const (
	distW, distH                             = 860.0, 330.0
	distLeft, distRight, distTop, distBottom = 58.0, 64.0, 44.0, 62.0
	distPlotW, distPlotH                     = distW - distLeft - distRight, distH - distTop - distBottom
	distBarColor, distCDFColor, distPctColor = "#5dade2", "#1b2631", "#922b21"
)

// DistributionSVG draws times to leader (nanoseconds) as a histogram of
// runs with the cumulative distribution over it, the p50, p95 and p99
// marked, and every run as a tick under the axis.
func DistributionSVG(ns []int64, title string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="dist" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`, distW, distH, distW, distH, esc(title))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(title))
	if len(ns) == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" class="muted">no run passed: nothing to plot</text></svg>`, distW/2, distH/2)
		return b.String()
	}
	d := newDistPlot(ns)
	d.drawAxes(&b)
	d.drawBars(&b)
	d.drawRuns(&b)
	d.drawCDF(&b)
	d.drawPercentiles(&b)
	b.WriteString(`</svg>`)
	return b.String()
}

// distPlot is the distribution plot's data binned and its scales.
type distPlot struct {
	ms          []float64 // times in milliseconds, sorted
	start, end  float64   // of the time axis, on bin edges
	width       float64   // of a bin
	counts      []int     // runs by bin
	yStep, yMax float64   // of the runs axis
}

// newDistPlot bins ns, which holds at least one time.
func newDistPlot(ns []int64) *distPlot {
	ms := make([]float64, len(ns))
	for i, v := range ns {
		ms[i] = float64(v) / 1e6
	}
	slices.Sort(ms)
	n := len(ms)
	lo, hi := ms[0], ms[n-1]
	if hi-lo < 1e-3 {
		lo, hi = lo-0.5, hi+0.5
	}
	// About two bins per square root of the runs: 11 for 30 runs.
	bins := min(max(int(math.Ceil(2*math.Sqrt(float64(n)))), 6), 40)
	width := niceBin((hi - lo) / float64(bins))
	start := math.Floor(lo/width) * width
	// Here and on the axes, loops count steps rather than add them: at
	// absurd magnitudes (a corrupt file) adding a step to a float may not
	// change it.
	nb := min(max(int(math.Floor((hi-start)/width))+1, 1), 200)
	d := &distPlot{ms: ms, start: start, end: start + float64(nb)*width, width: width, counts: make([]int, nb)}
	for _, v := range ms {
		d.counts[min(max(int((v-start)/width), 0), nb-1)]++
	}
	maxCount := slices.Max(d.counts)
	d.yStep = niceCount(float64(maxCount) / 5)
	d.yMax = math.Ceil(float64(maxCount)/d.yStep) * d.yStep
	return d
}

// x is where a time falls; yc where a count of runs does, and yp a share
// of them.
func (d *distPlot) x(v float64) float64  { return distLeft + (v-d.start)/(d.end-d.start)*distPlotW }
func (d *distPlot) yc(c float64) float64 { return distTop + distPlotH - c/d.yMax*distPlotH }
func (d *distPlot) yp(p float64) float64 { return distTop + distPlotH - p*distPlotH }

// drawAxes draws the grid, the axes with their ticks and the labels: runs
// on the left, cumulative share on the right, time below.
func (d *distPlot) drawAxes(b *strings.Builder) {
	for i := 0; i <= 20 && float64(i)*d.yStep <= d.yMax+1e-9; i++ {
		c := float64(i) * d.yStep
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="grid"/>`, f1(distLeft), f1(distLeft+distPlotW), f1(d.yc(c)), f1(d.yc(c)))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(distLeft-6), f1(d.yc(c)+4), fmtTick(c, d.yStep))
	}
	xStep := niceStep((d.end - d.start) / 7)
	first := math.Ceil(d.start/xStep) * xStep
	for i := 0; i <= 20 && first+float64(i)*xStep <= d.end+1e-9; i++ {
		v := first + float64(i)*xStep
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(d.x(v)), f1(d.x(v)), f1(distTop+distPlotH), f1(distTop+distPlotH+5))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="tick">%s</text>`, f1(d.x(v)), f1(distTop+distPlotH+28), fmtTick(v, xStep))
	}
	for _, p := range []float64{0, .25, .5, .75, 1} {
		fmt.Fprintf(b, `<text x="%s" y="%s" class="tick">%d%%</text>`, f1(distLeft+distPlotW+6), f1(d.yp(p)+4), int(p*100))
	}
	fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(distLeft), f1(distLeft+distPlotW), f1(distTop+distPlotH), f1(distTop+distPlotH))
	fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(distLeft), f1(distLeft), f1(distTop), f1(distTop+distPlotH))
	fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(distLeft+distPlotW), f1(distLeft+distPlotW), f1(distTop), f1(distTop+distPlotH))
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="label">time to leader (ms)</text>`, f1(distLeft+distPlotW/2), f1(distH-10))
	fmt.Fprintf(b, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle" class="label">runs</text>`, f1(distTop+distPlotH/2))
	fmt.Fprintf(b, `<text transform="translate(%s %s) rotate(90)" text-anchor="middle" class="label">cumulative share of runs</text>`, f1(distW-12), f1(distTop+distPlotH/2))
}

// drawBars draws the histogram, each bar with its range and count as a
// tooltip.
func (d *distPlot) drawBars(b *strings.Builder) {
	for i, c := range d.counts {
		if c == 0 {
			continue
		}
		lo, hi := d.start+float64(i)*d.width, d.start+float64(i+1)*d.width
		x0, x1 := d.x(lo), d.x(hi)
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.75" stroke="#fff"><title>%s–%s ms: %d runs</title></rect>`,
			f1(x0), f1(d.yc(float64(c))), f1(x1-x0), f1(d.yc(0)-d.yc(float64(c))), distBarColor,
			fmtTick(lo, d.width), fmtTick(hi, d.width), c)
	}
}

// drawRuns draws every run as a tick under the axis, so that few runs
// still show.
func (d *distPlot) drawRuns(b *strings.Builder) {
	for _, v := range d.ms {
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-opacity="0.6"/>`, f1(d.x(v)), f1(d.x(v)), f1(distTop+distPlotH+7), f1(distTop+distPlotH+15), distCDFColor)
	}
}

// drawCDF draws the empirical cumulative distribution as a step line.
func (d *distPlot) drawCDF(b *strings.Builder) {
	var path strings.Builder
	fmt.Fprintf(&path, "M%s %s", f1(d.x(d.start)), f1(d.yp(0)))
	for i, v := range d.ms {
		fmt.Fprintf(&path, " H%s V%s", f1(d.x(v)), f1(d.yp(float64(i+1)/float64(len(d.ms)))))
	}
	fmt.Fprintf(&path, " H%s", f1(d.x(d.end)))
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8"/>`, path.String(), distCDFColor)
}

// drawPercentiles marks the p50, p95 and p99, labelled above the plot; a
// label that would touch the one before goes a row higher, and labels near
// the right edge end at their line instead of centring on it.
func (d *distPlot) drawPercentiles(b *strings.Builder) {
	lastX, row := math.Inf(-1), 0
	for _, p := range []float64{50, 95, 99} {
		v := Percentile(d.ms, p)
		px := d.x(v)
		if px-lastX < 70 {
			row++
		} else {
			row = 0
		}
		lastX = px
		ly := distTop - 8 - float64(row)*13
		anchor := "middle"
		if px > distLeft+distPlotW-36 {
			anchor = "end"
		}
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="4 3"/>`, f1(px), f1(px), f1(ly+3), f1(distTop+distPlotH), distPctColor)
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" class="pct">p%g %s</text>`, f1(px), f1(ly), anchor, p, esc(fmtNS(int64(v*1e6))))
	}
}

// Layout of the sequence diagram.
const (
	seqLeft     = 118.0 // room for the time ruler
	seqRight    = 150.0
	seqTop      = 56.0
	seqBottom   = 40.0
	seqLane     = 64.0 // between lifelines
	seqPxPerMs  = 8.0
	seqMinStep  = 4.0  // between two distinct instants
	seqLabelGap = 15.0 // before a labelled group of messages
	seqMaxGap   = 36.0 // longer gaps are cut, and marked
)

// SequenceSVG draws an election as a message sequence diagram: time runs
// down, one lifeline per node, an arrow from (send time, sender) to
// (receive time, receiver). Messages a sender sent to several nodes within
// a millisecond share one label ("HALT e2 ×14"); quiet stretches longer
// than a few milliseconds are cut and marked with their length, so that a
// 500 ms failure timeout does not push the election off the page.
func SequenceSVG(seq Sequence) string {
	d := newSeqDiagram(seq)
	var b strings.Builder
	d.drawHeader(&b)
	d.drawCuts(&b)
	d.drawFaults(&b)
	d.drawLifelines(&b)
	d.drawRuler(&b)
	d.drawMessages(&b)
	b.WriteString(`</svg>`)
	return b.String()
}

// seqDiagram is a Sequence laid out: a lane for every node, a height for
// every instant.
type seqDiagram struct {
	title   string
	faults  []FaultMark
	nodes   []string // lifelines, left to right
	lane    map[string]int
	msgs    []SequenceMessage // by send time
	origin  time.Time         // time zero of the ruler
	groups  []msgGroup
	groupOf []int       // by message, its group
	times   []time.Time // every instant, in order, once
	y       map[time.Time]float64
	cuts    []seqCut
	bottom  float64 // where the lifelines end
}

// msgGroup is messages of one type and epoch within a millisecond, from
// one sender (a fan-out) or to one receiver (a fan-in), labelled once.
type msgGroup struct {
	first, count int // first is an index in the sorted messages
	fanIn        bool
	labelled     bool
}

// seqCut is a quiet stretch left out of the diagram.
type seqCut struct {
	y   float64
	gap time.Duration
}

func newSeqDiagram(seq Sequence) *seqDiagram {
	d := &seqDiagram{title: seq.Title, faults: seq.Faults, origin: seq.Origin}
	d.nodes, d.lane = seqLanes(seq)
	d.msgs = slices.Clone(seq.Messages)
	slices.SortStableFunc(d.msgs, func(a, b SequenceMessage) int { return a.Time.Compare(b.Time) })
	if d.origin.IsZero() {
		for _, t := range eventTimes(d.msgs, seq.Faults) {
			if d.origin.IsZero() || t.Before(d.origin) {
				d.origin = t
			}
		}
	}
	d.groups, d.groupOf = groupMessages(d.msgs)
	d.layout()
	return d
}

// seqLanes returns the lifelines, those seq lists and then the nodes its
// messages name but it does not, with the lane of each.
func seqLanes(seq Sequence) ([]string, map[string]int) {
	lane := map[string]int{}
	for i, n := range seq.Nodes {
		lane[n] = i
	}
	nodes := slices.Clone(seq.Nodes)
	for _, m := range seq.Messages {
		for _, n := range []string{m.From, m.To} {
			if _, ok := lane[n]; !ok {
				lane[n] = len(nodes)
				nodes = append(nodes, n)
			}
		}
	}
	return nodes, lane
}

// groupMessages groups what a sender fanned out, or what a receiver
// collected (the ANSWERs or HALT_ACKs of one round), within a millisecond,
// so that a round carries one label rather than a staircase of them. msgs
// are by send time; it returns the groups and the group of each message.
func groupMessages(msgs []SequenceMessage) ([]msgGroup, []int) {
	var groups []msgGroup
	groupOf := make([]int, len(msgs))
	for i, m := range msgs {
		found := -1
		for k := len(groups) - 1; k >= 0; k-- {
			g := &groups[k]
			f := msgs[g.first]
			if m.Time.Sub(f.Time) > time.Millisecond {
				break
			}
			if f.Type != m.Type || f.Epoch != m.Epoch {
				continue
			}
			fanOut := f.From == m.From && !g.fanIn
			fanIn := f.To == m.To && (g.fanIn || g.count == 1) && f.From != m.From
			if fanOut || fanIn {
				g.fanIn = fanIn && !fanOut
				found = k
				break
			}
		}
		if found < 0 {
			groups = append(groups, msgGroup{first: i})
			found = len(groups) - 1
		}
		groups[found].count++
		groupOf[i] = found
	}
	return groups, groupOf
}

// layout maps instants to heights: proportional to time, at least
// seqMinStep apart, more before a labelled group, and cut beyond seqMaxGap.
func (d *seqDiagram) layout() {
	starts := map[time.Time]bool{}
	for _, g := range d.groups {
		starts[d.msgs[g.first].Time] = true
	}
	times := eventTimes(d.msgs, d.faults)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	d.times = slices.CompactFunc(times, func(a, b time.Time) bool { return a.Equal(b) })
	d.y = map[time.Time]float64{}
	cur := seqTop + 12
	for i, t := range d.times {
		if i > 0 {
			gap := t.Sub(d.times[i-1])
			dy := float64(gap) / 1e6 * seqPxPerMs
			if dy > seqMaxGap {
				d.cuts = append(d.cuts, seqCut{y: cur + seqMaxGap/2, gap: gap})
				dy = seqMaxGap
			}
			dy = max(dy, seqMinStep)
			if starts[t] {
				dy = max(dy, seqLabelGap)
			}
			cur += dy
		}
		d.y[t] = cur
	}
	d.bottom = cur + 24
}

func (d *seqDiagram) yOf(t time.Time) float64 {
	if v, ok := d.y[t]; ok {
		return v
	}
	return seqTop
}

func (d *seqDiagram) xOf(n string) float64 { return seqLeft + float64(d.lane[n])*seqLane }

// span returns the x of the first and the last lifeline; a diagram of
// fewer than two nodes is as wide as one of two.
func (d *seqDiagram) span() (float64, float64) {
	return seqLeft, seqLeft + float64(max(len(d.nodes), 2)-1)*seqLane
}

// drawHeader opens the SVG and defines an arrowhead per message type, in
// the type's colour.
func (d *seqDiagram) drawHeader(b *strings.Builder) {
	_, last := d.span()
	W := last + seqRight
	H := d.bottom + seqBottom
	fmt.Fprintf(b, `<svg class="seq" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s">`, f1(W), f1(H), f1(W), f1(H), esc(d.title))
	fmt.Fprintf(b, `<title>%s</title><defs>`, esc(d.title))
	used := map[string]bool{}
	for _, m := range d.msgs {
		used[m.Type] = true
	}
	for _, t := range sortTypes(used) {
		fmt.Fprintf(b, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="%s"/></marker>`,
			markerID(t), colorOf(t))
	}
	b.WriteString(`</defs>`)
}

// band returns the x range of the bands drawn across the lifelines.
func (d *seqDiagram) band() (float64, float64) {
	first, last := d.span()
	return first - 24, last + 24
}

// drawCuts draws each cut as a light band across the diagram with the time
// left out.
func (d *seqDiagram) drawCuts(b *strings.Builder) {
	x0, x1 := d.band()
	for _, c := range d.cuts {
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="10" class="cut"/>`, f1(x0), f1(c.y-5), f1(x1-x0))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="cuttext">⋯ %s ⋯</text>`, f1(x0-6), f1(c.y+4), esc(fmtNS(int64(c.gap))))
	}
}

// drawFaults draws each fault as a band, its text to the right of the
// lifelines and a cross on the lifelines of the nodes it struck.
func (d *seqDiagram) drawFaults(b *strings.Builder) {
	x0, x1 := d.band()
	for _, f := range d.faults {
		y0 := d.yOf(f.Time)
		y1 := y0
		if !f.End.IsZero() {
			y1 = d.yOf(f.End)
		}
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" class="fault"><title>%s</title></rect>`,
			f1(x0), f1(y0-4), f1(x1-x0), f1(y1-y0+8), esc(f.Text))
		fmt.Fprintf(b, `<text x="%s" y="%s" class="faulttext">%s</text>`, f1(x1+6), f1(y0+4), esc(f.Text))
		for _, n := range f.Nodes {
			if _, ok := d.lane[n]; ok {
				x := d.xOf(n)
				fmt.Fprintf(b, `<path d="M%s %s l10 10 m0 -10 l-10 10" class="struck"/>`, f1(x-5), f1(y0-5))
			}
		}
	}
}

// drawLifelines draws the lifelines with their names above and below.
func (d *seqDiagram) drawLifelines(b *strings.Builder) {
	for _, n := range d.nodes {
		x := d.xOf(n)
		fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="life"/>`, f1(x), f1(x), f1(seqTop), f1(d.bottom))
		for _, ty := range []float64{seqTop - 10, d.bottom + 18} {
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" class="node">%s</text>`, f1(x), f1(ty), esc(n))
		}
	}
}

// drawRuler labels the instants with their time, skipping those that
// would touch the label above.
func (d *seqDiagram) drawRuler(b *strings.Builder) {
	x0, _ := d.band()
	lastLabel := math.Inf(-1)
	for _, t := range d.times {
		if yy := d.y[t]; yy-lastLabel >= 13 {
			fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(x0-6), f1(yy+4), esc(fmtOffsetMS(t.Sub(d.origin))))
			lastLabel = yy
		}
	}
}

// drawMessages draws an arrow per message, dashed when its receipt is
// unknown, then the group labels after all the arrows so that none is
// drawn over a label.
func (d *seqDiagram) drawMessages(b *strings.Builder) {
	var labels strings.Builder
	for i, m := range d.msgs {
		x0, x1 := d.xOf(m.From), d.xOf(m.To)
		y0 := d.yOf(m.Time)
		y1, dash := y0, ` stroke-dasharray="5 3"`
		if !m.RecvTime.IsZero() {
			y1, dash = d.yOf(m.RecvTime), ""
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.4"%s marker-end="url(#arrow-%s)"><title>%s %s → %s, epoch %d, sent %s</title></line>`,
			f1(x0), f1(y0), f1(x1), f1(y1), colorOf(m.Type), dash, markerID(m.Type),
			esc(m.Type), esc(m.From), esc(m.To), m.Epoch, esc(fmtOffsetMS(m.Time.Sub(d.origin))))
		g := &d.groups[d.groupOf[i]]
		if g.labelled {
			continue
		}
		g.labelled = true
		text := fmt.Sprintf("%s e%d", m.Type, m.Epoch)
		if g.count > 1 {
			text += fmt.Sprintf(" ×%d", g.count)
		}
		lx, anchor := g.labelAt(x0, x1)
		fmt.Fprintf(&labels, `<text x="%s" y="%s" text-anchor="%s" class="msg" fill="%s">%s</text>`,
			f1(lx), f1(y0-4), anchor, colorOf(m.Type), esc(text))
	}
	b.WriteString(labels.String())
}

// labelAt places the group's label above its first arrow, from x0 to x1:
// at the sender for a fan-out (the arrows part ways there), at the
// receiver for a fan-in (they meet there), at the middle for a single
// message. It returns the label's x and text-anchor.
func (g *msgGroup) labelAt(x0, x1 float64) (float64, string) {
	switch {
	case g.count > 1 && g.fanIn:
		if x0 > x1 {
			return x1 - 8, "end"
		}
		return x1 + 8, "start"
	case g.count > 1:
		if x1 < x0 {
			return x0 - 6, "end"
		}
		return x0 + 6, "start"
	}
	return (x0 + x1) / 2, "middle"
}

func eventTimes(msgs []SequenceMessage, faults []FaultMark) []time.Time {
	var ts []time.Time
	for _, m := range msgs {
		ts = append(ts, m.Time)
		if !m.RecvTime.IsZero() {
			ts = append(ts, m.RecvTime)
		}
	}
	for _, f := range faults {
		ts = append(ts, f.Time)
		if !f.End.IsZero() {
			ts = append(ts, f.End)
		}
	}
	return ts
}

// markerID makes a type name safe as an SVG id.
func markerID(t string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '-'
	}, t)
}

// fmtOffsetMS prints a time relative to the origin in milliseconds.
func fmtOffsetMS(d time.Duration) string {
	return fmt.Sprintf("%+.1f ms", float64(d)/1e6)
}
