package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// Notes of the legend, each shown when the diagram has what it explains.
const (
	legendEpochNote  = "eN: the epoch the message carries: the term of the leader it elects or announces."
	legendSharedNote = "×N: N messages of one type and epoch, sent by one node to several or by several to one within 1 ms, share one label."
	legendLeaderNote = "A dotted line ties a label moved for room back to its arrow or its fault."
)

// seqLegend is the legend under the diagram: a swatch and a text for each
// message type, arrow style, fault mark and span the diagram uses, then
// the notes on its labels.
type seqLegend struct {
	swatches []string
	texts    []seqText
	bottom   float64
}

// legendEntry is one swatch and what it means; draw draws the swatch in
// the 28×12 box whose left middle is (x, y).
type legendEntry struct {
	draw func(x, y float64) string
	text string
}

const (
	legendSwatch = 28.0
	legendRow    = 20.0
	legendLeft   = 14.0
)

// layoutLegend lays out the legend's entries in rows as wide as the
// diagram, under the lifelines' lower names, then its notes.
func (d *seqDiagram) layoutLegend() {
	lg := &d.legend
	top := d.lifeEnd + 44
	entries := d.legendEntries()
	for _, e := range entries {
		d.width = max(d.width, 2*legendLeft+legendSwatch+6+textWidth(e.text, seqLegendFont))
	}
	x, y := legendLeft, top
	for _, e := range entries {
		t := seqText{size: seqLegendFont, fill: "#1b2631", text: e.text}
		w := legendSwatch + 6 + textWidth(e.text, seqLegendFont)
		if x > legendLeft && x+w > d.width-legendLeft {
			x, y = legendLeft, y+legendRow
		}
		lg.swatches = append(lg.swatches, e.draw(x, y-4))
		t.x, t.y = x+legendSwatch+6, y
		lg.texts = append(lg.texts, t)
		x += w + 18
	}
	for _, note := range d.legendNotes() {
		for _, line := range wrapText(note, seqLegendFont, d.width-2*legendLeft) {
			y += legendRow - 3
			lg.texts = append(lg.texts, seqText{x: legendLeft, y: y + 3, size: seqLegendFont, fill: "#616a6b", text: line})
		}
	}
	lg.bottom = y + 8
	lg.swatches = append(lg.swatches, fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#d5d8dc"/>`, f1(legendLeft), f1(d.width-legendLeft), f1(top-16), f1(top-16)))
}

// legendEntries are the entries for what the diagram uses, in the order
// it is read: messages, how arrows end, faults, spans, cuts.
func (d *seqDiagram) legendEntries() []legendEntry {
	var es []legendEntry
	for _, t := range d.usedTypes() {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.6" marker-end="url(#arrow-%s)"/>`, f1(x), f1(x+legendSwatch-2), f1(y), f1(y), colorOf(t), markerID(t))
		}, t})
	}
	es = append(es, d.arrowEntries()...)
	es = append(es, d.leaderEntries()...)
	es = append(es, d.faultEntries()...)
	es = append(es, d.spanEntries()...)
	if len(d.cuts) > 0 {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<rect x="%s" y="%s" width="%g" height="10" fill="#f2f3f4" stroke="#d5d8dc"/>`, f1(x), f1(y-5), legendSwatch)
		}, "a long gap, drawn shorter: its length on the left"})
	}
	return es
}

const legendArrowColor = "#566573"

func legendArrow(x, y float64, dash string) string {
	return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4"%s/><path d="M%s %s l-7 -3.5 v7 z" fill="%s"/>`,
		f1(x), f1(x+legendSwatch), f1(y-5), f1(y+5), legendArrowColor, dash, f1(x+legendSwatch), f1(y+5), legendArrowColor)
}

