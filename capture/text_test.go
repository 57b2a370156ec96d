package capture

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestWriteText(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 4, 5)
	s.benchScenario(500)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	var err error
	if rep.Timeline, err = rep.ElectionTimeline(2); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Summary", "Elections", "Per node", "Anomalies", "Election 2 timeline", "crash n4",
		"│ # │ start ", " detection (ms) │ time to leader (ms) │", "│ HALT_ACK │", "│ offset (ms) │",
		fmt.Sprintf("│ packets in file │ %d (%d of them fault and lifecycle records)", rep.Packets, len(rep.Records)),
		fmt.Sprintf("│ frames decoded  │ %d (%d election messages, %d HEARTBEATs)", rep.Frames, rep.ElectionMessages, rep.Messages.Heartbeat)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Headers as bench and status write them: lower case, the wire's type
	// names whole; no cell of a time column carries a unit.
	for _, bad := range []string{"HALT ACK", "DETECTION", "TO LEADER", "PACKETS", "ms │", "µs │"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("output holds %q:\n%s", bad, out.String())
		}
	}
	if testing.Verbose() {
		t.Log("\n" + out.String())
	}
}

// TestWriteTextLiveCapture: the end record's counters are labelled with
// what they count, apart from the packets in the file.
func TestWriteTextLiveCapture(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 4, 5)
	s.benchScenario(500)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	rep.Capture = &CaptureStats{Packets: 774, Drops: 2, Written: 756, Late: 1, Unmatched: 15, WrongSource: 1}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	want := "│ live capture    │ 774 frames passed its sockets' filters, 2 of them dropped by the kernel for lack of ring space, " +
		"16 not written (15 from no node's port, 1 with another source MAC); 756 packets written, 1 of them late (out of order)"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	rep.Capture = &CaptureStats{Packets: 774, Written: 753}
	out.Reset()
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if want := "│ live capture    │ 774 frames passed its sockets' filters, 0 of them dropped by the kernel for lack of ring space; 753 packets written, 0 of them late (out of order)"; !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
}
