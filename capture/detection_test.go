package capture

import (
	"bytes"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// TestAnalyzeDetectionHaltFirst: detection ends at the election's first
// message, an ELECTION or a HALT. After a leader crash the highest
// survivor, detecting first, halts the rest: the election holds no
// ELECTION, and its detection runs from the crash record to the first
// HALT.
func TestAnalyzeDetectionHaltFirst(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 7)
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(4, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 20)
	crashed := s.t + int64(time.Microsecond) // the record's time: s.record advances 1µs
	s.crash(leader)
	s.advance(470 * time.Millisecond)
	s.elect(3, 1, wire.ReasonLeaderFailed) // n4, the highest survivor, halts the rest
	s.heartbeats(3, 2, 20)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())

	if len(rep.Elections) != 2 {
		t.Fatalf("%d elections, want the boot one and the crash one", len(rep.Elections))
	}
	e := rep.Elections[1]
	if e.Trigger.Kind != string(fault.Crash) || e.Trigger.Time.UnixNano() != crashed {
		t.Fatalf("trigger %s at %s, want the crash record at %s", e.Trigger.Kind, e.Trigger.Time, time.Unix(0, crashed).UTC())
	}
	if e.First.Type != "HALT" || e.First.From != "n4" || e.Messages.Election != 0 {
		t.Fatalf("election opened by %s from %s with %d ELECTIONs; want n4's HALT and none", e.First.Type, e.First.From, e.Messages.Election)
	}
	want := e.First.Time.Sub(e.Trigger.Time)
	if e.DetectionNS == nil || time.Duration(*e.DetectionNS) != want {
		t.Fatalf("detection %v, want %s: from the crash to the first HALT", e.DetectionNS, want)
	}
	if want < 470*time.Millisecond || want > 472*time.Millisecond {
		t.Errorf("detection %s, want about the 470ms the survivors waited", want)
	}
}
