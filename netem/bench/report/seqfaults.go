package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// faultStyle is how the diagram marks a fault kind: a glyph of its own
// shape and colour, so that a crash, a delay and a heal are told apart
// at a glance and in grey-scale.
type faultStyle struct {
	color string
	glyph func(x, y float64, color string) string
	// meaning is the legend's line for the kind.
	meaning string
}

var faultStyles = map[string]faultStyle{
	string(fault.Crash):     {"#c0392b", glyphCrossBadge, "crash: the process killed"},
	string(fault.Restart):   {"#1e8449", glyphDot, "restart"},
	string(fault.Pause):     {"#e67e22", glyphBars, "pause (SIGSTOP)"},
	string(fault.Resume):    {"#9a7d0a", glyphPlay, "resume (SIGCONT)"},
	string(fault.Partition): {"#7d3c98", glyphDiamond, "partition"},
	string(fault.Heal):      {"#7d3c98", glyphHollowDiamond, "heal: partitions, cuts and isolations end"},
	string(fault.Isolate):   {"#6e2c00", glyphSquare, "isolate"},
	string(fault.Unisolate): {"#ba4a00", glyphHollowSquare, "unisolate"},
	string(fault.Delay):     {"#2471a3", glyphClock, "delay added to what the node sends"},
	string(fault.Loss):      {"#2e86c1", glyphDownTriangle, "loss added to what the node sends"},
	string(fault.Clear):     {"#17a589", glyphHollowCircle, "clear: impairments restored"},
	string(fault.Campaign):  {"#b7950b", glyphStar, "campaign: asked to start an election"},
	string(fault.Leave):     {"#566573", glyphHollowDownTriangle, "leave: announces LEAVE and stops"},
	string(fault.Join):      {"#117a65", glyphHollowUpTriangle, "join: starts and announces JOIN"},
	string(fault.Cut):       {"#7d3c98", glyphSlash, "cut: links between node pairs severed, the others up"},
	string(fault.Clock):     {"#1a5276", glyphHourglass, "clock: the node's wall clock offset or drifting"},
}

// otherFault marks a kind the diagram does not know.
var otherFault = faultStyle{"#922b21", glyphBang, "fault"}

func styleOf(kind string) faultStyle {
	if s, ok := faultStyles[kind]; ok {
		return s
	}
	return otherFault
}

// The glyphs fit a 12×12 square centred on (x, y).

// glyphCrossBadge is a white cross on a disc: a dropped message ends in
// a bare cross of its type's colour, and HALT's is the crash's red.
func glyphCrossBadge(x, y float64, c string) string {
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="6.5" fill="%s"/><path d="M%s %s l6 6 m0 -6 l-6 6" stroke="#fff" stroke-width="2"/>`, f1(x), f1(y), c, f1(x-3), f1(y-3))
}

func glyphDot(x, y float64, c string) string {
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="5" fill="%s"/>`, f1(x), f1(y), c)
}

func glyphHollowCircle(x, y float64, c string) string {
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="4.5" fill="#fff" stroke="%s" stroke-width="2"/>`, f1(x), f1(y), c)
}

func glyphClock(x, y float64, c string) string {
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="5.5" fill="#fff" stroke="%s" stroke-width="1.6"/><path d="M%s %s v-3.5 M%s %s h3" stroke="%s" stroke-width="1.4"/>`,
		f1(x), f1(y), c, f1(x), f1(y), f1(x), f1(y), c)
}

func glyphBars(x, y float64, c string) string {
	return fmt.Sprintf(`<rect x="%s" y="%s" width="3.5" height="11" fill="%s"/><rect x="%s" y="%s" width="3.5" height="11" fill="%s"/>`,
		f1(x-5), f1(y-5.5), c, f1(x+1.5), f1(y-5.5), c)
}

func glyphPlay(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s l10 6 l-10 6 z" fill="%s"/>`, f1(x-4.5), f1(y-6), c)
}

func glyphDiamond(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s l6 6 l-6 6 l-6 -6 z" fill="%s"/>`, f1(x), f1(y-6), c)
}

func glyphHollowDiamond(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s l5.5 5.5 l-5.5 5.5 l-5.5 -5.5 z" fill="#fff" stroke="%s" stroke-width="2"/>`, f1(x), f1(y-5.5), c)
}

func glyphSquare(x, y float64, c string) string {
	return fmt.Sprintf(`<rect x="%s" y="%s" width="10" height="10" fill="%s"/>`, f1(x-5), f1(y-5), c)
}

func glyphHollowSquare(x, y float64, c string) string {
	return fmt.Sprintf(`<rect x="%s" y="%s" width="9" height="9" fill="#fff" stroke="%s" stroke-width="2"/>`, f1(x-4.5), f1(y-4.5), c)
}

