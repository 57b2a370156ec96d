package report

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// partitionMinority is the partition-minority run: n4 and n5 cut
// off, the majority elects n3, whose COORDINATOR to n5, sent 4 ms before
// the heal while the cut was in force, is lost and delivered by a TCP
// retransmission about 100 ms after the heal.
func partitionMinority() (Sequence, time.Time) {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * 1e6)) }
	seq := Sequence{
		Nodes: []string{"n1", "n2", "n3", "n4", "n5"}, Origin: t0,
		Faults: []FaultMark{
			{Kind: "partition", Time: t0, Text: "partition n4,n5 | n1,n2,n3", Groups: [][]string{{"n4", "n5"}, {"n1", "n2", "n3"}}},
			{Kind: "heal", Time: at(734.8), Text: "heal"},
		},
		Messages: []SequenceMessage{
			{Time: at(520), RecvTime: at(520.1), From: "n1", To: "n3", Type: "ELECTION", Epoch: 2},
			{Time: at(520.2), RecvTime: at(520.3), From: "n3", To: "n1", Type: "ANSWER", Epoch: 2},
			{Time: at(730.7), RecvTime: at(730.8), From: "n3", To: "n1", Type: "COORDINATOR", Epoch: 2},
			{Time: at(730.7), RecvTime: at(730.8), From: "n3", To: "n2", Type: "COORDINATOR", Epoch: 2},
			{Time: at(730.7), RecvTime: at(730.8), From: "n3", To: "n5", Type: "COORDINATOR", Epoch: 2, Dropped: true, Resent: true, CutDrop: true},
			{Time: at(834.9), RecvTime: at(835.0), From: "n3", To: "n5", Type: "COORDINATOR", Epoch: 2, Copy: 1, FirstSent: at(730.7)},
		},
		Settled: &LeaderMark{Time: at(835.0), Leader: "n3", Epoch: 2},
	}
	return seq, t0
}

// TestSequenceLostCopyAndRetransmission: the copy the partition dropped
// ends in a cross where it was lost, and the retransmission that
// delivered it has an arrow of its own from its send to its real
// receipt, its hover text saying so; the legend explains both.
func TestSequenceLostCopyAndRetransmission(t *testing.T) {
	seq, _ := partitionMinority()
	svg := SequenceSVG(seq)
	for _, want := range []string{
		"COORDINATOR n3 → n5, epoch 2, sent +730.7 ms, lost at +730.8 ms (a fault cut n3 → n5): its sender sent it again",
		"retransmission of COORDINATOR n3 → n5, epoch 2, first sent +730.7 ms, sent +834.9 ms, received +835.0 ms",
		"lost on the wire (sent again before any ACK, or while a fault cut the link): crossed where it was lost",
		"TCP retransmission of a lost copy: from its resend to its receipt",
	} {
		if !strings.Contains(svg, html.EscapeString(want)) {
			t.Errorf("diagram lacks %q", want)
		}
	}
	if !strings.Contains(svg, ">COORDINATOR e2 resent<") {
		t.Error("the retransmission is not labelled as resent")
	}
	if strings.Contains(svg, html.EscapeString("n3 → n5, epoch 2, sent +730.7 ms, received")) {
		t.Error("the dropped copy is drawn as received")
	}
	if note := SequenceNote(seq); !strings.Contains(note, "Copies lost on the wire (1: ") || !strings.Contains(note, "each TCP retransmission that delivered one (1) has an arrow of its own") ||
		strings.Contains(note, "Messages never acknowledged") {
		t.Errorf("note %q: want the lost copy and its retransmission explained, not counted as never acknowledged", note)
	}
	d := newSeqDiagram(seq)
	var lost, resent seqArrow
	for i, m := range d.msgs {
		switch {
		case m.To == "n5" && m.Copy == 0:
			lost = d.arrows[i]
		case m.To == "n5":
			resent = d.arrows[i]
		}
	}
	if lost.x1 >= d.xOf("n5") {
		t.Errorf("lost copy's arrow reaches n5 (x %v, n5 at %v): want it to stop at its cross", lost.x1, d.xOf("n5"))
	}
	if resent.x1 != d.xOf("n5") || resent.y0 <= lost.y1 || resent.y1 != d.yOf(seq.Messages[5].RecvTime) {
		t.Errorf("retransmission drawn %+v, want from below the lost copy to n5 at its receipt", resent)
	}
}

