package capture

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// collector records what a Dissector hands out.
type collector struct {
	frames []wire.Message
	pkts   []int64
	conns  []int64 // Stream.Conn of each frame
	mid    []bool  // Stream.MidStream of each frame
	errs   []StreamError
}

func (c *collector) Frame(f *Frame) {
	m := f.Msg
	// Both point into the packet's data, which the next packet may reuse.
	m.Payload = append([]byte(nil), m.Payload...)
	m.Tag = append([]byte(nil), m.Tag...)
	c.frames = append(c.frames, m)
	c.pkts = append(c.pkts, f.Packet)
	c.conns = append(c.conns, f.Stream.Conn)
	c.mid = append(c.mid, f.Stream.MidStream)
}

func (c *collector) StreamError(e *StreamError) { c.errs = append(c.errs, *e) }

// seg builds one Ethernet/IPv4/TCP packet with gopacket.
type seg struct {
	seq     uint32
	payload []byte
	syn     bool
	fin     bool
	rst     bool
	reverse bool // from the server (port 7946) back to the client
	snap    int  // capture only this many bytes of the packet, if > 0
}

func (s seg) bytes(t testing.TB) ([]byte, int) {
	t.Helper()
	src, dst := []byte{10, 77, 0, 2}, []byte{10, 77, 0, 3}
	sp, dp := layers.TCPPort(40000), layers.TCPPort(7946)
	if s.reverse {
		src, dst, sp, dp = dst, src, dp, sp
	}
	eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: src, DstIP: dst, Flags: layers.IPv4DontFragment}
	tcp := &layers.TCP{SrcPort: sp, DstPort: dp, Seq: s.seq, SYN: s.syn, FIN: s.fin, RST: s.rst, ACK: !s.syn, PSH: len(s.payload) > 0, Window: 502}
	if err := tcp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(s.payload)); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if s.snap > 0 && s.snap < len(b) {
		return b[:s.snap], len(b)
	}
	return b, len(b)
}

func dissect(t testing.TB, segs []seg) *collector {
	t.Helper()
	c := &collector{}
	d := NewDissector(c, DissectorOptions{})
	ts := time.Unix(1700000000, 0)
	for i, s := range segs {
		data, orig := s.bytes(t)
		ts = ts.Add(time.Millisecond)
		ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(data), Length: orig}
		d.Packet(int64(i+1), layers.LinkTypeEthernet, data, &ci)
	}
	d.Flush()
	return c
}

func testFrames(n int) ([]wire.Message, []byte) {
	id := uuid.MustParse("00000000-0000-4000-8000-0000000000aa")
	var ms []wire.Message
	var stream []byte
	for i := range n {
		m := wire.Message{Type: wire.Types[i%len(wire.Types)], Epoch: uint64(i), From: id}
		switch m.Type {
		case wire.TypeJoin:
			m.Payload = wire.AppendAddr(nil, "10.77.0.2:7946")
		case wire.TypeReject:
			m.Payload = wire.AppendID(nil, id)
		case wire.TypeMembers:
			m.Payload = wire.AppendMembers(nil, []wire.Member{{ID: id, Addr: "10.77.0.2:7946"}})
		}
		ms = append(ms, m)
		stream = wire.Append(stream, &m)
	}
	return ms, stream
}

func checkFrames(t *testing.T, c *collector, want []wire.Message) {
	t.Helper()
	if len(c.frames) != len(want) {
		t.Fatalf("got %d frames, want %d (errors %v)", len(c.frames), len(want), c.errs)
	}
	for i := range want {
		if !wire.Equal(&c.frames[i], &want[i]) {
			t.Fatalf("frame %d: got %v, want %v", i, c.frames[i], want[i])
		}
	}
}

const isn = 1000

// cut splits stream at the given offsets into segments after a SYN.
func cut(stream []byte, base uint32, at ...int) []seg {
	segs := []seg{{seq: base - 1, syn: true}, {seq: 5000, syn: true, reverse: true}}
	prev := 0
	for _, a := range append(at, len(stream)) {
		segs = append(segs, seg{seq: base + uint32(prev), payload: stream[prev:a]})
		prev = a
	}
	return segs
}

