package report

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// Text sizes of the space-time diagram, in pixels.
const (
	seqMsgFont    = 10.5
	seqTickFont   = 11.0
	seqNodeFont   = 12.0
	seqFaultFont  = 11.5
	seqLegendFont = 11.5
	seqLine       = 13.0 // a line of seqMsgFont text and its halo
)

// seqText is one text of the diagram, placed.
type seqText struct {
	x, y   float64 // of the baseline's anchor
	anchor string  // start, middle or end
	size   float64
	bold   bool
	italic bool
	fill   string
	halo   bool // a white outline, over lines drawn under it
	text   string
}

// box is a rectangle, x0 < x1 and y0 < y1, y growing down.
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool {
	return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
}

func (a box) grow(m float64) box { return box{a.x0 - m, a.y0 - m, a.x1 + m, a.y1 + m} }

// textWidth estimates how wide s is set at size: capitals, digits and ×
// are wider than an average letter, spaces and i, l, . narrower. It errs
// wide: a label that is thought wider than it is only moves further.
func textWidth(s string, size float64) float64 {
	em := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("il.,:;|!'jI()[]", r):
			em += 0.36
		case r == ' ':
			em += 0.34
		case r >= 'A' && r <= 'Z', r == 'm', r == 'w', r == '×', r == '⋯', r == '→':
			em += 0.84
		case r >= '0' && r <= '9', r == '+', r == '−', r == '±':
			em += 0.7
		default:
			em += 0.64
		}
	}
	return max(em, 0.6*float64(utf8.RuneCountInString(s))) * size
}

// box is the room t takes: its advance across, from above its capitals
// to below its descenders.
func (t seqText) box() box {
	w := textWidth(t.text, t.size)
	x0 := t.x
	switch t.anchor {
	case "middle":
		x0 -= w / 2
	case "end":
		x0 -= w
	}
	return box{x0, t.y - 0.8*t.size, x0 + w, t.y + 0.25*t.size}
}

func (t seqText) svg() string {
	var attrs strings.Builder
	fmt.Fprintf(&attrs, `x="%s" y="%s"`, f1(t.x), f1(t.y))
	if t.anchor != "start" && t.anchor != "" {
		fmt.Fprintf(&attrs, ` text-anchor="%s"`, t.anchor)
	}
	fmt.Fprintf(&attrs, ` font-size="%g" fill="%s"`, t.size, t.fill)
	if t.bold {
		attrs.WriteString(` font-weight="600"`)
	}
	if t.italic {
		attrs.WriteString(` font-style="italic"`)
	}
	if t.halo {
		attrs.WriteString(` paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"`)
	}
	return fmt.Sprintf(`<text %s>%s</text>`, attrs.String(), esc(t.text))
}

// textPlacer keeps the room taken, so that no text is put over another,
// and the arrows, which a label should rather not cover.
type textPlacer struct {
	taken  []box
	arrows []placedArrow
	minX   float64 // nothing left of this
}

type placedArrow struct {
	seqArrow
	group int
}

// clear says whether b covers no arrow but those of group.
func (p *textPlacer) clear(b box, group int) bool {
	for _, a := range p.arrows {
		if a.group != group && segmentCrosses(a.x0, a.y0, a.x1, a.y1, b) {
			return false
		}
	}
	return true
}

// segmentCrosses says whether the segment from (x0, y0) to (x1, y1)
// passes through b (Liang-Barsky clipping).
func segmentCrosses(x0, y0, x1, y1 float64, b box) bool {
	dx, dy := x1-x0, y1-y0
	lo, hi := 0.0, 1.0
	for _, e := range [4][2]float64{{-dx, x0 - b.x0}, {dx, b.x1 - x0}, {-dy, y0 - b.y0}, {dy, b.y1 - y0}} {
		pp, q := e[0], e[1]
		if pp == 0 {
			if q < 0 {
				return false
			}
			continue
		}
		r := q / pp
		if pp < 0 {
			lo = max(lo, r)
		} else {
			hi = min(hi, r)
		}
		if lo > hi {
			return false
		}
	}
	return true
}

