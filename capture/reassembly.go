package capture

import (
	"errors"
	"iter"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// How the Dissector turns TCP segments into frames
//
// Each direction of a TCP connection (a half) is a byte stream cut into
// frames with wire.FrameLen. Every byte of a half is handed to the frame
// splitter exactly once and in sequence order, so each frame is decoded
// exactly once per direction however the segments were cut, repeated or
// reordered.
//
// Fast path: a segment that starts exactly at the next expected sequence
// number (or overlaps only bytes already delivered, which are cut off) goes
// straight to the splitter, which decodes the frames inside it in place.
//
// Slow path: a segment beyond the next expected byte opens a hole on the
// half: the segment is copied into the half's queue of waiting segments,
// in sequence order, and every segment of the half goes through the queue
// until the hole and any later ones are filled and everything queued has
// been handed on in order (bytes delivered already cut off, as a
// receiving TCP does), then the half returns to the fast path. A hole that
// is never filled (a segment the capture lost) is given up by Flush at the
// end of the capture, or when the queue holds MaxBufferedPages pages; the
// missing bytes are then a gap. A gopacket reassembly Assembler did this
// here once, with the same page accounting; its connection per hole was
// the slow path's main cost.
//
// A frame's packet is the one after which all of its bytes were present in
// order, that is when the receiver's TCP could hand it to the application;
// its timestamp and interface are that packet's.
//
// Corruption: a frame whose start byte, version, length (above MaxFrame)
// or CRC is wrong is reported as a StreamError with the packet in which it
// was found, and the half resyncs: the splitter scans forward for the next
// offset where a whole frame of a known type with a valid CRC starts (a
// false match needs a 1-in-2^32 CRC collision on top of the start,
// version and type bytes), counting the bytes skipped (SkippedBytes). A
// gap (bytes the capture does not have) resyncs the same way. The stream
// is never abandoned.
//
// A half seen first without its SYN (the capture started mid-connection)
// starts at its first segment and resyncs, since that segment may begin
// inside a frame. Data in a SYN is ignored (bullylab never sends any).

// Errors reported in StreamError.Err besides wire's.
var (
	// ErrGap reports bytes of a stream that are not in the capture (lost by
	// the capture, or beyond the snap length); the frame in progress is lost.
	ErrGap = errors.New("bytes missing from the capture")
	// ErrIncomplete reports a stream that ended (FIN or RST) inside a frame.
	ErrIncomplete = errors.New("stream ended inside a frame")
)

// Frame is one decoded frame, handed to Handler.Frame.
type Frame struct {
	Packet int64     // packet number after which the frame was complete (see Dissector)
	Time   time.Time // that packet's timestamp
	Iface  int       // that packet's interface
	Src    netip.AddrPort
	Dst    netip.AddrPort
	// Stream is the frame's direction of its connection, the same pointer
	// for every frame of it, so that a Handler can keep per-stream state.
	Stream *Stream
	Offset uint64 // stream offset of the frame's first byte (see TCP reassembly in the package doc)
	Len    int    // frame length, header to CRC
	// Msg is the decoded frame; Msg.Payload aliases the dissector's buffers
	// and is valid only during the Frame call.
	Msg wire.Message
	// Err is nil or wire.ErrUnknownType (the frame is intact but of a type
	// this version does not define).
	Err error
	// EndSeq is the TCP sequence number just past the frame's last byte:
	// what the receiver's acknowledgement of the whole frame carries.
	EndSeq uint32
	// TSval is the TCP timestamp option of the segment that completed the
	// frame, when HasTS.
	TSval uint32
	HasTS bool

	half *half // the frame's direction
}

// Segment is one TCP segment on an election port, handed to a Handler that
// is also a SegmentHandler before its payload is dissected: pure
// acknowledgements too, which carry no frame.
type Segment struct {
	Packet   int64
	Time     time.Time
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	// Len is the payload's length on the wire, what the capture cut off
	// included.
	Len                int
	SYN, ACK, FIN, RST bool
	TSval              uint32
	HasTS              bool

	half *half // the segment's direction
}

// SegmentHandler is a Handler that also wants every segment.
type SegmentHandler interface {
	Segment(s *Segment)
}

// Stream is one direction of a TCP connection.
type Stream struct {
	Src, Dst netip.AddrPort
	// Conn numbers the connection: the Dissector's count of streams when
	// it started, so from 1 in the order their first segment came. It
	// changes when a SYN starts a new connection on the same addresses and
	// ports, which also starts Frame.Offset from 0 again.
	Conn int64
	// MidStream says that the capture lacks the connection's SYN: it
	// started, or lost packets, after the connection opened, so bytes
	// before offset 0 may be missing.
	MidStream bool
	// User is the Handler's, zero until it sets it.
	User [2]int32
	// HasUser says User was set.
	HasUser bool
	// authSlot is 1 + the stream's index in the authChecker's streams,
	// given by the goroutine that hands it frames; 0 until then.
	authSlot int32
}

// StreamError is a corrupt frame, a gap or a stream cut inside a frame
// (see TCP reassembly in the package doc for what each field says of
// each).
type StreamError struct {
	Packet int64     // packet in which the problem showed
	Time   time.Time // that packet's timestamp
	Src    netip.AddrPort
	Dst    netip.AddrPort
	Offset uint64 // stream offset of the bad frame, of the gap or of the cut frame
	Bytes  int    // bytes missing (gap) or left unparsed (incomplete); 0 for a corrupt frame
	Err    error  // a wire sentinel, ErrGap or ErrIncomplete
}

func (e *StreamError) Error() string {
	return "packet " + strconv.FormatInt(e.Packet, 10) + ": stream " + e.Src.String() + " > " + e.Dst.String() +
		" offset " + strconv.FormatUint(e.Offset, 10) + ": " + e.Err.Error()
}

// Handler receives what a Dissector finds. The pointers are reused: copy
// what must outlive the call.
type Handler interface {
	Frame(f *Frame)
	StreamError(e *StreamError)
}

// DissectorOptions tune a Dissector; zero fields take the defaults.
type DissectorOptions struct {
	// Ports are the TCP ports carrying frames (either end of a connection).
	// Default: wire.DefaultPort.
	Ports []uint16
	// MaxFrame is the longest frame accepted; a header announcing a longer
	// one is corrupt. Default wire.DefaultMaxFrame, what nodes accept.
	MaxFrame int
	// MaxBufferedPages bounds the out-of-order data one half may buffer
	// (pages of about 1.9 KB) before the oldest gap is given up. Default 4096.
	MaxBufferedPages int
}

// DissectorStats counts what a Dissector saw.
//
// A data segment of a stream (once its SYN or, without one, its first data
// segment is seen) is in order or counted in exactly one of OutOfOrder,
// Retransmitted and Overlapping, by where it lies relative to the next
// byte due, the first byte not yet delivered: it starts there (in order),
// after it (out of order), or before it and ends at or before it
// (retransmitted) or after it (overlapping). While a hole is open the next
// byte due is the hole's first, so a segment ahead of the hole is out of
// order even when it repeats one already waiting there. A segment's bytes
// on the wire count, those the capture cut off (snap length) included.
type DissectorStats struct {
	Packets        int64 `json:"packets"`          // packets given to Packet
	TCPSegments    int64 `json:"tcp_segments"`     // TCP segments on an election port
	Streams        int64 `json:"streams"`          // halves (directions) started
	MidStream      int64 `json:"mid_stream"`       // halves whose SYN the capture lacks
	Frames         int64 `json:"frames"`           // frames decoded, unknown types included
	UnknownType    int64 `json:"unknown_type"`     // frames of a type this version does not define
	Corrupt        int64 `json:"corrupt"`          // corrupt frames (bad start, version, length or CRC)
	SkippedBytes   int64 `json:"skipped_bytes"`    // bytes skipped while resyncing
	Gaps           int64 `json:"gaps"`             // holes in a stream
	GapBytes       int64 `json:"gap_bytes"`        // bytes in those holes
	Retransmitted  int64 `json:"retransmitted"`    // data segments bringing no new byte: all delivered already, or after the stream closed
	Overlapping    int64 `json:"overlapping"`      // data segments repeating delivered bytes and bringing new ones
	OutOfOrder     int64 `json:"out_of_order"`     // data segments starting after the next byte due: ahead of a hole, duplicates of waiting ones included
	SlowPath       int64 `json:"slow_path"`        // segments handled while a hole was open (through the half's queue), the one opening it included
	Incomplete     int64 `json:"incomplete"`       // streams closed inside a frame
	CutAtEnd       int64 `json:"cut_at_end"`       // frames the capture ended inside of
	NotDecodable   int64 `json:"not_decodable"`    // packets on an election port gopacket could not decode
	IgnoredSYNData int64 `json:"ignored_syn_data"` // SYN segments carrying data, ignored
}

// Dissector decodes the frames carried by TCP segments of captured packets
// (see TCP reassembly in the package doc). It is not safe for concurrent
// use.
type Dissector struct {
	h        Handler
	ports    portSet // election ports
	maxFrame int
	maxPages int

	dec headerDecoder
	hdr tcpHeaders

	halves halfTable

	// The packet being processed; frames and errors are stamped with it.
	curPacket int64
	curTime   time.Time
	curIface  int

	frame    Frame
	serr     StreamError
	stats    DissectorStats
	seg      Segment
	segH     SegmentHandler // h, if it is one
	curTS    uint32         // TCP timestamp of the segment being processed
	curHasTS bool

	// holes lists the halves that opened a hole, in the order they did,
	// for Flush; slab is where queued segments are copied.
	holes []*half
	slab  []byte
}

type flowKey struct {
	src, dst     [16]byte
	sport, dport uint16
}

// half is one direction of a TCP connection.
type half struct {
	src, dst netip.AddrPort
	stream   Stream
	synced   bool   // nextSeq is known
	seq0     uint32 // sequence number of stream offset 0, once synced
	isn      uint32 // sequence number of the SYN, when hasISN
	hasISN   bool
	nextSeq  uint32
	offset   uint64 // stream bytes consumed by the splitter (delivered + gaps)
	closed   bool
	finSet   bool
	finSeq   uint32
	// holeOpen says bytes are missing before some the half was given: ooo
	// queues the segments waiting behind the hole, in sequence order,
	// oooPages counts the pages they take, and oooEnd is the highest
	// sequence number past any segment given since the hole opened. The
	// hole is closed once the bytes delivered reach oooEnd.
	holeOpen bool
	ooo      []oooSegment
	oooPages int
	oooEnd   uint32
	inHoles  bool // listed in Dissector.holes
	// rev is the connection's other direction, once a segment of each
	// was seen; obs is the analyzer's state of this one. Both outlive a
	// new connection on the same addresses and ports (resetHalf).
	rev *half
	obs dirObs

	buf     []byte // bytes of an incomplete frame, or kept while hunting
	bufOff  uint64 // stream offset of buf[0]
	hunting bool   // resyncing: looking for a valid frame
}

// NewDissector returns a Dissector that hands what it finds to h.
func NewDissector(h Handler, opts DissectorOptions) *Dissector {
	d := &Dissector{
		h:        h,
		maxFrame: opts.MaxFrame,
		maxPages: opts.MaxBufferedPages,
		halves:   newHalfTable(),
	}
	d.segH, _ = h.(SegmentHandler)
	if d.maxFrame <= 0 {
		d.maxFrame = wire.DefaultMaxFrame
	}
	if d.maxPages <= 0 {
		d.maxPages = 4096
	}
	ports := opts.Ports
	if len(ports) == 0 {
		ports = []uint16{wire.DefaultPort}
	}
	d.ports = newPortSet(ports)
	d.dec.init()
	return d
}

// Stats returns the counters so far.
func (d *Dissector) Stats() DissectorStats { return d.stats }

// portSet is a set of TCP ports, a bit each.
type portSet [1024]uint64

func newPortSet(ports []uint16) (s portSet) {
	for _, p := range ports {
		s[p>>6] |= 1 << (p & 63)
	}
	return s
}

func (s *portSet) has(p uint16) bool { return s[p>>6]&(1<<(p&63)) != 0 }

// Packet dissects one captured packet of the given link type (Ethernet, or
// raw IPv4/IPv6). num numbers it for reports; data may be reused after the
// call returns.
func (d *Dissector) Packet(num int64, linkType layers.LinkType, data []byte, ci *gopacket.CaptureInfo) {
	d.stats.Packets++
	t := &d.hdr
	ok, notDecodable := d.dec.headers(linkType, data, t)
	if notDecodable {
		d.stats.NotDecodable++
	}
	if ok {
		d.tcpSegment(num, ci, t)
	}
}

// tcpSegment dissects a TCP segment whose headers were decoded.
func (d *Dissector) tcpSegment(num int64, ci *gopacket.CaptureInfo, t *tcpHeaders) {
	if !d.ports.has(t.key.sport) && !d.ports.has(t.key.dport) {
		return
	}
	// Pure ACKs, most of the reverse direction, need no stream state:
	// only a SegmentHandler sees them.
	if d.segH == nil && t.pureACK() {
		d.stats.TCPSegments++
		return
	}
	d.electionSegment(num, ci, t, d.halfOf(t.key))
}

// electionSegment dissects a TCP segment on an election port, of half h.
func (d *Dissector) electionSegment(num int64, ci *gopacket.CaptureInfo, t *tcpHeaders, h *half) {
	d.stats.TCPSegments++
	d.curTS, d.curHasTS = t.tsval, t.hasTS
	if d.segH != nil {
		d.handSegment(num, ci.Timestamp, t, h)
	}
	if t.pureACK() {
		return
	}
	d.curPacket, d.curTime, d.curIface = num, ci.Timestamp, ci.InterfaceIndex
	d.segment(h, t)
}

// halfOf returns the half with key, made on its first segment and linked
// to the other direction's when that one exists.
func (d *Dissector) halfOf(key flowKey) *half {
	h, rev := d.halves.lookup(key)
	if rev != nil {
		h.rev, rev.rev = rev, h
	}
	return h
}

// halfTable holds the halves seen, by their flowKey. The first 65,536
// addresses seen (a testbed's nodes, and then some) get an index each, and
// a half between two of them is kept under a uint64 of both indexes and
// both ports, which the runtime's map hashes and compares in a few
// instructions; others are kept under the whole key. On a star1000
// partition's capture, 1.2M halves in 2.5M packets, the lookups under the
// whole key, each a miss of the processor's caches on a map of 36-byte
// keys, took a third of the analysis.
type halfTable struct {
	addrs  map[[16]byte]uint16
	packed map[uint64]*half
	whole  map[flowKey]*half
}

func newHalfTable() halfTable {
	return halfTable{addrs: map[[16]byte]uint16{}, packed: map[uint64]*half{}, whole: map[flowKey]*half{}}
}

// addr returns a's index, given one while there are indexes left.
func (t halfTable) addr(a [16]byte) (uint16, bool) {
	i, ok := t.addrs[a]
	if !ok && len(t.addrs) <= math.MaxUint16 {
		i, ok = uint16(len(t.addrs)), true
		t.addrs[a] = i
	}
	return i, ok
}

// lookup returns the half with key, made when missing; rev is then the
// other direction's half, if there is one, for the caller to link to it.
func (t halfTable) lookup(key flowKey) (h, rev *half) {
	src, okSrc := t.addr(key.src)
	dst, okDst := t.addr(key.dst)
	if !okSrc || !okDst {
		return t.lookupWhole(key)
	}
	k := uint64(src)<<48 | uint64(dst)<<32 | uint64(key.sport)<<16 | uint64(key.dport)
	if h = t.packed[k]; h != nil {
		return h, nil
	}
	h = newHalf(key)
	t.packed[k] = h
	return h, t.packed[uint64(dst)<<48|uint64(src)<<32|uint64(key.dport)<<16|uint64(key.sport)]
}

func (t halfTable) lookupWhole(key flowKey) (h, rev *half) {
	if h = t.whole[key]; h != nil {
		return h, nil
	}
	h = newHalf(key)
	t.whole[key] = h
	return h, t.whole[flowKey{src: key.dst, dst: key.src, sport: key.dport, dport: key.sport}]
}

func newHalf(key flowKey) *half {
	src, dst := netip.AddrFrom16(key.src).Unmap(), netip.AddrFrom16(key.dst).Unmap()
	h := &half{src: netip.AddrPortFrom(src, key.sport), dst: netip.AddrPortFrom(dst, key.dport)}
	h.stream.Src, h.stream.Dst = h.src, h.dst
	return h
}

// all yields every half.
func (t halfTable) all() iter.Seq[*half] {
	return func(yield func(*half) bool) {
		for _, h := range t.packed {
			if !yield(h) {
				return
			}
		}
		for _, h := range t.whole {
			if !yield(h) {
				return
			}
		}
	}
}

// handSegment gives the segment being processed to the SegmentHandler.
func (d *Dissector) handSegment(num int64, ts time.Time, t *tcpHeaders, h *half) {
	s := &d.seg
	*s = Segment{Packet: num, Time: ts, Seq: t.seq, Ack: t.ack, Len: len(t.payload) + t.missing,
		SYN: t.syn(), ACK: t.ackFlag(), FIN: t.fin(), RST: t.rst(), TSval: d.curTS, HasTS: d.curHasTS,
		Src: h.src, Dst: h.dst, half: h}
	d.segH.Segment(s)
}

// segment handles one TCP segment of an election connection.
func (d *Dissector) segment(h *half, t *tcpHeaders) {
	seq, payload, missing := t.seq, t.payload, t.missing
	if t.syn() {
		if h.hasISN && seq == h.isn {
			return // a retransmitted SYN
		}
		d.resetHalf(h)
		d.stats.Streams++
		h.stream.Conn, h.stream.MidStream = d.stats.Streams, false
		h.hasISN, h.isn, h.synced, h.nextSeq, h.seq0 = true, seq, true, seq+1, seq+1
		if len(payload) > 0 {
			d.stats.IgnoredSYNData++
		}
		return
	}
	if !h.synced {
		if len(payload) == 0 {
			return // a FIN or RST of a connection we never saw data of
		}
		d.stats.Streams++
		d.stats.MidStream++
		h.stream.Conn, h.stream.MidStream = d.stats.Streams, true
		h.synced, h.nextSeq, h.seq0, h.hunting = true, seq, seq, true
	}
	if h.closed {
		if len(payload) > 0 {
			d.stats.Retransmitted++
		}
		return
	}
	if t.fin() && !h.finSet {
		h.finSet, h.finSeq = true, seq+uint32(len(payload))+uint32(missing)
	}
	diff := int32(seq - h.nextSeq)
	d.countSegment(diff, len(payload), missing)
	if h.holeOpen {
		d.slowSegment(h, seq, payload, t.rst())
		return
	}
	switch {
	case diff > 0:
		if len(payload) == 0 {
			return // a FIN ahead of a hole: finSeq remembers it; RST is ignored (RFC 5961)
		}
		d.openHole(h)
		d.slowSegment(h, seq, payload, t.rst())
		return
	case diff < 0:
		cut := -int(diff) // not int(-diff), which is negative for -1<<31
		if cut >= len(payload)+missing {
			d.checkEnd(h, false) // a FIN may close h; an old RST is out of window
			return
		}
		if cut >= len(payload) {
			missing -= cut - len(payload)
			payload = payload[:0]
		} else {
			payload = payload[cut:]
		}
	}
	if len(payload) > 0 {
		h.nextSeq += uint32(len(payload))
		d.deliver(h, payload)
	}
	if missing > 0 {
		h.nextSeq += uint32(missing)
		d.gap(h, missing)
	}
	d.checkEnd(h, t.rst())
}

// countSegment counts a segment of an open half in OutOfOrder,
// Retransmitted or Overlapping (or in none, in order) by where it lies
// relative to the next byte due, diff bytes before its first: payload
// bytes captured and missing more on the wire. It is the same whether or
// not a hole is open, the next byte due then being the hole's first.
func (d *Dissector) countSegment(diff int32, payload, missing int) {
	switch {
	case diff > 0:
		if payload > 0 {
			d.stats.OutOfOrder++
		}
	case diff < 0:
		if -int(diff) < payload+missing {
			d.stats.Overlapping++
		} else if payload > 0 {
			d.stats.Retransmitted++
		}
	}
}

// checkEnd closes h when it reached its FIN, or at an in-sequence RST.
func (d *Dissector) checkEnd(h *half, rstHere bool) {
	if h.closed {
		return
	}
	if rstHere || (h.finSet && h.nextSeq == h.finSeq) {
		h.closed = true
		d.endStream(h, true)
	}
}

// resetHalf forgets a half's connection for a new one on the same ports.
func (d *Dissector) resetHalf(h *half) {
	if h.synced && !h.closed {
		d.endStream(h, true)
	}
	src, dst, stream, rev, obs, inHoles := h.src, h.dst, h.stream, h.rev, h.obs, h.inHoles
	buf, ooo := h.buf[:0], h.ooo[:0]
	*h = half{src: src, dst: dst, stream: stream, rev: rev, obs: obs, inHoles: inHoles, buf: buf, ooo: ooo}
}

// endStream reports what is left in h's buffer when its stream ends: a
// frame cut by the end of the connection (closed) or of the capture.
func (d *Dissector) endStream(h *half, closed bool) {
	if len(h.buf) == 0 {
		return
	}
	if h.hunting {
		d.stats.SkippedBytes += int64(len(h.buf))
	} else if closed {
		d.stats.Incomplete++
		d.report(h, h.bufOff, len(h.buf), ErrIncomplete)
	} else {
		d.stats.CutAtEnd++
	}
	h.buf = h.buf[:0]
}

func (d *Dissector) report(h *half, off uint64, n int, err error) {
	d.serr = StreamError{Packet: d.curPacket, Time: d.curTime, Src: h.src, Dst: h.dst, Offset: off, Bytes: n, Err: err}
	d.h.StreamError(&d.serr)
}

// gap records n stream bytes the capture does not have.
func (d *Dissector) gap(h *half, n int) {
	d.stats.Gaps++
	d.stats.GapBytes += int64(n)
	off := h.offset + uint64(len(h.buf))
	if h.hunting {
		d.stats.SkippedBytes += int64(len(h.buf))
	}
	d.report(h, off, n, ErrGap)
	h.buf = h.buf[:0]
	h.offset += uint64(n)
	h.hunting = true
}

// deliver hands the next in-order bytes of h to the frame splitter.
func (d *Dissector) deliver(h *half, data []byte) {
	if len(h.buf) == 0 {
		// Common case: the segment starts at a frame boundary; decode in
		// place and keep only a trailing partial frame.
		n := d.split(h, data)
		if n < len(data) {
			h.bufOff = h.offset
			h.buf = append(h.buf[:0], data[n:]...)
		}
		return
	}
	h.buf = append(h.buf, data...)
	n := d.split(h, h.buf)
	if n == 0 {
		return // still incomplete: no copying, or tiny segments would be quadratic
	}
	rest := copy(h.buf, h.buf[n:])
	h.buf = h.buf[:rest]
	h.bufOff = h.offset
}

// split decodes the frames at the start of b, advancing h.offset past what
// it consumed, and returns how many bytes it consumed; the rest is an
// incomplete frame (or a resync candidate) to keep.
func (d *Dissector) split(h *half, b []byte) int {
	i := 0
	for i < len(b) {
		if h.hunting {
			j, ok := d.hunt(b[i:])
			d.stats.SkippedBytes += int64(j)
			h.offset += uint64(j)
			i += j
			if !ok {
				return i
			}
			h.hunting = false
		}
		rest := b[i:]
		n, err := wire.FrameLen(rest)
		if err == nil && n > d.maxFrame {
			err = wire.ErrTooLarge
		}
		if err != nil {
			if errors.Is(err, wire.ErrTruncated) {
				return i
			}
			d.corrupt(h, err)
			continue
		}
		if n > len(rest) {
			return i
		}
		m := &d.frame.Msg
		_, err = wire.Decode(rest[:n], m)
		if err != nil && err != wire.ErrUnknownType {
			d.corrupt(h, err)
			continue
		}
		d.stats.Frames++
		if err != nil {
			d.stats.UnknownType++
		}
		f := &d.frame
		f.Packet, f.Time, f.Iface = d.curPacket, d.curTime, d.curIface
		f.Src, f.Dst, f.Stream, f.Offset, f.Len, f.Err = h.src, h.dst, &h.stream, h.offset, n, err
		f.EndSeq, f.TSval, f.HasTS = h.seq0+uint32(h.offset+uint64(n)), d.curTS, d.curHasTS
		f.half = h
		d.h.Frame(f)
		h.offset += uint64(n)
		i += n
	}
	return i
}

// corrupt reports the frame at h.offset and starts a resync one byte on.
func (d *Dissector) corrupt(h *half, err error) {
	d.stats.Corrupt++
	d.report(h, h.offset, 0, err)
	h.hunting = true
}

// hunt looks for a resync point in b: the first offset where a whole frame
// of a known type, at most maxFrame long and with a valid CRC, starts. It
// returns the bytes to skip before it and true, or, when b ends before a
// decision can be made, the bytes that can be skipped for sure and false.
// After a corrupt frame, b starts at that frame, which fails these checks
// again; after a gap or at a mid-stream start, b[0] may well be a frame.
func (d *Dissector) hunt(b []byte) (int, bool) {
	var m wire.Message
	for j := 0; j < len(b); j++ {
		if b[j] != wire.StartByte {
			continue
		}
		c := b[j:]
		if len(c) < wire.HeaderLen {
			// Not enough to judge: keep from here, unless the bytes we
			// have already rule it out.
			if len(c) > 1 && c[1] != wire.Version || len(c) > 2 && !wire.Type(c[2]).Valid() {
				continue
			}
			return j, false
		}
		n, err := wire.FrameLen(c)
		if err != nil || n > d.maxFrame || !wire.Type(c[2]).Valid() {
			continue
		}
		if n > len(c) {
			return j, false
		}
		if _, err := wire.Decode(c[:n], &m); err == nil {
			return j, true
		}
	}
	return len(b), false
}

// Flush ends the capture: halves with out-of-order data waiting give up
// their holes (reported as gaps) and deliver what they hold, and frames cut
// by the end of the capture are counted in CutAtEnd.
func (d *Dissector) Flush() {
	for _, h := range d.holes {
		for len(h.ooo) > 0 {
			d.skipHole(h)
		}
		h.holeOpen, h.inHoles = false, false
	}
	d.holes = d.holes[:0]
	for h := range d.halves.all() {
		if !h.closed {
			d.endStream(h, false)
		}
	}
}

// oooSegment is a segment waiting behind a hole: its first sequence
// number and its payload, copied.
type oooSegment struct {
	seq  uint32
	data []byte
}

// pageBytes is a page of MaxBufferedPages.
const pageBytes = 1900

func (d *Dissector) openHole(h *half) {
	h.holeOpen, h.oooEnd = true, h.nextSeq
	if !h.inHoles {
		h.inHoles = true
		d.holes = append(d.holes, h)
	}
}

// slowSegment handles a segment of a half with a hole open. A RST is
// heeded only once the hole is closed, and only at the next byte due.
func (d *Dissector) slowSegment(h *half, seq uint32, payload []byte, rst bool) {
	d.stats.SlowPath++
	if end := seq + uint32(len(payload)); int32(end-h.oooEnd) > 0 {
		h.oooEnd = end
	}
	if len(payload) > 0 {
		if int32(seq-h.nextSeq) > 0 {
			if h.oooPages >= d.maxPages {
				d.skipHole(h)
			}
			d.queue(h, seq, payload)
		} else {
			d.deliverFrom(h, seq, payload)
		}
		d.drain(h)
	}
	if int32(h.nextSeq-h.oooEnd) >= 0 {
		// Nothing is queued: it would end past oooEnd.
		h.holeOpen = false
		d.checkEnd(h, rst && seq == h.nextSeq)
	}
}

// queue copies a segment ahead of the next byte due into h's queue,
// after those starting at or before it.
func (d *Dissector) queue(h *half, seq uint32, payload []byte) {
	if len(d.slab)+len(payload) > cap(d.slab) {
		d.slab = make([]byte, 0, max(64<<10, len(payload)))
	}
	n := len(d.slab)
	d.slab = append(d.slab, payload...)
	data := d.slab[n:len(d.slab):len(d.slab)]
	i := len(h.ooo)
	for i > 0 && int32(h.ooo[i-1].seq-seq) > 0 {
		i--
	}
	h.ooo = slices.Insert(h.ooo, i, oooSegment{seq: seq, data: data})
	h.oooPages += (len(payload) + pageBytes - 1) / pageBytes
}

// deliverFrom delivers the bytes of a segment starting at seq, at or
// before the next byte due, that were not delivered yet.
func (d *Dissector) deliverFrom(h *half, seq uint32, data []byte) {
	cut := -int(int32(seq - h.nextSeq))
	if cut < len(data) {
		h.nextSeq += uint32(len(data) - cut)
		d.deliver(h, data[cut:])
	}
}

// drain delivers the queued segments the bytes delivered have reached.
func (d *Dissector) drain(h *half) {
	k := 0
	for k < len(h.ooo) && int32(h.ooo[k].seq-h.nextSeq) <= 0 {
		sg := h.ooo[k]
		h.oooPages -= (len(sg.data) + pageBytes - 1) / pageBytes
		d.deliverFrom(h, sg.seq, sg.data)
		k++
	}
	if k > 0 {
		n := copy(h.ooo, h.ooo[k:])
		clear(h.ooo[n:])
		h.ooo = h.ooo[:n]
	}
}

// skipHole gives up h's first hole: its bytes are a gap, and the queued
// segments after it are delivered as far as they reach.
func (d *Dissector) skipHole(h *half) {
	if len(h.ooo) == 0 {
		return
	}
	if skip := int32(h.ooo[0].seq - h.nextSeq); skip > 0 {
		h.nextSeq += uint32(skip)
		d.gap(h, int(skip))
	}
	d.drain(h)
}
