package report

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/topologies/fault"
)

// election5 is a five-node election after n5 was lost: n1 detects, its
// ELECTION climbs, each node above answers the lower ones and elects in
// turn, n4 hears nothing from n5, halts the lower nodes, waits for their
// HALT_ACKs and sends its COORDINATORs. Every message is sent as soon as
// the one it answers arrived, and takes delay on its sender's egress;
// what goes to n5 is never acknowledged. Without a delay it all happens
// within a millisecond and a half. lost is how n5 was lost: crash, or
// partition (healed after the election).
func election5(delay time.Duration, lost string) Sequence {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	e := &electionBuilder{delay: delay, lost: "n5", seq: Sequence{
		Title:  "five nodes, " + lost + " of n5, delay " + delay.String(),
		Nodes:  []string{"n1", "n2", "n3", "n4", "n5"},
		Origin: t0,
	}}
	all := []string{"n1", "n2", "n3", "n4", "n5"}
	if delay > 0 {
		e.seq.Faults = append(e.seq.Faults, FaultMark{Kind: "delay", Time: t0.Add(-400 * time.Millisecond), Text: "delay all 5 nodes (delay " + delay.String() + ")", Nodes: all})
	}
	switch lost {
	case "crash":
		e.seq.Faults = append(e.seq.Faults, FaultMark{Kind: "crash", Time: t0, Text: "crash n5", Nodes: []string{"n5"}})
	case "partition":
		e.seq.Faults = append(e.seq.Faults, FaultMark{Kind: "partition", Time: t0, Text: "partition n1,n2,n3,n4 | n5", Groups: [][]string{{"n1", "n2", "n3", "n4"}, {"n5"}}})
	}
	at := t0.Add(500 * time.Millisecond)
	recv := e.send(at, "ELECTION", 1, "n1", "n2", "n3", "n4", "n5")
	// Each node answers every ELECTION from below, and elects upwards on
	// the first one it hears.
	var n4elected time.Time
	for _, n := range []string{"n2", "n3", "n4"} {
		first := recv[n]
		e.send(first.Add(20*time.Microsecond), "ANSWER", 1, n, "n1")
		var higher []string
		for _, h := range all[slices.Index(all, n)+1:] {
			higher = append(higher, h)
		}
		r := e.send(first.Add(40*time.Microsecond), "ELECTION", 1, n, higher...)
		for _, h := range higher {
			if h != "n5" {
				e.send(r[h].Add(20*time.Microsecond), "ANSWER", 1, h, n)
			}
		}
		if n == "n4" {
			n4elected = first.Add(40 * time.Microsecond)
		}
	}
	halted := e.send(n4elected.Add(300*time.Microsecond+2*delay), "HALT", 2, "n4", "n3", "n2", "n1")
	var lastAck time.Time
	for _, n := range []string{"n3", "n2", "n1"} {
		r := e.send(halted[n].Add(20*time.Microsecond), "HALT_ACK", 2, n, "n4")
		lastAck = latest(lastAck, r["n4"])
	}
	done := e.send(lastAck.Add(20*time.Microsecond), "COORDINATOR", 2, "n4", "n3", "n2", "n1")
	if lost == "partition" {
		e.seq.Faults = append(e.seq.Faults, FaultMark{Kind: "heal", Time: done["n1"].Add(3 * time.Millisecond), Text: "heal"})
	}
	return e.seq
}

// haltRound is a star of n nodes after its leader crashed, as a bench
// with a detection stagger sees it: the highest survivor halts every
// other node, collects their HALT_ACKs and announces itself, no ELECTION.
func haltRound(n int, delay time.Duration) Sequence {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	var nodes []string
	for i := 1; i <= n; i++ {
		nodes = append(nodes, "n"+strconv.Itoa(i))
	}
	leader, top := nodes[n-2], nodes[n-1]
	e := &electionBuilder{delay: delay, lost: top, seq: Sequence{
		Title: "star" + strconv.Itoa(n) + ", crash of " + top + ", delay " + delay.String(), Nodes: nodes, Origin: t0,
		Faults: []FaultMark{{Kind: "crash", Time: t0, Text: "crash " + top, Nodes: []string{top}}},
	}}
	others := slices.Clone(nodes[:n-2])
	slices.Reverse(others)
	halted := e.send(t0.Add(505*time.Millisecond), "HALT", 2, leader, others...)
	var lastAck time.Time
	for _, o := range others {
		r := e.send(halted[o].Add(20*time.Microsecond), "HALT_ACK", 2, o, leader)
		lastAck = latest(lastAck, r[leader])
	}
	e.send(lastAck.Add(20*time.Microsecond), "COORDINATOR", 2, leader, others...)
	return e.seq
}