// fits says whether b touches nothing taken, with a pixel to spare.
func (p *textPlacer) fits(b box) bool {
	if b.x0 < p.minX {
		return false
	}
	g := b.grow(1)
	for _, t := range p.taken {
		if g.overlaps(t) {
			return false
		}
	}
	return true
}

func (p *textPlacer) take(b box) { p.taken = append(p.taken, b) }

// place puts the text at the first of cands (at least one) that fits
// and covers no arrow but group's (-1: none is its own), else at the
// first that fits, or, when none does, the first pushed down until it
// fits; moved says it was pushed.
func (p *textPlacer) place(cands []seqText, group int) (t seqText, moved bool) {
	for _, c := range cands {
		if b := c.box(); p.fits(b) && p.clear(b, group) {
			p.take(b)
			return c, false
		}
	}
	for _, c := range cands {
		if p.fits(c.box()) {
			p.take(c.box())
			return c, false
		}
	}
	t = cands[0]
	if b := t.box(); b.x0 < p.minX {
		t.x += p.minX - b.x0
	}
	// Each step clears the box it hit, and below everything taken it
	// fits: the loop ends, within a step per box.
	for {
		hit, ok := p.hit(t.box())
		if !ok {
			break
		}
		t.y += hit.y1 - t.box().y0 + 1.5
	}
	p.take(t.box())
	return t, true
}

// hit returns a box taken that b touches, the lowest of them.
func (p *textPlacer) hit(b box) (box, bool) {
	g := b.grow(1)
	var low box
	found := false
	for _, t := range p.taken {
		if g.overlaps(t) && (!found || t.y1 > low.y1) {
			low, found = t, true
		}
	}
	return low, found
}

// tryPlace puts t where it is if it fits there, and says whether it did.
func (p *textPlacer) tryPlace(t seqText) bool {
	if !p.fits(t.box()) {
		return false
	}
	p.take(t.box())
	return true
}

// layoutTexts places every text of the diagram above the legend: the
// lifelines' names and the fault glyphs first, as they cannot move; the
// cut lengths; the ruler's times where they fit; the faults' texts right
// of the lifelines; then the messages' labels near their arrows, each
// pushed down, with a leader line back, when nothing near is free. The
// lifelines then end below the lowest of them.
func (d *seqDiagram) layoutTexts() {
	x0, x1 := d.band()
	p := &textPlacer{minX: 2}
	for i, a := range d.arrows {
		p.arrows = append(p.arrows, placedArrow{a, d.groupOf[i]})
	}
	for _, n := range d.nodes {
		d.addFixed(p, seqText{x: d.xOf(n), y: seqTop - 10, anchor: "middle", size: seqNodeFont, bold: true, fill: "#1b2631", text: n})
	}
	for _, g := range d.marks {
		p.take(box{g.x - 7, g.y - 7, g.x + 7, g.y + 7})
	}
	for _, c := range d.cuts {
		d.addFixed(p, seqText{x: x0 - 6, y: c.y + 4, anchor: "end", size: seqTickFont, italic: true, fill: "#616a6b", text: "⋯ " + results.FormatNS(int64(c.gap)) + " ⋯"})
	}
	d.placeTicks(p)
	for _, f := range d.faults {
		y := d.yOf(f.Time)
		color := styleOf(f.Kind).color
		t, moved := p.place([]seqText{{x: x1 + 10, y: y + 4, size: seqFaultFont, bold: true, fill: color, halo: true, text: f.Text}}, -1)
		d.texts = append(d.texts, t)
		if moved {
			d.leaders = append(d.leaders, seqLeader{x0: t.x - 2, y0: t.y - 4, x1: x1, y1: y, color: color})
		}
	}
	d.placeLeaderTexts(p)
	for k := range d.groups {
		d.placeGroupLabel(p, k)
	}
	for _, b := range p.taken {
		d.lifeEnd = max(d.lifeEnd, b.y1+10)
	}
	for _, n := range d.nodes {
		d.addFixed(p, seqText{x: d.xOf(n), y: d.lifeEnd + 18, anchor: "middle", size: seqNodeFont, bold: true, fill: "#1b2631", text: n})
	}
	d.width = seqMinW
	for _, b := range p.taken {
		d.width = max(d.width, b.x1+12)
	}
	d.width = max(d.width, x1+12, 2*legendLeft+textWidth(d.scaleText(), seqLegendFont))
}