func glyphDownTriangle(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s h12 l-6 10 z" fill="%s"/>`, f1(x-6), f1(y-5), c)
}

func glyphHollowDownTriangle(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s h11 l-5.5 9.5 z" fill="#fff" stroke="%s" stroke-width="1.8"/>`, f1(x-5.5), f1(y-4.5), c)
}

func glyphHollowUpTriangle(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s h11 l-5.5 -9.5 z" fill="#fff" stroke="%s" stroke-width="1.8"/>`, f1(x-5.5), f1(y+4.5), c)
}

func glyphStar(x, y float64, c string) string {
	var p strings.Builder
	for i := range 10 {
		r := 6.5
		if i%2 == 1 {
			r = 2.8
		}
		a := float64(i) * math.Pi / 5
		cmd := "L"
		if i == 0 {
			cmd = "M"
		}
		fmt.Fprintf(&p, "%s%s %s ", cmd, f1(x+r*math.Sin(a)), f1(y-r*math.Cos(a)))
	}
	return fmt.Sprintf(`<path d="%sz" fill="%s"/>`, p.String(), c)
}

func glyphSlash(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s l12 -12" stroke="%s" stroke-width="3"/>`, f1(x-6), f1(y+6), c)
}

func glyphHourglass(x, y float64, c string) string {
	return fmt.Sprintf(`<path d="M%s %s h10 l-10 12 h10 z" fill="%s"/>`, f1(x-5), f1(y-6), c)
}

func glyphBang(x, y float64, c string) string {
	return fmt.Sprintf(`<rect x="%s" y="%s" width="3" height="7" fill="%s"/><rect x="%s" y="%s" width="3" height="3" fill="%s"/>`,
		f1(x-1.5), f1(y-6), c, f1(x-1.5), f1(y+3), c)
}

// struck are the nodes a fault mark is drawn on: its nodes, for a
// partition those of its sides, for a cut those of its links.
func (f FaultMark) struck() []string {
	if len(f.Nodes) > 0 {
		return f.Nodes
	}
	var ns []string
	for _, g := range f.Groups {
		ns = append(ns, g...)
	}
	for _, l := range f.Links {
		for _, n := range l {
			if !slices.Contains(ns, n) {
				ns = append(ns, n)
			}
		}
	}
	return ns
}

// spanKind is what a span shows of a node.
type spanKind int

const (
	spanDown     spanKind = iota // crashed or left: its lifeline dotted
	spanPaused                   // stopped: it sends and reads nothing
	spanIsolated                 // cut from every other node
	spanCut                      // on one side of a partition
	spanLinksCut                 // some of its links cut: it reaches only some nodes
	spanClock                    // its wall clock off its host's
)

// FaultSpan is a node in one state from start to end; a zero end lasts
// past the diagram.
type FaultSpan struct {
	kind       spanKind
	node       string
	side       int // of a partition, from 0
	Start, End time.Time
	Opener     int // the fault mark that began it
}

