//go:build linux

package capture

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/gopacket/gopacket"
)

// ringFrameFields are the fields the Lua dissector shows for the ring's
// frames, in the order ringFrameRow prints them.
var ringFrameFields = []string{"bullylab.type", "bullylab.epoch", "bullylab.reason",
	"bullylab.ring_election.initiator", "bullylab.ring_election.candidate", "bullylab.elected.leader"}

// ringFrameRow is one RING_ELECTION or ELECTED as a line: type, epoch,
// reason code, then initiator and candidate, or leader, in hex.
func ringFrameRow(typ string, epoch uint64, reason string, ids ...string) string {
	return strings.Join(append([]string{typ, strconv.FormatUint(epoch, 10), reason}, ids...), " ")
}

// layerRingRows decodes the capture at path with the Dissector and each
// frame again with the gopacket layer, and returns a row for each
// RING_ELECTION and ELECTED, sorted.
func layerRingRows(t *testing.T, path string) []string {
	t.Helper()
	rd := openCapture(t, path)
	var rows []string
	h := &frameFunc{func(f *Frame) {
		var l Bullylab
		if err := l.DecodeFromBytes(wire.Append(nil, &f.Msg), gopacket.NilDecodeFeedback); err != nil {
			t.Errorf("packet %d: the layer refused a %s the dissector decoded: %v", f.Packet, f.Msg.Type, err)
			return
		}
		reason := strconv.Itoa(int(l.Reason()))
		switch l.Type {
		case wire.TypeRingElection:
			rows = append(rows, ringFrameRow(l.Type.String(), l.Epoch, reason, hex.EncodeToString(l.Initiator[:]), hex.EncodeToString(l.Candidate[:])))
		case wire.TypeElected:
			rows = append(rows, ringFrameRow(l.Type.String(), l.Epoch, reason, hex.EncodeToString(l.Leader[:])))
		}
	}}
	var d *Dissector
	for p := range packetsOf(t, rd) {
		if d == nil {
			d = NewDissector(h, DissectorOptions{Ports: framePorts(rd.Interfaces(), p)})
		}
		if p.Record != nil || p.Iface.Events {
			continue
		}
		d.Packet(p.Num, p.Iface.LinkType, p.Data, &p.CI)
	}
	d.Flush()
	slices.Sort(rows)
	return rows
}

type frameFunc struct{ frame func(*Frame) }

func (h *frameFunc) Frame(f *Frame)           { h.frame(f) }
func (h *frameFunc) StreamError(*StreamError) {}

// tsharkRingRows runs tshark with the Lua dissector on path and returns a
// row for each RING_ELECTION and ELECTED it shows, sorted, and the Info
// columns of the packets that have one.
func tsharkRingRows(t *testing.T, tshark, path string) ([]string, []string) {
	t.Helper()
	var rows, infos []string
	for num, layers := range tsharkJSON(t, tshark, path, append([]string{"_ws.col.Info"}, ringFrameFields...)...) {
		types, epochs, reasons := layers["bullylab.type"], layers["bullylab.epoch"], layers["bullylab.reason"]
		inits, cands, leaders := layers["bullylab.ring_election.initiator"], layers["bullylab.ring_election.candidate"], layers["bullylab.elected.leader"]
		if len(epochs) != len(types) {
			t.Fatalf("packet %d: %d types, %d epochs", num, len(types), len(epochs))
		}
		// The payload fields and reasons come in frame order, one for
		// each frame that has them: every ring frame has a reason, the
		// HEARTBEATs beside them none.
		var r, ring, elected int
		for i, ty := range types {
			epoch, err := strconv.ParseUint(epochs[i], 10, 64)
			if err != nil {
				t.Fatalf("packet %d: epoch %q", num, epochs[i])
			}
			switch ty {
			case "RING_ELECTION":
				if ring >= len(inits) || ring >= len(cands) || r >= len(reasons) {
					t.Fatalf("packet %d: a RING_ELECTION without initiator, candidate or reason: %v", num, layers)
				}
				rows = append(rows, ringFrameRow(ty, epoch, reasons[r], inits[ring], cands[ring]))
				ring++
				r++
			case "ELECTED":
				if elected >= len(leaders) || r >= len(reasons) {
					t.Fatalf("packet %d: an ELECTED without leader or reason: %v", num, layers)
				}
				rows = append(rows, ringFrameRow(ty, epoch, reasons[r], leaders[elected]))
				elected++
				r++
			}
		}
		if ring != len(inits) || elected != len(leaders) {
			t.Errorf("packet %d: %d initiators for %d RING_ELECTIONs, %d leaders for %d ELECTEDs", num, len(inits), ring, len(leaders), elected)
		}
		if ring+elected > 0 {
			infos = append(infos, layers["_ws.col.Info"]...)
		}
	}
	slices.Sort(rows)
	return rows, infos
}

