package report

import (
	"fmt"
	"strings"
)

// Colours of the leader marks: the settled leader's line, a later
// change's diamond.
const (
	settledColor = "#1e8449"
	changeColor  = "#b9770e"
	resumedColor = "#7f8c8d" // a change a later fault explains
)

// leaderGlyph is a leader mark placed: the line across the lifelines
// at y, and for a change the diamond on its leader's lifeline at x.
type leaderGlyph struct {
	x, y    float64
	text    string
	tip     string
	settled bool
	// explained says a later fault explains the change: it is drawn
	// grey, as the run does not count it.
	explained bool
}

// color is the mark's colour: settled, a counted later change, or one a
// later fault explains.
func (g leaderGlyph) color() string {
	switch {
	case g.settled:
		return settledColor
	case g.explained:
		return resumedColor
	}
	return changeColor
}

// layoutLeaderMarks places where the leader settled and each later
// change of leader.
func (d *seqDiagram) layoutLeaderMarks() {
	if s := d.settled; s != nil {
		text := fmt.Sprintf("leader %s settled %s", s.Leader, fmtOffsetMS(s.Time.Sub(d.origin)))
		d.leaderMarks = append(d.leaderMarks, leaderGlyph{x: d.xOf(s.Leader), y: d.yOf(s.Time), text: text, settled: true,
			tip: text + ": the run's time to leader, when the last live node was sent its COORDINATOR (ELECTED) of epoch " + fmt.Sprint(s.Epoch)})
	}
	for _, c := range d.changes {
		at := fmtOffsetMS(c.Time.Sub(d.origin))
		g := leaderGlyph{x: d.xOf(c.Leader), y: d.yOf(c.Time), text: fmt.Sprintf("leader %s e%d %s", c.Leader, c.Epoch, at),
			tip: fmt.Sprintf("%s took over at epoch %d %s, after the leader settled: a later leader change", c.Leader, c.Epoch, at)}
		if c.AfterFault != "" {
			g.explained = true
			g.text += ", after the " + c.AfterFault
			g.tip = fmt.Sprintf("%s took over at epoch %d %s, after the %s that followed the measured fault: not a later leader change", c.Leader, c.Epoch, at, c.AfterFault)
		}
		d.leaderMarks = append(d.leaderMarks, g)
	}
}

// placeLeaderTexts puts the leader marks' labels right of the lifelines,
// as the faults' are, tied back by a leader line when pushed down.
func (d *seqDiagram) placeLeaderTexts(p *textPlacer) {
	_, x1 := d.band()
	for _, g := range d.leaderMarks {
		color := g.color()
		if !g.settled {
			p.take(box{g.x - 6, g.y - 6, g.x + 6, g.y + 6})
		}
		t, moved := p.place([]seqText{{x: x1 + 10, y: g.y + 4, size: seqFaultFont, bold: true, fill: color, halo: true, text: g.text}}, -1)
		d.texts = append(d.texts, t)
		if moved {
			d.leaders = append(d.leaders, seqLeader{x0: t.x - 2, y0: t.y - 4, x1: x1, y1: g.y, color: color})
		}
	}
}

// drawLeaderMarks draws where the leader settled, a solid line across the
// lifelines, and each later change, a dashed line and a diamond on the
// new leader's lifeline.
func (d *seqDiagram) drawLeaderMarks(b *strings.Builder) {
	x0, x1 := d.band()
	for _, g := range d.leaderMarks {
		if g.settled {
			fmt.Fprintf(b, `<g><title>%s</title><line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="2" stroke-opacity="0.8"/>%s</g>`,
				esc(g.tip), f1(x0), f1(x1), f1(g.y), f1(g.y), settledColor, settledGlyph(g.x, g.y))
			continue
		}
		fmt.Fprintf(b, `<g><title>%s</title><line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4" stroke-dasharray="6 3"/>%s</g>`,
			esc(g.tip), f1(x0), f1(x1), f1(g.y), f1(g.y), g.color(), changeGlyph(g.x, g.y, g.color()))
	}
}

func settledGlyph(x, y float64) string {
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="5" fill="%s" stroke="#fff" stroke-width="1.5"/>`, f1(x), f1(y), settledColor)
}

func changeGlyph(x, y float64, color string) string {
	return fmt.Sprintf(`<path d="M%s %s l6 6 l-6 6 l-6 -6 z" fill="%s" stroke="#fff" stroke-width="1.2"/>`, f1(x), f1(y-6), color)
}

// leaderEntries explain the leader marks drawn.
func (d *seqDiagram) leaderEntries() []legendEntry {
	var settled, changed, explained bool
	for _, g := range d.leaderMarks {
		settled = settled || g.settled
		changed = changed || !g.settled && !g.explained
		explained = explained || g.explained
	}
	var es []legendEntry
	if settled {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="2" stroke-opacity="0.8"/>%s`, f1(x), f1(x+legendSwatch), f1(y), f1(y), settledColor, settledGlyph(x+legendSwatch/2, y))
		}, "the leader settled: the run's time to leader"})
	}
	if changed {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4" stroke-dasharray="6 3"/>%s`, f1(x), f1(x+legendSwatch), f1(y), f1(y), changeColor, changeGlyph(x+legendSwatch/2, y, changeColor))
		}, "a later leader change: a new tenure after settling and before any later fault, on its leader's lifeline; the run counts it"})
	}
	if explained {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4" stroke-dasharray="6 3"/>%s`, f1(x), f1(x+legendSwatch), f1(y), f1(y), resumedColor, changeGlyph(x+legendSwatch/2, y, resumedColor))
		}, "a new tenure after a later fault (a heal): that fault's, not counted as a later leader change"})
	}
	return es
}

// drawScaleNote writes the diagram's header: the time scale it is drawn
// with.
func (d *seqDiagram) drawScaleNote(b *strings.Builder) {
	b.WriteString(seqText{x: legendLeft, y: 18, size: seqLegendFont, fill: "#616a6b", text: d.scaleText()}.svg())
}