// arrowEntries explain the arrows' styles that are drawn.
func (d *seqDiagram) arrowEntries() []legendEntry {
	var delivered, dashed, dropped, lost, resent bool
	for i, m := range d.msgs {
		switch {
		case m.Dropped && (m.Resent || m.CutDrop):
			lost = true
		case m.Dropped:
			dropped = true
		case m.Copy > 0:
			resent = true
		case d.arrows[i].dashed:
			dashed = true
		default:
			delivered = true
		}
		if m.SendUnknown {
			dashed = true
		}
	}
	var es []legendEntry
	if delivered {
		es = append(es, legendEntry{func(x, y float64) string { return legendArrow(x, y, "") }, "from its send to its receipt"})
	}
	if dashed {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4" stroke-dasharray="5 3"/>`, f1(x), f1(x+legendSwatch), f1(y), f1(y), legendArrowColor)
		}, "send or receipt time unknown: drawn level, when the capture saw it"})
	}
	if dropped {
		es = append(es, legendEntry{func(x, y float64) string {
			return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4"/>%s`, f1(x), f1(x+legendSwatch-8), f1(y-4), f1(y+2), legendArrowColor,
				fmt.Sprintf(`<path d="M%s %s l8 8 m0 -8 l-8 8" stroke="%s" stroke-width="2"/>`, f1(x+legendSwatch-8), f1(y-2), legendArrowColor))
		}, "never acknowledged: dropped, or the capture ended"})
	}
	cross := func(x, y float64) string {
		return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s" stroke-width="1.4"/>%s`, f1(x), f1(x+legendSwatch-8), f1(y-4), f1(y+2), legendArrowColor,
			fmt.Sprintf(`<path d="M%s %s l8 8 m0 -8 l-8 8" stroke="%s" stroke-width="2"/>`, f1(x+legendSwatch-8), f1(y-2), legendArrowColor))
	}
	if lost {
		es = append(es, legendEntry{cross, "lost on the wire (sent again before any ACK, or while a fault cut the link): crossed where it was lost"})
	}
	if resent {
		es = append(es, legendEntry{func(x, y float64) string {
			return legendArrow(x, y, "") + retransmitRing(x, y-5, legendArrowColor, "retransmission")
		}, "TCP retransmission of a lost copy: from its resend to its receipt"})
	}
	return es
}

// faultEntries explain the fault marks drawn, in the order of fault.Kinds.
func (d *seqDiagram) faultEntries() []legendEntry {
	used := map[string]bool{}
	for _, f := range d.faults {
		used[f.Kind] = true
	}
	var kinds []string
	for _, k := range fault.Kinds {
		if used[string(k)] {
			kinds = append(kinds, string(k))
			delete(used, string(k))
		}
	}
	if len(used) > 0 {
		kinds = append(kinds, "")
	}
	var es []legendEntry
	for _, k := range kinds {
		st := styleOf(k)
		es = append(es, legendEntry{func(x, y float64) string { return st.glyph(x+legendSwatch/2, y, st.color) }, st.meaning})
	}
	return es
}

// spanEntries explain the spans drawn: each side of a partition, the
// cut, isolated, paused, skewed and down stretches.
func (d *seqDiagram) spanEntries() []legendEntry {
	seen := map[string]bool{}
	var es []legendEntry
	for _, k := range append(slices.Clone(drawnSpans), spanDown) {
		for _, s := range d.spans {
			if s.kind != k {
				continue
			}
			l := lookOf(s)
			if k == spanDown {
				l.label = "down (crashed or left): its lifeline dotted"
			}
			if seen[l.label] {
				continue
			}
			seen[l.label] = true
			es = append(es, legendEntry{func(x, y float64) string {
				if k == spanDown {
					return fmt.Sprintf(`<line x1="%s" x2="%s" y1="%s" y2="%s" stroke="#7f8c8d" stroke-width="1.6" stroke-dasharray="2 4"/>`, f1(x+legendSwatch/2), f1(x+legendSwatch/2), f1(y-7), f1(y+7))
				}
				return fmt.Sprintf(`<rect x="%s" y="%s" width="%g" height="14" fill="%s" fill-opacity="%g"/>`, f1(x+(legendSwatch-l.width)/2), f1(y-7), l.width, l.fill, l.opacity)
			}, l.label})
		}
	}
	return es
}

// legendNotes are the notes on what the labels say.
func (d *seqDiagram) legendNotes() []string {
	var notes []string
	if len(d.msgs) > 0 {
		notes = append(notes, legendEpochNote)
	}
	for _, g := range d.groups {
		if g.count > 1 {
			notes = append(notes, legendSharedNote)
			break
		}
	}
	if len(d.leaders) > 0 {
		notes = append(notes, legendLeaderNote)
	}
	return notes
}

// wrapText breaks s between words into lines no wider than width.
func wrapText(s string, size, width float64) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && textWidth(line+" "+w, size) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func (d *seqDiagram) drawLegend(b *strings.Builder) {
	for _, s := range d.legend.swatches {
		b.WriteString(s)
	}
	for _, t := range d.legend.texts {
		b.WriteString(t.svg())
	}
}

func timeOf(ns int64) time.Time { return time.Unix(0, ns) }