// withEveryFault adds to seq a fault of every kind, a few microseconds
// apart in the middle of its election, the crowd a chaos scenario makes.
func withEveryFault(seq Sequence) Sequence {
	at := seq.Messages[len(seq.Messages)/2].Time
	groups := [][]string{seq.Nodes[:2], seq.Nodes[2:]}
	for i, k := range fault.Kinds {
		f := FaultMark{Kind: string(k), Time: at.Add(time.Duration(i) * 7 * time.Microsecond), Nodes: []string{seq.Nodes[i%len(seq.Nodes)]}}
		switch k {
		case fault.Partition:
			f.Nodes, f.Groups = nil, groups
		case fault.Heal:
			f.Nodes = nil
		}
		f.Text = string(k) + " " + strings.Join(f.struck(), ",")
		seq.Faults = append(seq.Faults, f)
	}
	seq.Title += ", every fault"
	return seq
}

type electionBuilder struct {
	delay time.Duration
	lost  string // what is sent to it is never acknowledged
	seq   Sequence
}

// send sends typ from from to each of to, 15µs apart, and returns when
// each receiver had it; what goes to the lost node is dropped.
func (e *electionBuilder) send(at time.Time, typ string, epoch uint64, from string, to ...string) map[string]time.Time {
	recv := map[string]time.Time{}
	for i, n := range to {
		sent := at.Add(time.Duration(i) * 15 * time.Microsecond)
		arrived := sent.Add(e.delay + 40*time.Microsecond)
		e.seq.Messages = append(e.seq.Messages, SequenceMessage{Time: sent, RecvTime: arrived, Dropped: n == e.lost, From: from, To: n, Type: typ, Epoch: epoch})
		recv[n] = arrived
	}
	return recv
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// svgText is a text of a drawn SVG and the room it takes, by the estimate
// of a character as 0.6 of the font size.
type svgText struct {
	text string
	box  box
}

var (
	svgTextRE = regexp.MustCompile(`<text ([^>]*)>([^<]*)</text>`)
	svgAttrRE = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
)

func svgTexts(t *testing.T, svg string) []svgText {
	t.Helper()
	var out []svgText
	for _, m := range svgTextRE.FindAllStringSubmatch(svg, -1) {
		attrs := map[string]string{}
		for _, a := range svgAttrRE.FindAllStringSubmatch(m[1], -1) {
			attrs[a[1]] = a[2]
		}
		num := func(k string) float64 {
			v, err := strconv.ParseFloat(attrs[k], 64)
			if err != nil {
				t.Fatalf("text %q: %s=%q", m[2], k, attrs[k])
			}
			return v
		}
		text := html.UnescapeString(m[2])
		x, y, size := num("x"), num("y"), num("font-size")
		w := float64(utf8.RuneCountInString(text)) * size * 0.6
		switch attrs["text-anchor"] {
		case "middle":
			x -= w / 2
		case "end":
			x -= w
		}
		out = append(out, svgText{text, box{x, y - 0.8*size, x + w, y + 0.2*size}})
	}
	return out
}

// TestSequenceLabelsDoNotOverlap: in a crowded diagram, no text covers
// another: five nodes, thirty-odd messages within a millisecond and a
// half, and the same election under 100 ms delays.
func TestSequenceLabelsDoNotOverlap(t *testing.T) {
	for _, c := range []struct {
		delay time.Duration
		lost  string
	}{{0, "crash"}, {100 * time.Millisecond, "crash"}, {100 * time.Millisecond, "partition"}, {0, "partition"}, {0, "star16"}, {100 * time.Millisecond, "star16"}, {0, "chaos"}} {
		seq := election5(c.delay, c.lost)
		switch c.lost {
		case "star16":
			seq = haltRound(16, c.delay)
		case "chaos":
			seq = withEveryFault(seq)
		}
		svg := SequenceSVG(seq)
		texts := svgTexts(t, svg)
		if len(texts) < 20 {
			t.Fatalf("%s: %d texts", seq.Title, len(texts))
		}
		for i, a := range texts {
			for _, b := range texts[i+1:] {
				if a.box.overlaps(b.box) {
					t.Errorf("%s: %q at %v overlaps %q at %v", seq.Title, a.text, a.box, b.text, b.box)
				}
			}
		}
	}
}

// TestSequenceArrowsRunDown: an arrow never rises, and under a 100 ms
// delay it slopes: it ends a delay's height below where it starts. Each
// COORDINATOR starts below the ends of the HALT_ACKs its sender waited for.
func TestSequenceArrowsRunDown(t *testing.T) {
	for _, delay := range []time.Duration{0, 100 * time.Millisecond} {
		d := newSeqDiagram(election5(delay, "crash"))
		lastAck := 0.0
		for i, m := range d.msgs {
			a := d.arrows[i]
			if a.y1 < a.y0 {
				t.Errorf("delay %s: %s %s→%s rises from %.1f to %.1f", delay, m.Type, m.From, m.To, a.y0, a.y1)
			}
			if delay > 0 && a.y1-a.y0 < 40 {
				t.Errorf("delay %s: %s %s→%s drops %.1f px, want a slope", delay, m.Type, m.From, m.To, a.y1-a.y0)
			}
			if m.Type == "HALT_ACK" {
				lastAck = max(lastAck, a.y1)
			}
		}
		for i, m := range d.msgs {
			if m.Type == "COORDINATOR" && d.arrows[i].y0 <= lastAck {
				t.Errorf("delay %s: COORDINATOR to %s starts at %.1f, above the last HALT_ACK's receipt at %.1f", delay, m.To, d.arrows[i].y0, lastAck)
			}
		}
	}
}

// TestSequenceDroppedMessage: a message never acknowledged ends in a
// cross short of its receiver, not at its lifeline, and has no arrowhead.
func TestSequenceDroppedMessage(t *testing.T) {
	d := newSeqDiagram(election5(100*time.Millisecond, "crash"))
	n := 0
	for i, m := range d.msgs {
		if !m.Dropped {
			continue
		}
		n++
		a := d.arrows[i]
		if gap := d.xOf(m.To) - a.x1; gap < seqDropGap-0.1 {
			t.Errorf("dropped %s %s→%s ends %.1f px short of its receiver, want %g", m.Type, m.From, m.To, gap, seqDropGap)
		}
	}
	if n != 4 {
		t.Fatalf("%d dropped messages, want the 4 to n5", n)
	}
	svg := SequenceSVG(election5(100*time.Millisecond, "crash"))
	if got := strings.Count(svg, `l8 8 m0 -8 l-8 8`); got != n+1 {
		t.Errorf("%d crosses, want one per dropped message and one in the legend (%d)", got, n+1)
	}
	note := SequenceNote(election5(100*time.Millisecond, "crash"))
	for _, want := range []string{"An arrow starts when the sender's kernel sent the message", "Messages never acknowledged (4) end in a cross short of the receiver"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}
	if strings.Contains(note, "dashed") {
		t.Errorf("note speaks of dashed arrows where there are none: %s", note)
	}
}

// TestSequenceFaultSpans: a partition shades each side's lifelines from
// the partition to the heal, a crash dots the lifeline until the restart,
// a pause shades its node until the resume, and what is never ended runs
// to the bottom of the diagram.
func TestSequenceFaultSpans(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	seq := Sequence{Nodes: []string{"n1", "n2", "n3"}, Faults: []FaultMark{
		{Kind: "partition", Time: at(0), Text: "partition n1 | n2,n3", Groups: [][]string{{"n1"}, {"n2", "n3"}}},
		{Kind: "crash", Time: at(1), Text: "crash n3", Nodes: []string{"n3"}},
		{Kind: "pause", Time: at(2), Text: "pause n2", Nodes: []string{"n2"}},
		{Kind: "heal", Time: at(3), Text: "heal"},
		{Kind: "restart", Time: at(4), Text: "restart n3", Nodes: []string{"n3"}},
	}, Messages: []SequenceMessage{{Time: at(5), RecvTime: at(6), From: "n3", To: "n1", Type: "COORDINATOR", Epoch: 3}}}
	d := newSeqDiagram(seq)
	type want struct {
		kind       spanKind
		node       string
		side       int
		start, end time.Time
	}
	var got []want
	for _, s := range d.spans {
		got = append(got, want{s.kind, s.node, s.side, s.Start, s.End})
	}
	exp := []want{
		{spanCut, "n1", 0, at(0), at(3)},
		{spanCut, "n2", 1, at(0), at(3)},
		{spanCut, "n3", 1, at(0), at(3)},
		{spanDown, "n3", 0, at(1), at(4)},
		{spanPaused, "n2", 0, at(2), time.Time{}},
	}
	if !slices.Equal(got, exp) {
		t.Errorf("spans\n%v\nwant\n%v", got, exp)
	}
	if y0, y1 := d.spanYs(d.spans[4]); y0 != d.yOf(at(2)) || y1 != d.lifeEnd {
		t.Errorf("the pause never resumed runs %.1f to %.1f, want %.1f to the lifelines' end %.1f", y0, y1, d.yOf(at(2)), d.lifeEnd)
	}
	svg := SequenceSVG(seq)
	for _, w := range []string{"<title>n1 partitioned: side 1</title>", "<title>n3 partitioned: side 2</title>", "<title>n2 paused</title>", `stroke-dasharray="2 4"`} {
		if !strings.Contains(svg, w) {
			t.Errorf("diagram lacks %q", w)
		}
	}
}

// TestSequenceCutClockSpans: a cut marks and shades the nodes of its
// links until the heal, and a clock fault shades its nodes until one
// puts their clocks back; the legend explains both.
func TestSequenceCutClockSpans(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	seq := Sequence{Nodes: []string{"n1", "n2", "n3", "n4"}, Faults: []FaultMark{
		{Kind: "cut", Time: at(0), Text: "cut n3-n4", Links: [][2]string{{"n3", "n4"}}},
		{Kind: "clock", Time: at(1), Text: "clock n1 offset +1m30s", Nodes: []string{"n1"}, Skewed: true},
		{Kind: "heal", Time: at(3), Text: "heal"},
		{Kind: "clock", Time: at(4), Text: "clock n1 back on the host's", Nodes: []string{"n1"}},
	}, Messages: []SequenceMessage{{Time: at(5), RecvTime: at(6), From: "n4", To: "n1", Type: "COORDINATOR", Epoch: 3}}}
	d := newSeqDiagram(seq)
	type want struct {
		kind       spanKind
		node       string
		start, end time.Time
	}
	var got []want
	for _, s := range d.spans {
		got = append(got, want{s.kind, s.node, s.Start, s.End})
	}
	exp := []want{
		{spanLinksCut, "n3", at(0), at(3)},
		{spanLinksCut, "n4", at(0), at(3)},
		{spanClock, "n1", at(1), at(4)},
	}
	if !slices.Equal(got, exp) {
		t.Errorf("spans\n%v\nwant\n%v", got, exp)
	}
	var marked []string
	for _, g := range d.marks {
		if d.faults[g.mark].Kind == "cut" {
			marked = append(marked, fmt.Sprint(g.x))
		}
	}
	if len(marked) != 2 {
		t.Errorf("the cut is marked on %d lifelines, want 2 (n3 and n4)", len(marked))
	}
	var legend []string
	for _, tx := range d.legend.texts {
		legend = append(legend, tx.text)
	}
	all := strings.Join(legend, "\n")
	for _, w := range []string{faultStyles["cut"].meaning, faultStyles["clock"].meaning, "links cut: reaches only some nodes", "clock skewed"} {
		if !strings.Contains(all, w) {
			t.Errorf("legend lacks %q:\n%s", w, all)
		}
	}
	svg := SequenceSVG(seq)
	for _, w := range []string{"<title>n3 links cut: reaches only some nodes</title>", "<title>n1 clock skewed</title>"} {
		if !strings.Contains(svg, w) {
			t.Errorf("diagram lacks %q", w)
		}
	}
}

// TestSequenceLegend: the legend lists each message type, fault kind,
// span and arrow style the diagram uses, explains the epochs, and lists
// nothing it does not use.
func TestSequenceLegend(t *testing.T) {
	seq := election5(100*time.Millisecond, "partition")
	seq.Faults = append(seq.Faults, FaultMark{Kind: "pause", Time: seq.Origin.Add(time.Millisecond), Text: "pause n2", Nodes: []string{"n2"}})
	d := newSeqDiagram(seq)
	var legend []string
	for _, tx := range d.legend.texts {
		legend = append(legend, tx.text)
	}
	all := strings.Join(legend, "\n")
	for _, w := range []string{"ELECTION", "ANSWER", "HALT", "HALT_ACK", "COORDINATOR",
		faultStyles["delay"].meaning, faultStyles["partition"].meaning, faultStyles["heal"].meaning, faultStyles["pause"].meaning,
		"partitioned: side 1", "partitioned: side 2", "paused",
		"from its send to its receipt", "never acknowledged: dropped, or the capture ended",
		"eN: the epoch the message carries: the term of the leader it elects or announces.",
	} {
		if !slices.Contains(legend, w) && !strings.Contains(all, w) {
			t.Errorf("legend lacks %q:\n%s", w, all)
		}
	}
	for _, w := range []string{"REJECT", faultStyles["crash"].meaning, "down (crashed or left): its lifeline dotted", "isolated", "send or receipt time unknown"} {
		if strings.Contains(all, w) {
			t.Errorf("legend lists %q, which the diagram does not use", w)
		}
	}
	// A fault of a kind the diagram does not know still has a mark.
	d = newSeqDiagram(Sequence{Nodes: []string{"n1"}, Faults: []FaultMark{{Kind: "meteor", Time: seq.Origin, Text: "meteor", Nodes: []string{"n1"}}}})
	if !slices.ContainsFunc(d.legend.texts, func(tx seqText) bool { return tx.text == otherFault.meaning }) {
		t.Error("an unknown fault kind is not in the legend")
	}
}

// TestSequenceDistinctFaultMarks: every fault kind has a glyph and a
// colour of its own, and a legend line.
func TestSequenceDistinctFaultMarks(t *testing.T) {
	glyphs := map[string]string{}
	for k, st := range faultStyles {
		g := st.glyph(0, 0, "")
		if other, ok := glyphs[g]; ok {
			// Opposites (partition and heal) share a colour, never a shape.
			t.Errorf("%s and %s draw the same glyph", k, other)
		}
		glyphs[g] = k
		if st.meaning == "" || st.color == "" {
			t.Errorf("%s: no colour or legend line", k)
		}
	}
	for _, k := range fault.Kinds {
		if _, ok := faultStyles[string(k)]; !ok {
			t.Errorf("fault kind %s has no mark", k)
		}
	}
	if len(faultStyles) != len(fault.Kinds) {
		t.Errorf("%d fault kinds styled, want %d", len(faultStyles), len(fault.Kinds))
	}
}

// TestSequenceReportPNG writes a report of the 100 ms election with a
// partition, for a look (BULLYLAB_REPORT_DIR=/tmp/r go test -run
// TestSequenceReportPNG ./netem/bench, then render report-seq.html).
func TestSequenceReportPNG(t *testing.T) {
	dir := os.Getenv("BULLYLAB_REPORT_DIR")
	if dir == "" {
		t.Skip("BULLYLAB_REPORT_DIR not set")
	}
	r := &results.Results{Schema: results.Schema}
	var seqs []Sequence
	for _, c := range []struct {
		delay time.Duration
		lost  string
	}{{100 * time.Millisecond, "partition"}, {0, "crash"}} {
		seqs = append(seqs, election5(c.delay, c.lost))
	}
	seqs = append(seqs, haltRound(16, 100*time.Millisecond), withEveryFault(election5(100*time.Millisecond, "partition")))
	seqs[0].Capture = "run-x-1.pcapng"
	var buf bytes.Buffer
	if err := Write(&buf, r, seqs...); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report-seq.html"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		if err := os.WriteFile(filepath.Join(dir, "seq"+strconv.Itoa(i)+".svg"), []byte(SequenceSVG(s)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSequenceTooManyMessages: an election of more than MaxDrawnMessages
// messages is not drawn, and its note says why and where to look; one
// of that many is.
func TestSequenceTooManyMessages(t *testing.T) {
	base := haltRound(16, 0)
	seq := base
	seq.Messages = nil
	for len(seq.Messages) <= MaxDrawnMessages {
		seq.Messages = append(seq.Messages, base.Messages...)
	}
	svg, note := SequenceFigure(seq)
	if svg != "" || SequenceSVG(seq) != "" {
		t.Fatalf("%d messages drawn, want none past %d", len(seq.Messages), MaxDrawnMessages)
	}
	if want := strconv.Itoa(len(seq.Messages)) + " messages"; !strings.Contains(note, want) || !strings.Contains(note, "--timeline") {
		t.Fatalf("note %q: want it to say %q and where to find them", note, want)
	}
	seq.Messages = seq.Messages[:MaxDrawnMessages]
	if svg, note := SequenceFigure(seq); !strings.HasPrefix(svg, "<svg") || !strings.HasPrefix(note, "Time runs down") {
		t.Fatalf("%d messages: svg %.20q, note %q, want them drawn and explained", len(seq.Messages), svg, note)
	}
}
