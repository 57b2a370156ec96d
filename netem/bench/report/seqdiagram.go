package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// Sequence is one election drawn as a space-time diagram: a lifeline per
// node, time running down, an arrow per message from its send on the
// sender's lifeline to its receipt on the receiver's.
type Sequence struct {
	Title string
	// Nodes are the lifelines from left to right; lowest ID first reads
	// like the algorithm (elections go right, HALTs and COORDINATORs left).
	Nodes    []string
	Messages []SequenceMessage
	// Faults are those in the diagram's time and those before it whose
	// span (a partition until its heal, a crash until its restart)
	// reaches into it: the diagram pairs them into spans itself.
	Faults []FaultMark
	// Origin is time zero of the time axis, normally the measured fault;
	// zero means the earliest event.
	Origin time.Time
	// Capture is the run's pcapng relative to the report, linked beside
	// the diagram; "" links none.
	Capture string
	// Lanes, when not nil, are the nodes' leaders over the run, drawn
	// under the diagram.
	Lanes *LeaderLanes
	// Scale is how time maps to height; "" is ScaleAuto.
	Scale DiagramScale
	// Settled, when not nil, is where the run's leader settled: the end
	// of its time to leader, drawn as a line across the lifelines.
	Settled *LeaderMark
	// LeaderChanges are the tenures that began after Settled, each
	// marked on its leader's lifeline.
	LeaderChanges []LeaderMark
}

// LeaderMark is a leader taking over at an instant.
type LeaderMark struct {
	Time   time.Time
	Leader string
	Epoch  uint64
	// AfterFault is the kind of the fault after the measured one that
	// came before this change (a heal): a change it explains, not a
	// later leader change the run counts; "" for one no fault explains.
	AfterFault string
}

// SequenceMessage is one frame between two nodes.
type SequenceMessage struct {
	// Time is the send: when the sender's kernel sent it, or with
	// SendUnknown the capture's timestamp of the frame entering the
	// switch, which comes after any delay the sender's egress adds.
	Time        time.Time
	SendUnknown bool
	// RecvTime is when the frame reached the receiver's switch port (its
	// kernel has it microseconds later); zero when unknown.
	RecvTime time.Time
	// Dropped says the receiver never acknowledged it: a cut or a loss
	// dropped it at the receiver's input, at RecvTime when known, or the
	// capture ended first.
	Dropped  bool
	From, To string
	Type     string // wire type name: ELECTION, HALT...
	Epoch    uint64
	// Copy numbers the frame's copies on the wire when one was lost: 0
	// its first transmission, k its k-th TCP retransmission, drawn as an
	// arrow of its own. FirstSent is, for a retransmission, when the
	// first copy was sent.
	Copy      int
	FirstSent time.Time
	// Resent says a Dropped copy was lost: its sender sent the same bytes
	// again before any ACK covering them came; CutDrop that a fault
	// record severed its direction while it was on the switch.
	Resent, CutDrop bool
}

// FaultMark is a fault or lifecycle change at an instant; the diagram
// draws it as a mark of its kind on the lifelines it struck, and pairs it
// with its end (a heal, a restart) into a span.
type FaultMark struct {
	Kind  string // a fault kind (crash, partition...); others draw as a plain fault
	Time  time.Time
	Text  string
	Nodes []string
	// Groups are a partition's sides.
	Groups [][]string
	// Links are the node pairs a cut severs.
	Links [][2]string
	// Skewed says a clock fault left its Nodes off their hosts' clocks;
	// false for one that put them back.
	Skewed bool
}

// Layout of the space-time diagram.
const (
	seqLeft = 132.0 // room for the time ruler and the cut lengths
	seqTop  = 56.0
	// Lifelines are seqMaxLane apart, closer when there are many, so
	// that a star of 16 fits the report's width still legible.
	seqMaxLane, seqMinLane, seqLanesWidth = 100.0, 64.0, 960.0
	seqPxPerMs                            = 8.0
	seqMinStep                            = 4.0  // between two distinct instants
	seqLinear                             = 36.0 // longer gaps grow by seqLogPx a doubling, and are marked as cut
	seqLogPx                              = 10.0
	seqMinW                               = 640.0
	seqDropGap                            = 16.0 // between a dropped message's cross and its receiver
	seqLabelGap                           = 14.0 // before a labelled group of messages: a row for its label
)