func TestReassemblyInOrder(t *testing.T) {
	ms, stream := testFrames(10)
	// One frame split over three segments, several frames in one segment,
	// a segment ending inside a header.
	c := dissect(t, cut(stream, isn, 10, 20, 40, 150, 151, 300))
	checkFrames(t, c, ms)
	if len(c.errs) != 0 {
		t.Errorf("errors: %v", c.errs)
	}
}

func TestReassemblyRetransmitReorder(t *testing.T) {
	ms, stream := testFrames(20)
	segs := cut(stream, isn, 30, 60, 100, 170, 250, 400, 401, 500)
	// Retransmit segment 3 whole, and segment 4 overlapping the next.
	dup := segs[4]
	over := seg{seq: segs[5].seq - 7, payload: stream[segs[5].seq-7-isn : segs[6].seq+3-isn]}
	// Swap two segments and deliver a third late.
	segs[6], segs[7] = segs[7], segs[6]
	late := segs[3]
	segs = append(segs[:3], segs[4:]...)
	segs = append(segs, late, dup, over)
	c := dissect(t, segs)
	checkFrames(t, c, ms)
	if len(c.errs) != 0 {
		t.Errorf("errors: %v", c.errs)
	}
}

func TestReassemblyWrap(t *testing.T) {
	ms, stream := testFrames(8)
	base := uint32(1<<32 - 50)
	segs := cut(stream, base, 20, 70, 120)
	segs[3], segs[4] = segs[4], segs[3] // out of order across the wrap
	c := dissect(t, segs)
	checkFrames(t, c, ms)
}

func TestReassemblyRandom(t *testing.T) {
	ms, stream := testFrames(200)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var at []int
		for p := 0; p < len(stream); {
			p += 1 + rng.IntN(120)
			if p < len(stream) {
				at = append(at, p)
			}
		}
		segs := cut(stream, rng.Uint32(), at...)
		data := segs[2:]
		// Shuffle locally and duplicate some.
		for i := range data {
			j := min(len(data)-1, i+rng.IntN(4))
			data[i], data[j] = data[j], data[i]
		}
		for range 10 {
			data = append(data, data[rng.IntN(len(data))])
		}
		c := dissect(t, append(segs[:2], data...))
		if len(c.frames) != len(ms) || len(c.errs) != 0 {
			t.Fatalf("round %d: %d frames, errors %v", round, len(c.frames), c.errs)
		}
		checkFrames(t, c, ms)
	}
}

func TestReassemblyCorrupt(t *testing.T) {
	ms, stream := testFrames(6)
	bad := append([]byte(nil), stream...)
	off2 := 0
	for i := range 2 {
		off2 += 36 + len(ms[i].Payload)
	}
	bad[off2+20] ^= 0xff // frame 2's ID: its CRC no longer matches
	segs := cut(bad, isn, off2+10, off2+50)
	c := dissect(t, segs)
	want := append(append([]wire.Message(nil), ms[:2]...), ms[3:]...)
	checkFrames(t, c, want)
	if len(c.errs) != 1 || !errors.Is(c.errs[0].Err, wire.ErrChecksum) || c.errs[0].Packet != 4 || c.errs[0].Offset != uint64(off2) {
		t.Fatalf("errors: %+v", c.errs)
	}

	// A bad start byte, and a garbage prefix before the first frame.
	bad = append([]byte("garbage!"), stream...)
	c = dissect(t, cut(bad, isn, 3, 30))
	checkFrames(t, c, ms)
	if len(c.errs) != 1 || !errors.Is(c.errs[0].Err, wire.ErrBadStart) || c.errs[0].Packet != 3 {
		t.Fatalf("errors: %+v", c.errs)
	}
}