// TestTsharkRing: the Lua dissector decodes RING_ELECTION's initiator and
// candidate and ELECTED's leader, with their reasons, as the gopacket layer
// does, frame for frame, on a capture of ring elections over split,
// reordered and retransmitted segments (a cold start, a leader's crash);
// its counts by type are the analyzer's, there and on a capture that mixes
// both algorithms.
func TestTsharkRing(t *testing.T) {
	tshark := requireTshark(t)
	dir := t.TempDir()
	ringPath := filepath.Join(dir, "ring.pcapng")
	f, err := os.Create(ringPath)
	if err != nil {
		t.Fatal(err)
	}
	s := newSynth(t, f, 5, 9)
	s.split, s.reorder, s.retransmit = 0.1, 0.05, 0.05
	leader, _ := bootRing(s, 1, 20)
	s.crash(leader)
	s.advance(500 * time.Millisecond)
	next, _ := s.ringElect(3, 2, wire.ReasonLeaderFailed)
	s.heartbeats(next, 2, 20)
	// An ELECTED and a HEARTBEAT in one segment.
	s.sendFrames(next, 0, s.electedMsg(next, next, 2, wire.ReasonManual), s.msg(wire.TypeHeartbeat, next, 2, 0))
	s.close(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := AnalyzeFile(ringPath, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Algorithm != wire.AlgorithmRing || rep.Messages.RingElection == 0 || rep.Messages.Elected == 0 || rep.Stream.OutOfOrder == 0 {
		t.Fatalf("the scenario did not come out as planned: %q, %+v, %+v", rep.Algorithm, rep.Messages, rep.Stream)
	}

	got, _ := tsharkTypes(t, tshark, ringPath, tsharkOptions...)
	if got.typeCounts() != rep.Messages {
		t.Errorf("tshark found %+v\nanalyzer found %+v", got.typeCounts(), rep.Messages)
	}
	want := layerRingRows(t, ringPath)
	rows, infos := tsharkRingRows(t, tshark, ringPath)
	if int64(len(want)) != rep.Messages.RingElection+rep.Messages.Elected || !slices.Equal(rows, want) {
		t.Errorf("tshark shows the ring's frames\n%s\nthe layer decodes\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	id := func(i int) string { return hex.EncodeToString(s.nodes[i].ID[:4]) }
	sender := func(i int) string { return fmt.Sprintf("%s (%s)", s.nodes[i].Name, s.nodes[i].ID) }
	for _, w := range []string{
		fmt.Sprintf("RING_ELECTION epoch=1 from=%s initiator=%s candidate=%s reason=boot", sender(2), id(1), id(2)),
		fmt.Sprintf("ELECTED epoch=2 from=%s leader=%s reason=leader-failed", sender(0), id(3)),
	} {
		if !slices.ContainsFunc(infos, func(i string) bool { return strings.Contains(i, w) }) {
			t.Errorf("no Info column shows %q among %q", w, infos)
		}
	}

	mixedPath := filepath.Join(dir, "mixed.pcapng")
	var buf bytes.Buffer
	s = newSynth(t, &buf, 5, 10)
	s.split, s.reorder, s.retransmit = 0.1, 0.05, 0.05
	for i := range s.live {
		s.live[i] = true
	}
	s.heartbeats(s.elect(0, 0, wire.ReasonBoot), 1, 5)
	s.heartbeats(4, 1, 5)
	s.ringElect(2, 2, wire.ReasonManual)
	s.close(t)
	if err := os.WriteFile(mixedPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = analyzeBytes(t, buf.Bytes())
	got, _ = tsharkTypes(t, tshark, mixedPath, tsharkOptions...)
	if rep.Algorithm != AlgorithmMixed || got.typeCounts() != rep.Messages {
		t.Errorf("mixed capture (%q): tshark found %+v\nanalyzer found %+v", rep.Algorithm, got.typeCounts(), rep.Messages)
	}
}