// SequenceSVG draws an election as a space-time diagram: time runs down,
// one lifeline per node, an arrow from (send time, sender) to (receipt
// time, receiver); a copy of a frame lost on the wire ends in a cross
// and its retransmission has an arrow of its own. Messages a sender sent
// to several nodes within a millisecond share one label ("HALT e2 ×14"),
// as do those several sent to one; no label covers another. Time runs on
// the scale seq.Scale picks (DiagramScale), named in the diagram's
// header: true, or compressed, where gaps longer than a few milliseconds
// are drawn shorter, on a log scale, and marked with their length, so
// that a 500 ms failure timeout does not push the election off the page.
// Faults are marks of their kind, and what lasts (a partition, a pause, a
// crash) a span until its end; where the leader settled is a line across
// the lifelines, and each later leader change a mark on its leader's; a
// legend lists what the diagram uses.
func SequenceSVG(seq Sequence) string {
	svg, _ := SequenceFigure(seq)
	return svg
}

// MaxDrawnMessages is the most messages SequenceSVG draws. Each label is
// placed clear of every arrow, so the layout grows with their square: 8,000
// messages took 2 s, and an election of 80,000 (star500 partitioned, each
// survivor asking every member above it) held the bench's report for
// minutes, for a diagram too dense to read.
const MaxDrawnMessages = 5000

// SequenceFigure is SequenceSVG and SequenceNote from one layout. An
// election of more than MaxDrawnMessages messages is not drawn; its note
// says so.
func SequenceFigure(seq Sequence) (svg, note string) {
	if len(seq.Messages) > MaxDrawnMessages {
		return "", fmt.Sprintf("Not drawn: %d messages, more than the %d a diagram draws; `bullylab analyze --timeline` lists them from the capture.", len(seq.Messages), MaxDrawnMessages)
	}
	d := newSeqDiagram(seq)
	return d.svg(), d.note(seq)
}

// svg draws the laid-out diagram.
func (d *seqDiagram) svg() string {
	var body strings.Builder
	d.drawCuts(&body)
	d.drawSpans(&body)
	d.drawLifelines(&body)
	d.drawArrows(&body)
	d.drawFaultMarks(&body)
	d.drawLeaderMarks(&body)
	d.drawScaleNote(&body)
	d.drawTexts(&body)
	d.drawLegend(&body)
	var b strings.Builder
	d.drawHeader(&b)
	b.WriteString(body.String())
	b.WriteString(`</svg>`)
	return b.String()
}

// seqDiagram is a Sequence laid out: a lane for every node, a height for
// every instant, a place for every text.
type seqDiagram struct {
	title   string
	nodes   []string // lifelines, left to right
	lane    map[string]int
	laneGap float64           // between lifelines
	msgs    []SequenceMessage // by send time
	faults  []FaultMark       // by time
	spans   []FaultSpan
	origin  time.Time
	groups  []msgGroup
	groupOf []int   // by message, its group
	times   []int64 // every instant (UnixNano), in order, once
	y       map[int64]float64
	cuts    []seqCut
	arrows  []seqArrow // by message
	marks   []faultGlyph
	texts   []seqText
	leaders []seqLeader
	// settled and changes are the leader marks (Sequence.Settled,
	// LeaderChanges); askedScale the scale asked for, scale the one drawn
	// with pxPerMs (true scale) from the first instant, t0.
	settled     *LeaderMark
	changes     []LeaderMark
	leaderMarks []leaderGlyph
	askedScale  DiagramScale
	scale       DiagramScale
	pxPerMs     float64
	t0          int64
	lifeEnd     float64 // where the lifelines end
	width       float64
	legend      seqLegend
}

// msgGroup is messages of one type and epoch within a millisecond, from
// one sender (a fan-out) or to one receiver (a fan-in), labelled once.
type msgGroup struct {
	first, count int // first is an index in the sorted messages
	fanIn        bool
}

// seqCut is a long gap drawn shorter than its time.
type seqCut struct {
	y   float64
	gap time.Duration
}

