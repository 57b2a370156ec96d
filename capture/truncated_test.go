package capture

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
)

// pcapngBlock is a block of a pcapng file, found by its length field.
type pcapngBlock struct {
	typ        uint32
	start, end int
}

// pcapngBlocks splits a little-endian pcapng file into its blocks
// without the reader under test.
func pcapngBlocks(t *testing.T, data []byte) []pcapngBlock {
	t.Helper()
	var out []pcapngBlock
	for off := 0; off < len(data); {
		if len(data)-off < 12 {
			t.Fatalf("%d bytes left at %d", len(data)-off, off)
		}
		n := int(binary.LittleEndian.Uint32(data[off+4:]))
		out = append(out, pcapngBlock{typ: binary.LittleEndian.Uint32(data[off:]), start: off, end: off + n})
		off += n
	}
	return out
}

// TestAnalyzeTruncated cuts a capture at offsets inside its blocks, as a
// writer killed mid-write leaves it: the analysis covers every packet
// before the cut, exactly as it covers the same packets in a file that
// ends cleanly after them, and says where the file was cut. Cut before
// the first packet, nothing can be analyzed: that is an error.
func TestAnalyzeTruncated(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 7)
	for i := range s.live {
		s.live[i] = true
	}
	epoch := uint64(0)
	leader := s.elect(0, epoch, wire.ReasonBoot)
	epoch++
	s.heartbeats(leader, epoch, 5)
	s.crash(leader)
	s.advance(500 * time.Millisecond)
	leader = s.elect(0, epoch, wire.ReasonLeaderFailed)
	epoch++
	s.heartbeats(leader, epoch, 5)
	s.close(t)
	data := buf.Bytes()

	const epb = 6 // enhanced packet block
	blocks := pcapngBlocks(t, data)
	var packets []pcapngBlock
	for _, b := range blocks {
		if b.typ == epb {
			packets = append(packets, b)
		}
	}
	if int64(len(packets)) != s.packets || blocks[len(blocks)-1].typ == epb {
		t.Fatalf("%d packet blocks, the generator wrote %d; the file should end with statistics", len(packets), s.packets)
	}

	// Cuts inside the first packet, the second, a middle one (in its
	// header, its data, its last byte), the last one, and the statistics
	// after it.
	mid := packets[len(packets)/2]
	last := packets[len(packets)-1]
	stats := blocks[len(blocks)-1]
	cuts := []int{packets[0].start + 10, packets[1].start + 1, mid.start + 4, mid.start + 30,
		(mid.start + mid.end) / 2, mid.end - 1, last.end - 1, stats.start + 8, len(data) - 1}
	for _, cut := range cuts {
		whole := 0 // packets that end before the cut
		for whole < len(packets) && packets[whole].end <= cut {
			whole++
		}
		rep, err := Analyze(bytes.NewReader(data[:cut]), AnalyzeOptions{Name: "cut.pcapng"})
		if whole == 0 {
			if err == nil || !strings.HasPrefix(err.Error(), "cut.pcapng: packet 1: file ends inside a block") ||
				!errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("cut at %d, before any packet: %v, %+v", cut, err, rep)
			}
			continue
		}
		if err != nil {
			t.Errorf("cut at %d after %d packets: %v", cut, whole, err)
			continue
		}
		wantCut := Truncation{Packets: int64(whole), WholeBytes: int64(packets[whole-1].end), SizeBytes: int64(cut)}
		if rep.Truncated == nil || *rep.Truncated != wantCut {
			t.Errorf("cut at %d: truncated %+v, want %+v", cut, rep.Truncated, wantCut)
			continue
		}
		if w := rep.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "cut.pcapng: truncated capture: the file ends inside a block at byte ") {
			t.Errorf("cut at %d: warnings %q", cut, w)
		}
		// The same packets in a file that ends after the last of them.
		clean, err := Analyze(bytes.NewReader(data[:packets[whole-1].end]), AnalyzeOptions{Name: "cut.pcapng"})
		if err != nil {
			t.Fatal(err)
		}
		if clean.Truncated != nil {
			t.Errorf("a file ending at a block boundary is truncated: %+v", clean.Truncated)
		}
		rep.Truncated = nil
		got, _ := json.Marshal(rep)
		want, _ := json.Marshal(clean)
		if !bytes.Equal(got, want) {
			t.Errorf("cut at %d: the report differs from that of the %d packets before it:\n got %s\nwant %s", cut, whole, got, want)
		}
		if cut > last.end && (rep.Packets != s.packets || rep.Frames != s.frames) {
			t.Errorf("cut after the last packet: %d packets and %d frames, want %d and %d", rep.Packets, rep.Frames, s.packets, s.frames)
		}
	}
}
