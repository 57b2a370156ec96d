package capture

import (
	"io"
	"reflect"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// segmentLog records every segment, frame and error a Dissector hands out.
type segmentLog struct {
	collector
	segs []Segment
}

func (l *segmentLog) Segment(s *Segment) {
	c := *s
	c.half = nil
	l.segs = append(l.segs, c)
}

// TestPreparedAsPacket checks that a Dissector given the segments a
// segmentPrep found on the reader's goroutine hands out what it does from
// the packets themselves: the same segments, frames, errors and counts,
// on a hard mix with its connections restarted on the same ports.
func TestPreparedAsPacket(t *testing.T) {
	path, _ := writeHardMix(t, t.TempDir(), 10, 3000)
	var byPacket, prepared segmentLog
	whole := NewDissector(&byPacket, DissectorOptions{})
	viaPrep := NewDissector(&prepared, DissectorOptions{})
	rd := openCapture(t, path)
	full, free := readAhead(rd, func([]*Interface, *Packet) []uint16 { return []uint16{wire.DefaultPort} })
	var prep *segmentPrep
	for b := range full {
		prep = b.prep
		for i := range b.pkts {
			p := &b.pkts[i]
			if p.Record != nil || p.Iface.Events {
				continue
			}
			whole.Packet(p.Num, p.Iface.LinkType, p.Data, &p.CI)
			viaPrep.preparedPacket(p.Num, &p.CI, &b.segs[i])
		}
		err := b.err
		free <- b
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	viaPrep.adoptHalves(prep)
	whole.Flush()
	viaPrep.Flush()
	if whole.Stats() != viaPrep.Stats() {
		t.Errorf("stats differ:\npackets  %+v\nprepared %+v", whole.Stats(), viaPrep.Stats())
	}
	if len(byPacket.segs) == 0 || len(byPacket.frames) == 0 {
		t.Fatalf("%d segments, %d frames: nothing dissected", len(byPacket.segs), len(byPacket.frames))
	}
	if !reflect.DeepEqual(byPacket, prepared) {
		t.Errorf("%d segments and %d frames from the packets, %d and %d prepared; or their contents differ",
			len(byPacket.segs), len(byPacket.frames), len(prepared.segs), len(prepared.frames))
	}
}