// seqArrow is where a message is drawn: from (x0, y0) to (x1, y1), which
// for a dropped message is its cross, short of the receiver.
type seqArrow struct {
	x0, y0, x1, y1 float64
	dashed         bool
}

// seqLeader ties a label pushed away from its arrow back to it.
type seqLeader struct {
	x0, y0, x1, y1 float64
	color          string
}

func newSeqDiagram(seq Sequence) *seqDiagram {
	d := &seqDiagram{title: seq.Title, origin: seq.Origin, settled: seq.Settled, changes: seq.LeaderChanges, askedScale: seq.Scale}
	d.nodes, d.lane = seqLanes(seq)
	d.laneGap = min(max(seqLanesWidth/float64(max(len(d.nodes)-1, 1)), seqMinLane), seqMaxLane)
	d.msgs = slices.Clone(seq.Messages)
	slices.SortStableFunc(d.msgs, func(a, b SequenceMessage) int { return a.Time.Compare(b.Time) })
	d.faults = slices.Clone(seq.Faults)
	slices.SortStableFunc(d.faults, func(a, b FaultMark) int { return a.Time.Compare(b.Time) })
	if d.origin.IsZero() {
		if ts := eventTimes(d.msgs, d.faults); len(ts) > 0 {
			d.origin = time.Unix(0, slices.Min(ts))
		}
	}
	d.groups, d.groupOf = groupMessages(d.msgs)
	d.spans = FaultSpans(d.faults)
	d.layoutTimes()
	d.layoutArrows()
	d.layoutFaultMarks()
	d.layoutLeaderMarks()
	d.layoutTexts()
	d.layoutLegend()
	return d
}