func TestReassemblyGapAndEnds(t *testing.T) {
	ms, stream := testFrames(6)
	f1 := 36 + len(ms[0].Payload)
	f2 := f1 + 36 + len(ms[1].Payload)
	// The capture lost the segment holding the end of frame 1 and the start
	// of frame 2: frame 1 is lost, the stream resyncs at frame 2... which is
	// also cut, so at frame 3.
	segs := cut(stream, isn, f1+5, f2+3)
	segs = append(segs[:3], segs[4:]...)
	c := dissect(t, segs)
	checkFrames(t, c, append([]wire.Message{ms[0]}, ms[3:]...))
	if len(c.errs) != 1 || !errors.Is(c.errs[0].Err, ErrGap) {
		t.Fatalf("errors: %+v", c.errs)
	}

	// A snap length that cuts a segment is a gap too.
	segs = cut(stream, isn, f1, f2)
	segs[3].snap = 14 + 20 + 20 + 10
	c = dissect(t, segs)
	checkFrames(t, c, append([]wire.Message{ms[0]}, ms[2:]...))
	if len(c.errs) != 1 || !errors.Is(c.errs[0].Err, ErrGap) || c.errs[0].Bytes != f2-f1-10 {
		t.Fatalf("errors: %+v", c.errs)
	}

	// A FIN inside a frame; then a new connection on the same ports.
	segs = cut(stream[:f2+10], isn, f1)
	segs = append(segs, seg{seq: isn + uint32(f2+10), fin: true})
	segs = append(segs, cut(stream, 90000)...)
	c = dissect(t, segs)
	checkFrames(t, c, append(append([]wire.Message(nil), ms[:2]...), ms...))
	if len(c.errs) != 1 || !errors.Is(c.errs[0].Err, ErrIncomplete) {
		t.Fatalf("errors: %+v", c.errs)
	}
	// The connections are numbered by their first segment, the reverse
	// direction's SYN included.
	if c.conns[0] != 1 || c.conns[1] != 1 || c.conns[2] != 3 || c.conns[len(c.conns)-1] != 3 || c.mid[0] || c.mid[2] {
		t.Errorf("connections %v, mid-stream %v", c.conns, c.mid)
	}

	// A capture that starts mid-stream, inside frame 0.
	segs = cut(stream, isn, 7, f1+1)[3:]
	c = dissect(t, segs)
	checkFrames(t, c, ms[1:])
	if len(c.errs) != 0 {
		t.Fatalf("errors: %+v", c.errs)
	}
	if !c.mid[0] || c.conns[0] != 1 {
		t.Errorf("a stream without its SYN: connection %d, mid-stream %v", c.conns[0], c.mid[0])
	}
}

// FuzzDissector feeds arbitrary packet streams: nothing may panic, and a
// valid stream cut and shuffled by the fuzzer's bytes decodes exactly.
func FuzzDissector(f *testing.F) {
	_, stream := testFrames(12)
	f.Add(stream, []byte{3, 40, 7, 200, 1, 1, 90})
	f.Add([]byte("\x1b\x01\x07\x00garbage"), []byte{0, 0, 0})
	f.Fuzz(runFuzzOnce)
}

func runFuzzOnce(t *testing.T, data []byte, plan []byte) {
	// Bounded so that each input runs in milliseconds: a half's queue of
	// waiting segments is linear in the out-of-order segments it holds.
	if len(data) > 8<<10 || len(plan) > 256 {
		return
	}
	{
		// Mode 1: data is the stream, plan cuts and reorders it.
		var at []int
		p := 0
		for _, b := range plan {
			p += 1 + int(b)
			if p >= len(data) {
				break
			}
			at = append(at, p)
		}
		segs := cut(data, 77, at...)
		for i, b := range plan {
			if j := 2 + int(b)%max(1, len(segs)-2); i+2 < len(segs) && j < len(segs) && b&1 == 1 {
				segs[i+2], segs[j] = segs[j], segs[i+2]
			}
		}
		c := dissect(t, segs)
		var want collector
		d := NewDissector(&want, DissectorOptions{})
		for i, s := range cut(data, 77) {
			b, n := s.bytes(t)
			ci := gopacket.CaptureInfo{CaptureLength: len(b), Length: n}
			d.Packet(int64(i+1), layers.LinkTypeEthernet, b, &ci)
		}
		d.Flush()
		if len(c.frames) != len(want.frames) {
			t.Fatalf("%d frames from the cut stream, %d from the whole", len(c.frames), len(want.frames))
		}
		// Mode 2: data is a raw packet.
		d = NewDissector(&collector{}, DissectorOptions{})
		ci := gopacket.CaptureInfo{CaptureLength: len(data), Length: len(data)}
		for _, lt := range []layers.LinkType{layers.LinkTypeEthernet, layers.LinkTypeRaw, layers.LinkTypeIPv6} {
			d.Packet(1, lt, data, &ci)
		}
		d.Flush()
	}
}