// FaultSpans pairs the marks, by time, into spans: a crash or a leave
// until the node's restart or join, a pause until its resume, an
// isolation until its unisolate or a heal, each side of a partition until
// a heal (or a later partition, which redraws the sides), the nodes of a
// cut's links until a heal or the next cut, and a node's skewed clock until a clock fault
// puts it back.
func FaultSpans(marks []FaultMark) []FaultSpan {
	var spans []FaultSpan
	open := map[spanKind]map[string]int{spanDown: {}, spanPaused: {}, spanIsolated: {}, spanCut: {}, spanLinksCut: {}, spanClock: {}}
	begin := func(k spanKind, n string, side int, at time.Time, opener int) {
		if _, ok := open[k][n]; ok {
			return
		}
		open[k][n] = len(spans)
		spans = append(spans, FaultSpan{kind: k, node: n, side: side, Start: at, Opener: opener})
	}
	finish := func(k spanKind, n string, at time.Time) {
		if i, ok := open[k][n]; ok {
			spans[i].End = at
			delete(open[k], n)
		}
	}
	finishAll := func(k spanKind, at time.Time) {
		for _, n := range sortedKeys(open[k]) {
			finish(k, n, at)
		}
	}
	for i, f := range marks {
		switch fault.Kind(f.Kind) {
		case fault.Crash, fault.Leave:
			for _, n := range f.Nodes {
				finish(spanPaused, n, f.Time)
				begin(spanDown, n, 0, f.Time, i)
			}
		case fault.Restart, fault.Join:
			for _, n := range f.Nodes {
				finish(spanDown, n, f.Time)
			}
		case fault.Pause:
			for _, n := range f.Nodes {
				begin(spanPaused, n, 0, f.Time, i)
			}
		case fault.Resume:
			for _, n := range f.Nodes {
				finish(spanPaused, n, f.Time)
			}
		case fault.Isolate:
			for _, n := range f.Nodes {
				begin(spanIsolated, n, 0, f.Time, i)
			}
		case fault.Unisolate:
			for _, n := range f.Nodes {
				finish(spanIsolated, n, f.Time)
			}
		case fault.Partition:
			finishAll(spanCut, f.Time)
			for side, g := range f.Groups {
				for _, n := range g {
					begin(spanCut, n, side, f.Time, i)
				}
			}
		case fault.Cut:
			finishAll(spanLinksCut, f.Time) // a cut replaces the one in force
			for _, n := range f.struck() {
				begin(spanLinksCut, n, 0, f.Time, i)
			}
		case fault.Clock:
			for _, n := range f.Nodes {
				// A new skew replaces the old: the span shows the latest.
				finish(spanClock, n, f.Time)
				if f.Skewed {
					begin(spanClock, n, 0, f.Time, i)
				}
			}
		case fault.Heal:
			finishAll(spanCut, f.Time)
			finishAll(spanLinksCut, f.Time)
			finishAll(spanIsolated, f.Time)
		}
	}
	return spans
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// spanYs is where span s runs, clipped to the lifelines.
func (d *seqDiagram) spanYs(s FaultSpan) (float64, float64) {
	y0, y1 := d.yOf(s.Start), d.lifeEnd
	if !s.End.IsZero() {
		y1 = d.yOf(s.End)
	}
	return y0, y1
}

// spanLook is how a span is shaded: its width across the lifeline, fill
// and opacity. Narrower spans are drawn over wider ones.
type spanLook struct {
	width   float64
	fill    string
	opacity float64
	label   string
}

// cutSideColors shade the sides of a partition.
var cutSideColors = []string{"#a569bd", "#48c9b0", "#f5b041", "#5dade2"}

func lookOf(s FaultSpan) spanLook {
	switch s.kind {
	case spanCut:
		return spanLook{30, cutSideColors[s.side%len(cutSideColors)], 0.28, fmt.Sprintf("partitioned: side %d", s.side+1)}
	case spanLinksCut:
		return spanLook{24, "#884ea0", 0.18, "links cut: reaches only some nodes"}
	case spanIsolated:
		return spanLook{20, "#a04000", 0.25, "isolated"}
	case spanClock:
		return spanLook{4, "#1a5276", 0.7, "clock skewed"}
	case spanPaused:
		return spanLook{9, "#e67e22", 0.55, "paused"}
	}
	return spanLook{}
}

// drawnSpans are the kinds of span drawn as shading, widest first.
var drawnSpans = []spanKind{spanCut, spanLinksCut, spanIsolated, spanPaused, spanClock}

// drawSpans shades the partitioned, cut, isolated, paused and skewed
// stretches of the lifelines, widest first.
func (d *seqDiagram) drawSpans(b *strings.Builder) {
	for _, k := range drawnSpans {
		for _, s := range d.spans {
			if s.kind != k {
				continue
			}
			l := lookOf(s)
			y0, y1 := d.spanYs(s)
			x := d.xOf(s.node)
			fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s" fill-opacity="%g"><title>%s %s</title></rect>`,
				f1(x-l.width/2), f1(y0), f1(l.width), f1(max(y1-y0, 2)), l.fill, l.opacity, esc(s.node), esc(l.label))
		}
	}
}

// faultGlyph is a fault's mark at one place: on a lifeline it struck, or
// for one that names none (a heal) left of the lifelines, with a dotted
// line across them.
type faultGlyph struct {
	mark   int
	x, y   float64
	across bool
}

// layoutFaultMarks places every fault's glyphs, side by side where two
// faults struck one lifeline at one instant.
func (d *seqDiagram) layoutFaultMarks() {
	taken := map[[2]float64]int{}
	at := func(x, y float64) float64 {
		k := [2]float64{x, y}
		n := taken[k]
		taken[k]++
		return x + 13*float64(n)
	}
	x0, _ := d.band()
	for i, f := range d.faults {
		y := d.yOf(f.Time)
		ns := f.struck()
		if len(ns) == 0 {
			d.marks = append(d.marks, faultGlyph{mark: i, x: at(x0+8, y), y: y, across: true})
			continue
		}
		for _, n := range ns {
			d.marks = append(d.marks, faultGlyph{mark: i, x: at(d.xOf(n), y), y: y})
		}
	}
}

func (d *seqDiagram) drawFaultMarks(b *strings.Builder) {
	_, x1 := d.band()
	for _, g := range d.marks {
		f := d.faults[g.mark]
		st := styleOf(f.Kind)
		if g.across {
			fmt.Fprintf(b, `<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-dasharray="2 3"/>`, f1(g.x+7), f1(x1), f1(g.y), f1(g.y), st.color)
		}
		fmt.Fprintf(b, `<g><title>%s</title>%s</g>`, esc(f.Text), st.glyph(g.x, g.y, st.color))
	}
}