// seqLanes returns the lifelines, those seq lists and then the nodes its
// messages and faults name but it does not, with the lane of each.
func seqLanes(seq Sequence) ([]string, map[string]int) {
	lane := map[string]int{}
	nodes := []string{}
	add := func(n string) {
		if _, ok := lane[n]; !ok && n != "" {
			lane[n] = len(nodes)
			nodes = append(nodes, n)
		}
	}
	for _, n := range seq.Nodes {
		add(n)
	}
	for _, m := range seq.Messages {
		add(m.From)
		add(m.To)
	}
	for _, f := range seq.Faults {
		for _, n := range f.struck() {
			add(n)
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
			if f.Type != m.Type || f.Epoch != m.Epoch || (f.Copy > 0) != (m.Copy > 0) {
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

// eventTimes are the instants the diagram shows, as UnixNano.
func eventTimes(msgs []SequenceMessage, faults []FaultMark) []int64 {
	var ts []int64
	for _, m := range msgs {
		ts = append(ts, m.Time.UnixNano())
		if !m.RecvTime.IsZero() {
			ts = append(ts, m.RecvTime.UnixNano())
		}
	}
	for _, f := range faults {
		ts = append(ts, f.Time.UnixNano())
	}
	return ts
}

// layoutTimes maps instants to heights: proportional to time for gaps up
// to seqLinear pixels, on a log scale beyond (marked as cut), at least
// seqMinStep apart and seqLabelGap before a labelled group, so that the
// mapping keeps every order (an arrow never rises, and what was sent
// after a receipt starts below it) and a crowded round still has rows
// for its labels.
func (d *seqDiagram) layoutTimes() {
	times := eventTimes(d.msgs, d.faults)
	if d.settled != nil {
		times = append(times, d.settled.Time.UnixNano())
	}
	for _, c := range d.changes {
		times = append(times, c.Time.UnixNano())
	}
	slices.Sort(times)
	d.times = slices.Compact(times)
	var span time.Duration
	if len(d.times) > 0 {
		d.t0 = d.times[0]
		span = time.Duration(d.times[len(d.times)-1] - d.t0)
	}
	d.scale = d.askedScale.resolve(span, typicalDelay(d.msgs))
	if d.scale == ScaleTrue {
		d.layoutTrueTimes(span)
		return
	}
	starts := map[int64]bool{}
	for _, g := range d.groups {
		starts[d.msgs[g.first].Time.UnixNano()] = true
	}
	d.y = map[int64]float64{}
	cur := seqTop + 14
	for i, t := range d.times {
		if i > 0 {
			gap := time.Duration(t - d.times[i-1])
			dy := float64(gap) / 1e6 * seqPxPerMs
			if dy > seqLinear {
				dy = seqLinear + seqLogPx*math.Log2(dy/seqLinear)
				d.cuts = append(d.cuts, seqCut{y: cur + dy/2, gap: gap})
			}
			dy = max(dy, seqMinStep)
			if starts[t] {
				dy = max(dy, seqLabelGap)
			}
			cur += dy
		}
		d.y[t] = cur
	}
	d.lifeEnd = cur + 24
}

// layoutTrueTimes maps instants to heights on one linear scale: instants
// closer than a few pixels share a row, and their labels move aside.
func (d *seqDiagram) layoutTrueTimes(span time.Duration) {
	d.pxPerMs = truePxPerMs(span)
	d.y = map[int64]float64{}
	for _, t := range d.times {
		d.y[t] = d.trueY(t)
	}
	d.lifeEnd = d.trueY(d.t0+int64(span)) + 24
}

func (d *seqDiagram) trueY(t int64) float64 {
	return seqTop + 14 + float64(t-d.t0)/1e6*d.pxPerMs
}

func (d *seqDiagram) yOf(t time.Time) float64 {
	if v, ok := d.y[t.UnixNano()]; ok {
		return v
	}
	if d.scale == ScaleTrue {
		return d.trueY(t.UnixNano())
	}
	return seqTop
}

func (d *seqDiagram) xOf(n string) float64 { return seqLeft + float64(d.lane[n])*d.laneGap }

// span returns the x of the first and the last lifeline; a diagram of
// fewer than two nodes is as wide as one of two.
func (d *seqDiagram) span() (float64, float64) {
	return seqLeft, seqLeft + float64(max(len(d.nodes), 2)-1)*d.laneGap
}

// band returns the x range of the bands drawn across the lifelines.
func (d *seqDiagram) band() (float64, float64) {
	first, last := d.span()
	return first - 30, last + 30
}

// layoutArrows places each message's arrow: from its send to its receipt,
// level at its send time when the receipt is unknown, and for a dropped
// message ending in a cross short of the receiver.
func (d *seqDiagram) layoutArrows() {
	d.arrows = make([]seqArrow, len(d.msgs))
	for i, m := range d.msgs {
		a := seqArrow{x0: d.xOf(m.From), y0: d.yOf(m.Time), x1: d.xOf(m.To)}
		a.y1 = a.y0
		if !m.RecvTime.IsZero() {
			a.y1 = d.yOf(m.RecvTime)
		}
		a.dashed = m.SendUnknown || m.RecvTime.IsZero() && !m.Dropped
		if m.Dropped {
			if dx := a.x1 - a.x0; math.Abs(dx) > seqDropGap {
				f := (math.Abs(dx) - seqDropGap) / math.Abs(dx)
				a.x1 = a.x0 + dx*f
				a.y1 = a.y0 + (a.y1-a.y0)*f
			}
		}
		d.arrows[i] = a
	}
}

// drawHeader opens the SVG and defines an arrowhead per message type, in
// the type's colour. The diagram carries its own sizes and colours, so it
// reads the same taken out of the page.
func (d *seqDiagram) drawHeader(b *strings.Builder) {
	W, H := d.width, d.legend.bottom+12
	fmt.Fprintf(b, `<svg class="seq" xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="system-ui, 'DejaVu Sans', sans-serif" role="img" aria-label="%s">`,
		f1(W), f1(H), f1(W), f1(H), esc(d.title))
	fmt.Fprintf(b, `<title>%s</title><defs>`, esc(d.title))
	for _, t := range d.usedTypes() {
		fmt.Fprintf(b, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0 0 L10 5 L0 10 z" fill="%s"/></marker>`,
			markerID(t), colorOf(t))
	}
	b.WriteString(`</defs>`)
}

func (d *seqDiagram) usedTypes() []string {
	used := map[string]bool{}
	for _, m := range d.msgs {
		used[m.Type] = true
	}
	return results.SortMessageTypes(used)
}

// drawCuts draws each cut as a light band across the diagram.
func (d *seqDiagram) drawCuts(b *strings.Builder) {
	x0, x1 := d.band()
	for _, c := range d.cuts {
		fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="10" fill="#f2f3f4"/>`, f1(x0), f1(c.y-5), f1(x1-x0))
	}
}

// drawLifelines draws each lifeline, solid while its node is up and
// dotted while it is down (crashed, or left), with its name above and
// below.
func (d *seqDiagram) drawLifelines(b *strings.Builder) {
	for _, n := range d.nodes {
		x := d.xOf(n)
		from := seqTop
		for _, s := range d.spans {
			if s.node != n || s.kind != spanDown {
				continue
			}
			y0, y1 := d.spanYs(s)
			if y0 > from {
				fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#aab7b8"/>`, f1(x), f1(x), f1(from), f1(y0))
			}
			fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#7f8c8d" stroke-width="1.6" stroke-dasharray="2 4"/>`, f1(x), f1(x), f1(y0), f1(y1))
			from = y1
		}
		if from < d.lifeEnd {
			fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#aab7b8"/>`, f1(x), f1(x), f1(from), f1(d.lifeEnd))
		}
	}
}

// drawArrows draws an arrow per message, dashed when its send or receipt
// time is unknown, a dropped one ending in a cross.
func (d *seqDiagram) drawArrows(b *strings.Builder) {
	for i, m := range d.msgs {
		a := d.arrows[i]
		dash, end := "", fmt.Sprintf(` marker-end="url(#arrow-%s)"`, markerID(m.Type))
		if a.dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		if m.Dropped {
			end = ""
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.4"%s%s><title>%s</title></line>`,
			f1(a.x0), f1(a.y0), f1(a.x1), f1(a.y1), colorOf(m.Type), dash, end, esc(d.arrowTip(m)))
		if m.Copy > 0 {
			b.WriteString(retransmitRing(a.x0, a.y0, colorOf(m.Type), d.arrowTip(m)))
		}
		if m.Dropped {
			fmt.Fprintf(b, `<path d="M%s %s l8 8 m0 -8 l-8 8" stroke="%s" stroke-width="2"/>`, f1(a.x1-4), f1(a.y1-4), colorOf(m.Type))
		}
	}
}

// retransmitRing marks where a retransmission left its sender: a ring
// on the lifeline, so that the arrow reads as a copy sent again.
func retransmitRing(x, y float64, color, tip string) string {
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="4" fill="#fff" stroke="%s" stroke-width="1.6"><title>%s</title></circle>`, f1(x), f1(y), color, esc(tip))
}

// arrowTip is a message's tooltip: what it was, and when it was sent and
// received as far as known.
func (d *seqDiagram) arrowTip(m SequenceMessage) string {
	s := fmt.Sprintf("%s %s → %s, epoch %d, ", m.Type, m.From, m.To, m.Epoch)
	if m.Copy > 0 {
		s = "retransmission of " + s
		if !m.FirstSent.IsZero() {
			s += "first sent " + fmtOffsetMS(m.FirstSent.Sub(d.origin)) + ", "
		}
	}
	if m.SendUnknown {
		s += "captured " + fmtOffsetMS(m.Time.Sub(d.origin)) + " (send time unknown)"
	} else {
		s += "sent " + fmtOffsetMS(m.Time.Sub(d.origin))
	}
	switch {
	case m.Dropped && (m.Resent || m.CutDrop):
		s += ", lost at " + fmtOffsetMS(m.RecvTime.Sub(d.origin))
		if m.CutDrop {
			s += " (a fault cut " + m.From + " → " + m.To + ")"
		}
		if m.Resent {
			s += ": its sender sent it again"
		}
	case m.Dropped && !m.RecvTime.IsZero():
		s += ", never acknowledged: dropped at " + fmtOffsetMS(m.RecvTime.Sub(d.origin))
	case m.Dropped:
		s += ", never acknowledged"
	case !m.RecvTime.IsZero():
		s += ", received " + fmtOffsetMS(m.RecvTime.Sub(d.origin))
	default:
		s += ", receipt unknown"
	}
	return s
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
func fmtOffsetMS(d time.Duration) string { return fmtOffsetDec(d, 1) }

// fmtOffsetDec prints a time relative to the origin in milliseconds with dec
// decimals.
func fmtOffsetDec(d time.Duration, dec int) string {
	return fmt.Sprintf("%+.*f ms", dec, float64(d)/1e6)
}