// placeTicks puts the instants' times on the ruler where they fit, to a
// tenth of a millisecond, or as much finer, down to the microsecond, as
// it takes for no two ticks to read the same.
func (d *seqDiagram) placeTicks(p *textPlacer) {
	x0, _ := d.band()
	var ticks []seqText
	var taken []box
	for dec := 1; dec <= 3; dec++ {
		trial := &textPlacer{taken: slices.Clone(p.taken), minX: p.minX}
		ticks = ticks[:0]
		for _, t := range d.times {
			tick := seqText{x: x0 - 6, y: d.y[t] + 4, anchor: "end", size: seqTickFont, fill: "#616a6b", text: fmtOffsetDec(timeOf(t).Sub(d.origin), dec)}
			if trial.tryPlace(tick) {
				ticks = append(ticks, tick)
			}
		}
		taken = trial.taken
		if distinctTexts(ticks) {
			break
		}
	}
	p.taken = taken
	d.texts = append(d.texts, ticks...)
}

func distinctTexts(ts []seqText) bool {
	for i := 1; i < len(ts); i++ {
		if ts[i].text == ts[i-1].text {
			return false
		}
	}
	return true
}

func (d *seqDiagram) addFixed(p *textPlacer, t seqText) {
	p.take(t.box())
	d.texts = append(d.texts, t)
}

// placeGroupLabel labels group g ("HALT e2 ×6"): a fan-out at its sender,
// where the arrows part, a fan-in at its receiver, where they meet, a
// single message along its arrow; above the arrow, else below, else
// further along it.
func (d *seqDiagram) placeGroupLabel(p *textPlacer, group int) {
	g := &d.groups[group]
	m := d.msgs[g.first]
	a := d.arrows[g.first]
	text := fmt.Sprintf("%s e%d", m.Type, m.Epoch)
	if m.Copy > 0 {
		text += " resent"
	}
	if g.count > 1 {
		text += fmt.Sprintf(" ×%d", g.count)
	}
	label := seqText{size: seqMsgFont, bold: true, fill: colorOf(m.Type), halo: true, text: text}
	at := func(x, y float64, anchor string) seqText {
		t := label
		t.x, t.y, t.anchor = x, y, anchor
		return t
	}
	var cands []seqText
	ax, ay := a.x0, a.y0 // where a pushed label's leader points
	switch {
	case g.count > 1 && g.fanIn:
		ax, ay = a.x1, a.y1
		near, far := "end", "start"
		side := -8.0
		if a.x0 < a.x1 {
			near, far, side = "start", "end", 8
		}
		cands = append(cands, at(a.x1+side, a.y1-4, near), at(a.x1+side, a.y1+12, near), at(a.x1-side, a.y1-4, far), at(a.x1-side, a.y1+12, far))
	case g.count > 1:
		near, side := "start", 8.0
		if a.x1 < a.x0 {
			near, side = "end", -8
		}
		cands = append(cands, at(a.x0+side, a.y0-4, near), at(a.x0+side, a.y0+12, near))
	default:
		ax, ay = (a.x0+a.x1)/2, (a.y0+a.y1)/2
	}
	for _, f := range []float64{0.5, 0.35, 0.65, 0.2, 0.8} {
		px, py := a.x0+f*(a.x1-a.x0), a.y0+f*(a.y1-a.y0)
		cands = append(cands, at(px, py-4, "middle"), at(px, py+12, "middle"))
	}
	t, moved := p.place(cands, group)
	d.texts = append(d.texts, t)
	if moved {
		b := t.box()
		d.leaders = append(d.leaders, seqLeader{x0: (b.x0 + b.x1) / 2, y0: b.y0, x1: ax, y1: ay, color: label.fill})
	}
}

// drawTexts draws the leader lines, then every text over them.
func (d *seqDiagram) drawTexts(b *strings.Builder) {
	for _, l := range d.leaders {
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-opacity="0.6" stroke-dasharray="1 2"/>`, f1(l.x0), f1(l.y0), f1(l.x1), f1(l.y1), l.color)
	}
	for _, t := range d.texts {
		b.WriteString(t.svg())
	}
}