// TestReassemblyCountsWhileHoleOpen checks the segment counters while a
// hole is open, when segments go through the half's queue: each data segment
// counts as the fast path would count it, by where it starts and ends
// relative to the next byte due (the first byte of the hole).
func TestReassemblyCountsWhileHoleOpen(t *testing.T) {
	ms, stream := testFrames(12)
	segs := cut(stream, isn, 100, 200, 300, 400)
	s0, s1, s2, s3, s4 := segs[2], segs[3], segs[4], segs[5], segs[6]
	part := func(from, to int) seg { return seg{seq: isn + uint32(from), payload: stream[from:to]} }
	steps := []struct {
		name           string
		seg            seg
		ooo, rtx, over int64 // counters after the segment
	}{
		{"SYN", segs[0], 0, 0, 0},
		{"reverse SYN", segs[1], 0, 0, 0},
		{"in order", s0, 0, 0, 0},
		{"ahead of the hole", s2, 1, 0, 0},
		{"duplicate of a buffered segment", s2, 2, 0, 0},
		{"further ahead", s3, 3, 0, 0},
		{"overlapping buffered segments", part(250, 350), 4, 0, 0},
		{"delivered bytes only", s0, 4, 1, 0},
		{"delivered bytes only, partly", part(50, 100), 4, 2, 0},
		{"delivered bytes and part of the hole", part(50, 150), 4, 2, 1},
		{"the rest of the hole", part(150, 200), 4, 2, 1},
		{"in order again", s4, 4, 2, 1},
		{"delivered again", s1, 4, 3, 1},
	}
	c := &collector{}
	d := NewDissector(c, DissectorOptions{})
	ts := time.Unix(1700000000, 0)
	for i, st := range steps {
		data, orig := st.seg.bytes(t)
		ts = ts.Add(time.Millisecond)
		ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(data), Length: orig}
		d.Packet(int64(i+1), layers.LinkTypeEthernet, data, &ci)
		s := d.Stats()
		if s.OutOfOrder != st.ooo || s.Retransmitted != st.rtx || s.Overlapping != st.over {
			t.Errorf("after %s (packet %d): out of order %d, retransmitted %d, overlapping %d; want %d, %d, %d",
				st.name, i+1, s.OutOfOrder, s.Retransmitted, s.Overlapping, st.ooo, st.rtx, st.over)
		}
	}
	d.Flush()
	checkFrames(t, c, ms)
	if len(c.errs) != 0 {
		t.Errorf("errors: %v", c.errs)
	}
	// Every segment from the first ahead of the hole to the one that
	// closed it went through the queue.
	if s := d.Stats(); s.SlowPath != 8 {
		t.Errorf("slow path: %d segments, want 8", s.SlowPath)
	}
}

// TestReassemblyHalfSpaceAway: a segment 2^31 bytes from the next byte due
// is behind it (as for TCP, whose sequence numbers compare as int32), so
// its bytes were delivered already; it once cut its payload at a negative
// offset and panicked.
func TestReassemblyHalfSpaceAway(t *testing.T) {
	ms, stream := testFrames(4)
	segs := cut(stream, isn, 50)
	segs = append(segs, seg{seq: isn + uint32(len(stream)) + 1<<31, payload: stream[:10]})
	c := &collector{}
	d := NewDissector(c, DissectorOptions{})
	for i, s := range segs {
		data, orig := s.bytes(t)
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: len(data), Length: orig}
		d.Packet(int64(i+1), layers.LinkTypeEthernet, data, &ci)
	}
	d.Flush()
	checkFrames(t, c, ms)
	if s := d.Stats(); len(c.errs) != 0 || s.Retransmitted != 1 || s.Overlapping != 0 || s.OutOfOrder != 0 {
		t.Errorf("errors %v, stats %+v", c.errs, s)
	}
}