// TestSequenceScale: auto draws true scale when the span fits and the
// arrows still slant, compressed when an unimpaired election's 0.1 ms
// arrows would be level; on true scale a 100 ms delay is ten times as
// tall as a 10 ms one, and the header names the scale.
func TestSequenceScale(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * 1e6)) }
	slow := Sequence{Nodes: []string{"n1", "n2", "n3"}, Origin: t0, Messages: []SequenceMessage{
		{Time: at(500), RecvTime: at(510), From: "n1", To: "n3", Type: "ELECTION", Epoch: 1},
		{Time: at(510), RecvTime: at(610), From: "n3", To: "n1", Type: "ANSWER", Epoch: 1},
		{Time: at(610), RecvTime: at(710), From: "n3", To: "n2", Type: "COORDINATOR", Epoch: 2},
	}, Faults: []FaultMark{{Kind: "crash", Time: t0, Text: "crash n4", Nodes: []string{"n3"}}}}
	d := newSeqDiagram(slow)
	if d.scale != ScaleTrue {
		t.Fatalf("auto drew %s, want true for a 710 ms span of 10-100 ms arrows", d.scale)
	}
	h10 := d.arrows[0].y1 - d.arrows[0].y0
	h100 := d.arrows[1].y1 - d.arrows[1].y0
	if r := h100 / h10; r < 9.99 || r > 10.01 {
		t.Errorf("100 ms arrow %.1f px, 10 ms arrow %.1f px: ratio %.3f, want 10", h100, h10, r)
	}
	if len(d.cuts) != 0 {
		t.Errorf("true scale cut %d gaps", len(d.cuts))
	}
	if svg := SequenceSVG(slow); !strings.Contains(svg, "Time scale: true (auto), ") {
		t.Errorf("header does not name the true scale: %s", d.scaleText())
	}

	fast := slow
	fast.Messages = []SequenceMessage{
		{Time: at(500), RecvTime: at(500.1), From: "n1", To: "n3", Type: "ELECTION", Epoch: 1},
		{Time: at(500.2), RecvTime: at(500.3), From: "n3", To: "n1", Type: "ANSWER", Epoch: 1},
	}
	d = newSeqDiagram(fast)
	if d.scale != ScaleCompressed || len(d.cuts) == 0 {
		t.Errorf("auto drew %s with %d cuts, want compressed for 0.1 ms arrows after 500 ms", d.scale, len(d.cuts))
	}
	if !strings.Contains(SequenceSVG(fast), "Time scale: compressed (auto): gaps over 4.5 ms") {
		t.Errorf("header does not name the compressed scale: %s", d.scaleText())
	}
	fast.Scale = ScaleTrue
	if d = newSeqDiagram(fast); d.scale != ScaleTrue || len(d.cuts) != 0 || !strings.Contains(d.scaleText(), "Time scale: true, ") {
		t.Errorf("asked for true: drew %s with %d cuts, header %q", d.scale, len(d.cuts), d.scaleText())
	}
	slow.Scale = ScaleCompressed
	if d = newSeqDiagram(slow); d.scale != ScaleCompressed {
		t.Errorf("asked for compressed, drew %s", d.scale)
	}
	long := slow
	long.Scale = ScaleAuto
	long.Messages = append(long.Messages, SequenceMessage{Time: at(3000), RecvTime: at(3100), From: "n2", To: "n1", Type: "HEARTBEAT", Epoch: 2})
	if d = newSeqDiagram(long); d.scale != ScaleCompressed {
		t.Errorf("auto drew %s for a 3.1 s span, want compressed", d.scale)
	}
	for _, s := range []string{"", "auto", "true", "compressed"} {
		if _, err := ParseDiagramScale(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParseDiagramScale("linear"); err == nil || !strings.Contains(err.Error(), "auto, true, compressed") {
		t.Errorf("linear: %v, want an error listing the scales", err)
	}
}

// TestSequenceLeaderMarks: where the leader settled is a line across the
// lifelines, labelled with the leader and the time to leader, and each
// later change of leader a mark on its leader's lifeline with its label,
// even one after the election's last message; the legend explains both.
func TestSequenceLeaderMarks(t *testing.T) {
	seq, t0 := partitionMinority()
	seq.LeaderChanges = []LeaderMark{{Time: t0.Add(1035 * time.Millisecond), Leader: "n5", Epoch: 3}}
	svg := SequenceSVG(seq)
	for _, want := range []string{
		">leader n3 settled +835.0 ms<", ">leader n5 e3 +1035.0 ms<",
		"the leader settled: the run&#39;s time to leader",
		"a later leader change: a new tenure after settling and before any later fault",
	} {
		if !strings.Contains(svg, want) {
			t.Errorf("diagram lacks %q", want)
		}
	}
	explained := seq
	explained.LeaderChanges = []LeaderMark{{Time: t0.Add(1035 * time.Millisecond), Leader: "n5", Epoch: 3, AfterFault: "heal"}}
	svg = SequenceSVG(explained)
	for _, want := range []string{">leader n5 e3 +1035.0 ms, after the heal<", "a new tenure after a later fault (a heal)", resumedColor} {
		if !strings.Contains(svg, want) {
			t.Errorf("diagram of a change a heal explains lacks %q", want)
		}
	}
	if strings.Contains(svg, "a later leader change:") {
		t.Errorf("a change a heal explains is explained as a later leader change")
	}
	d := newSeqDiagram(seq)
	if len(d.leaderMarks) != 2 {
		t.Fatalf("leader marks %+v", d.leaderMarks)
	}
	settled, change := d.leaderMarks[0], d.leaderMarks[1]
	if settled.y != d.yOf(seq.Settled.Time) || change.x != d.xOf("n5") || change.y <= settled.y {
		t.Errorf("settled at y %v, change at (%v, %v): want the change on n5's lifeline below", settled.y, change.x, change.y)
	}
	if change.y >= d.lifeEnd {
		t.Errorf("the change at y %v is past the lifelines' end %v", change.y, d.lifeEnd)
	}
	// The label sits level with its mark when nothing is in the way.
	m := regexp.MustCompile(`<text x="[0-9.]+" y="([0-9.]+)"[^>]*>leader n5 e3`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatal("no label for the change")
	}
	if y, _ := strconv.ParseFloat(m[1], 64); y < change.y || y > change.y+8 {
		t.Errorf("label at y %v, mark at %v", y, change.y)
	}
}
