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
	Messages []Message
	Faults   []FaultMark
	// Origin is time zero of the time axis, normally the measured fault;
	// zero means the earliest event.
	Origin time.Time
}

// Message is one frame between two nodes.
type Message struct {
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

// DistributionSVG draws times to leader (nanoseconds) as a histogram of
// runs with the cumulative distribution over it, the p50, p95 and p99
// marked, and every run as a tick under the axis.
func DistributionSVG(ns []int64, title string) string {
	const (
		W, H                   = 860.0, 330.0
		left, right, top, bot  = 58.0, 64.0, 44.0, 62.0
		plotW, plotH           = W - left - right, H - top - bot
		barColor, cdfColor, pc = "#5dade2", "#1b2631", "#922b21"
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="dist" width="%g" height="%g" viewBox="0 0 %g %g" role="img" aria-label="%s">`, W, H, W, H, esc(title))
	fmt.Fprintf(&b, `<title>%s</title>`, esc(title))
	if len(ns) == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" class="muted">no run passed: nothing to plot</text></svg>`, W/2, H/2)
		return b.String()
	}
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
	// Loops below count steps rather than add them: at absurd magnitudes
	// (a corrupt file) adding a step to a float may not change it.
	nb := min(max(int(math.Floor((hi-start)/width))+1, 1), 200)
	end := start + float64(nb)*width
	counts := make([]int, nb)
	for _, v := range ms {
		counts[min(max(int((v-start)/width), 0), nb-1)]++
	}
	maxCount := slices.Max(counts)
	yStep := niceCount(float64(maxCount) / 5)
	yMax := math.Ceil(float64(maxCount)/yStep) * yStep
	x := func(v float64) float64 { return left + (v-start)/(end-start)*plotW }
	yc := func(c float64) float64 { return top + plotH - c/yMax*plotH }
	yp := func(p float64) float64 { return top + plotH - p*plotH }

	// Grid and axes.
	for i := 0; i <= 20 && float64(i)*yStep <= yMax+1e-9; i++ {
		c := float64(i) * yStep
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="grid"/>`, f1(left), f1(left+plotW), f1(yc(c)), f1(yc(c)))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(left-6), f1(yc(c)+4), fmtTick(c, yStep))
	}
	xStep := niceStep((end - start) / 7)
	first := math.Ceil(start/xStep) * xStep
	for i := 0; i <= 20 && first+float64(i)*xStep <= end+1e-9; i++ {
		v := first + float64(i)*xStep
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(x(v)), f1(x(v)), f1(top+plotH), f1(top+plotH+5))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" class="tick">%s</text>`, f1(x(v)), f1(top+plotH+28), fmtTick(v, xStep))
	}
	for _, p := range []float64{0, .25, .5, .75, 1} {
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="tick">%d%%</text>`, f1(left+plotW+6), f1(yp(p)+4), int(p*100))
	}
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(left), f1(left+plotW), f1(top+plotH), f1(top+plotH))
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(left), f1(left), f1(top), f1(top+plotH))
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="axis"/>`, f1(left+plotW), f1(left+plotW), f1(top), f1(top+plotH))
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" class="label">time to leader (ms)</text>`, f1(left+plotW/2), f1(H-10))
	fmt.Fprintf(&b, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle" class="label">runs</text>`, f1(top+plotH/2))
	fmt.Fprintf(&b, `<text transform="translate(%s %s) rotate(90)" text-anchor="middle" class="label">cumulative share of runs</text>`, f1(W-12), f1(top+plotH/2))

	// Histogram bars, each with its range and count as a tooltip.
	for i, c := range counts {
		if c == 0 {
			continue
		}
		x0, x1 := x(start+float64(i)*width), x(start+float64(i+1)*width)
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="0.75" stroke="#fff"><title>%s–%s ms: %d runs</title></rect>`,
			f1(x0), f1(yc(float64(c))), f1(x1-x0), f1(yc(0)-yc(float64(c))), barColor,
			fmtTick(start+float64(i)*width, width), fmtTick(start+float64(i+1)*width, width), c)
	}
	// Every run as a tick under the axis, so that few runs still show.
	for _, v := range ms {
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-opacity="0.6"/>`, f1(x(v)), f1(x(v)), f1(top+plotH+7), f1(top+plotH+15), cdfColor)
	}
	// Empirical CDF as a step line.
	var path strings.Builder
	fmt.Fprintf(&path, "M%s %s", f1(x(start)), f1(yp(0)))
	for i, v := range ms {
		fmt.Fprintf(&path, " H%s V%s", f1(x(v)), f1(yp(float64(i+1)/float64(n))))
	}
	fmt.Fprintf(&path, " H%s", f1(x(end)))
	fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.8"/>`, path.String(), cdfColor)

	// Percentile markers, labelled above the plot; a label that would
	// touch the one before goes a row higher, and labels near the right
	// edge end at their line instead of centring on it.
	lastX, row := math.Inf(-1), 0
	for _, p := range []float64{50, 95, 99} {
		v := Percentile(ms, p)
		px := x(v)
		if px-lastX < 70 {
			row++
		} else {
			row = 0
		}
		lastX = px
		ly := top - 8 - float64(row)*13
		anchor := "middle"
		if px > left+plotW-36 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="4 3"/>`, f1(px), f1(px), f1(ly+3), f1(top+plotH), pc)
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="%s" class="pct">p%g %s</text>`, f1(px), f1(ly), anchor, p, esc(fmtNS(int64(v*1e6))))
	}
	b.WriteString(`</svg>`)
	return b.String()
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
	lane := map[string]int{}
	for i, n := range seq.Nodes {
		lane[n] = i
	}
	// Nodes the messages name but the caller did not list get lanes too.
	nodes := slices.Clone(seq.Nodes)
	for _, m := range seq.Messages {
		for _, n := range []string{m.From, m.To} {
			if _, ok := lane[n]; !ok {
				lane[n] = len(nodes)
				nodes = append(nodes, n)
			}
		}
	}
	msgs := slices.Clone(seq.Messages)
	slices.SortStableFunc(msgs, func(a, b Message) int { return a.Time.Compare(b.Time) })
	origin := seq.Origin
	if origin.IsZero() {
		for _, t := range eventTimes(msgs, seq.Faults) {
			if origin.IsZero() || t.Before(origin) {
				origin = t
			}
		}
	}

	// Group what a sender fanned out, or what a receiver collected (the
	// ANSWERs or HALT_ACKs of one round), within a millisecond, so that a
	// round carries one label rather than a staircase of them.
	type group struct {
		first, count int
		fanIn        bool
		labelled     bool
	}
	var groups []group
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
			groups = append(groups, group{first: i})
			found = len(groups) - 1
		}
		groups[found].count++
		groupOf[i] = found
	}

	// Map instants to heights: proportional to time, at least seqMinStep
	// apart, more before a labelled group, and cut beyond seqMaxGap.
	starts := map[time.Time]bool{}
	for _, g := range groups {
		starts[msgs[g.first].Time] = true
	}
	times := eventTimes(msgs, seq.Faults)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	times = slices.CompactFunc(times, func(a, b time.Time) bool { return a.Equal(b) })
	y := map[time.Time]float64{}
	type cut struct {
		y   float64
		gap time.Duration
	}
	var cuts []cut
	cur := seqTop + 12
	for i, t := range times {
		if i > 0 {
			gap := t.Sub(times[i-1])
			dy := float64(gap) / 1e6 * seqPxPerMs
			if dy > seqMaxGap {
				cuts = append(cuts, cut{y: cur + seqMaxGap/2, gap: gap})
				dy = seqMaxGap
			}
			dy = max(dy, seqMinStep)
			if starts[t] {
				dy = max(dy, seqLabelGap)
			}
			cur += dy
		}
		y[t] = cur
	}
	yOf := func(t time.Time) float64 {
		if v, ok := y[t]; ok {
			return v
		}
		return seqTop
	}
	bottom := cur + 24
	W := seqLeft + float64(max(len(nodes), 2)-1)*seqLane + seqRight
	H := bottom + seqBottom
	xOf := func(n string) float64 { return seqLeft + float64(lane[n])*seqLane }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="seq" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s">`, f1(W), f1(H), f1(W), f1(H), esc(seq.Title))
	fmt.Fprintf(&b, `<title>%s</title><defs>`, esc(seq.Title))
	used := map[string]bool{}
	for _, m := range msgs {
		used[m.Type] = true
	}
	for _, t := range sortTypes(used) {
		fmt.Fprintf(&b, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="%s"/></marker>`,
			markerID(t), colorOf(t))
	}
	b.WriteString(`</defs>`)

	// Cuts: a light band across the diagram with the time left out.
	bandX0, bandX1 := seqLeft-24, seqLeft+float64(max(len(nodes), 2)-1)*seqLane+24
	for _, c := range cuts {
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="10" class="cut"/>`, f1(bandX0), f1(c.y-5), f1(bandX1-bandX0))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" class="cuttext">⋯ %s ⋯</text>`, f1(bandX0-6), f1(c.y+4), esc(fmtNS(int64(c.gap))))
	}
	// Fault bands, their text to the right of the lifelines.
	for _, f := range seq.Faults {
		y0 := yOf(f.Time)
		y1 := y0
		if !f.End.IsZero() {
			y1 = yOf(f.End)
		}
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" class="fault"><title>%s</title></rect>`,
			f1(bandX0), f1(y0-4), f1(bandX1-bandX0), f1(y1-y0+8), esc(f.Text))
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="faulttext">%s</text>`, f1(bandX1+6), f1(y0+4), esc(f.Text))
		for _, n := range f.Nodes {
			if _, ok := lane[n]; ok {
				x := xOf(n)
				fmt.Fprintf(&b, `<path d="M%s %s l10 10 m0 -10 l-10 10" class="struck"/>`, f1(x-5), f1(y0-5))
			}
		}
	}
	// Lifelines with their names above and below.
	for _, n := range nodes {
		x := xOf(n)
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s" class="life"/>`, f1(x), f1(x), f1(seqTop), f1(bottom))
		for _, ty := range []float64{seqTop - 10, bottom + 18} {
			fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" class="node">%s</text>`, f1(x), f1(ty), esc(n))
		}
	}
	// Time ruler: a label per instant, skipping those that would touch.
	lastLabel := math.Inf(-1)
	for _, t := range times {
		if yy := y[t]; yy-lastLabel >= 13 {
			fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" class="tick">%s</text>`, f1(bandX0-6), f1(yy+4), esc(fmtOffsetMS(t.Sub(origin))))
			lastLabel = yy
		}
	}
	// Arrows, then the group labels on top of them.
	var labels strings.Builder
	for i, m := range msgs {
		x0, x1 := xOf(m.From), xOf(m.To)
		y0 := yOf(m.Time)
		y1, dash := y0, ` stroke-dasharray="5 3"`
		if !m.RecvTime.IsZero() {
			y1, dash = yOf(m.RecvTime), ""
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.4"%s marker-end="url(#arrow-%s)"><title>%s %s → %s, epoch %d, sent %s</title></line>`,
			f1(x0), f1(y0), f1(x1), f1(y1), colorOf(m.Type), dash, markerID(m.Type),
			esc(m.Type), esc(m.From), esc(m.To), m.Epoch, esc(fmtOffsetMS(m.Time.Sub(origin))))
		g := &groups[groupOf[i]]
		if g.labelled {
			continue
		}
		g.labelled = true
		text := fmt.Sprintf("%s e%d", m.Type, m.Epoch)
		if g.count > 1 {
			text += fmt.Sprintf(" ×%d", g.count)
		}
		// Above the first arrow: at the sender for a fan-out (the arrows
		// part ways there), at the receiver for a fan-in (they meet
		// there), at the middle for a single message.
		lx, anchor := (x0+x1)/2, "middle"
		switch {
		case g.count > 1 && g.fanIn:
			lx, anchor = x1+8, "start"
			if x0 > x1 {
				lx, anchor = x1-8, "end"
			}
		case g.count > 1:
			lx, anchor = x0+6, "start"
			if x1 < x0 {
				lx, anchor = x0-6, "end"
			}
		}
		fmt.Fprintf(&labels, `<text x="%s" y="%s" text-anchor="%s" class="msg" fill="%s">%s</text>`,
			f1(lx), f1(y0-4), anchor, colorOf(m.Type), esc(text))
	}
	b.WriteString(labels.String())
	b.WriteString(`</svg>`)
	return b.String()
}

func eventTimes(msgs []Message, faults []FaultMark) []time.Time {
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