// TestStreamErrorOffsets checks what the StreamErrors of a stream say:
// offsets count from the byte after the SYN (sequence numbers wrap, offsets
// do not), gap bytes included; a hole still open when the capture ends is
// a gap reported at Flush, stamped with the last segment given to the
// Dissector, and the frames behind it are delivered then; a frame the FIN
// cuts is incomplete, reported with the FIN's packet and the bytes of it
// that arrived; a frame the end of the capture cuts is only counted.
func TestStreamErrorOffsets(t *testing.T) {
	ms, stream := testFrames(8)
	end := make([]int, len(ms)) // end[i]: offset just past frame i
	for i := range ms {
		end[i] = 36 + len(ms[i].Payload)
		if i > 0 {
			end[i] += end[i-1]
		}
	}
	base := uint32(1<<32 - 30) // the SYN's sequence number + 1, near the wrap
	segs := cut(stream, base, end[1]+5, end[2]+3, end[4]+1)
	lost := segs[3] // from inside frame 2 to inside frame 3
	segs = append(segs[:3], segs[4:]...)
	c := dissect(t, segs)
	checkFrames(t, c, append([]wire.Message{ms[0], ms[1]}, ms[4:]...))
	last := int64(len(segs))
	if len(c.errs) != 1 {
		t.Fatalf("errors: %+v", c.errs)
	}
	e := c.errs[0]
	if !errors.Is(e.Err, ErrGap) || e.Offset != uint64(end[1]+5) || e.Bytes != len(lost.payload) || e.Packet != last {
		t.Errorf("gap: %+v; want offset %d, %d bytes, packet %d", e, end[1]+5, len(lost.payload), last)
	}
	// Frames 4.. were complete when their segments arrived, but behind
	// the hole: delivered at Flush, with the last packet's number.
	for i, p := range c.pkts[2:] {
		if p != last {
			t.Errorf("frame %d: packet %d, want %d", i+4, p, last)
		}
	}

	// A FIN inside frame 3, after 7 of its bytes; then, on another
	// connection, a capture that ends inside frame 3.
	segs = cut(stream[:end[2]+7], base, end[1]+5)
	segs = append(segs, seg{seq: base + uint32(end[2]+7), fin: true})
	c = dissect(t, segs)
	checkFrames(t, c, ms[:3])
	if len(c.errs) != 1 {
		t.Fatalf("errors: %+v", c.errs)
	}
	e = c.errs[0]
	if !errors.Is(e.Err, ErrIncomplete) || e.Offset != uint64(end[2]) || e.Bytes != 7 || e.Packet != int64(len(segs)) {
		t.Errorf("incomplete: %+v; want offset %d, 7 bytes, packet %d", e, end[2], len(segs))
	}
	d := NewDissector(&collector{}, DissectorOptions{})
	for i, s := range cut(stream[:end[2]+7], base, end[1]+5) {
		data, orig := s.bytes(t)
		ci := gopacket.CaptureInfo{CaptureLength: len(data), Length: orig}
		d.Packet(int64(i+1), layers.LinkTypeEthernet, data, &ci)
	}
	d.Flush()
	if s := d.Stats(); s.Frames != 3 || s.CutAtEnd != 1 || s.Incomplete != 0 {
		t.Errorf("capture ending inside a frame: %+v", s)
	}
}

// TestHalfTable: a half is found again under its key, its other
// direction is handed back for linking when made, and all yields each
// half once, for halves kept under packed address indexes and, once the
// indexes run out, under the whole key.
func TestHalfTable(t *testing.T) {
	ht := newHalfTable()
	addr := func(i int) (a [16]byte) {
		a[10], a[11] = 0xff, 0xff
		a[12], a[13], a[14], a[15] = 10, byte(i>>16), byte(i>>8), byte(i)
		return a
	}
	for i := range 1 << 16 {
		if _, ok := ht.addr(addr(i)); !ok {
			t.Fatalf("address %d got no index", i)
		}
	}
	if _, ok := ht.addr(addr(1 << 16)); ok {
		t.Fatal("address 65536 got an index")
	}
	for _, c := range []struct {
		name string
		a, b [16]byte
	}{{"packed", addr(1), addr(2)}, {"whole", addr(1), addr(1<<16 + 5)}} {
		k := flowKey{src: c.a, dst: c.b, sport: 40000, dport: 7946}
		h, rev := ht.lookup(k)
		if rev != nil {
			t.Errorf("%s: a first half came with another", c.name)
		}
		if again, _ := ht.lookup(k); again != h {
			t.Errorf("%s: the key found another half", c.name)
		}
		back, rev := ht.lookup(flowKey{src: c.b, dst: c.a, sport: 7946, dport: 40000})
		if rev != h || back == h {
			t.Errorf("%s: the other direction's half came with %p, want %p", c.name, rev, h)
		}
		if h.src.Port() != 40000 || h.dst.Port() != 7946 || !h.src.Addr().Is4() {
			t.Errorf("%s: half %v > %v", c.name, h.src, h.dst)
		}
	}
	n := 0
	for range ht.all() {
		n++
	}
	if n != 4 {
		t.Errorf("all yielded %d halves, want 4", n)
	}
}
