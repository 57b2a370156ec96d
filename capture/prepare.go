package capture

import (
	"encoding/binary"
	"math/bits"

	"github.com/gopacket/gopacket"
)

// segmentPrep decodes the packets' headers and finds their connections'
// halves on the reader's goroutine, ahead of the dissection: the two took
// a third of the analysis goroutine's time on the hard mix, and that
// goroutine is the one the others wait for. It only reads the halves it makes; the Dissector, on the
// analysis's goroutine, alone changes them, and links a new half to its
// other direction's in packet order, as it would have made it itself.
type segmentPrep struct {
	dec    headerDecoder
	ports  portSet // election ports, as the Dissector's
	halves halfTable
	recent *[recentHalves]recentHalf
}

// recentHalvesBits sizes segmentPrep's cache of the halves it found last, in
// front of the map of all of them: a capture of many connections over
// time makes the map large, and its lookups missed the processor's
// caches, while the connections open at one time are much fewer.
const recentHalvesBits = 13

const recentHalves = 1 << recentHalvesBits

type recentHalf struct {
	key flowKey
	h   *half
}

// preparedSegment is what segmentPrep found of one packet.
type preparedSegment struct {
	hdr tcpHeaders
	// half is the segment's half, nil unless the packet is a TCP segment
	// on an election port; rev is the other direction's when half was
	// made for this segment and the other was there.
	half, rev    *half
	notDecodable bool
}

func newSegmentPrep(ports []uint16) *segmentPrep {
	s := &segmentPrep{ports: newPortSet(ports), halves: newHalfTable(), recent: new([recentHalves]recentHalf)}
	s.dec.init()
	return s
}

// prepare decodes p's headers into ps and finds its half.
func (s *segmentPrep) prepare(p *Packet, ps *preparedSegment) {
	ps.half, ps.rev, ps.notDecodable = nil, nil, false
	if p.Record != nil || p.Iface.Events {
		return
	}
	ok, notDecodable := s.dec.headers(p.Iface.LinkType, p.Data, &ps.hdr)
	ps.notDecodable = notDecodable
	if !ok || !s.ports.has(ps.hdr.key.sport) && !s.ports.has(ps.hdr.key.dport) {
		return
	}
	ps.half, ps.rev = s.halfOf(&ps.hdr.key)
}

// halfOf returns the half with key, as halfTable.lookup does. A key's half is
// the same for the whole capture, so a cached one is always right.
func (s *segmentPrep) halfOf(key *flowKey) (h, rev *half) {
	r := &s.recent[recentSlot(key)]
	if r.h != nil && r.key == *key {
		return r.h, nil
	}
	h, rev = s.halves.lookup(*key)
	r.key, r.h = *key, h
	return h, rev
}

// recentSlot hashes the parts of a key that tell connections apart: the
// ports and the addresses' last bytes.
func recentSlot(key *flowKey) uint32 {
	x := uint32(key.sport)<<16 | uint32(key.dport)
	x ^= binary.LittleEndian.Uint32(key.src[12:]) ^ bits.RotateLeft32(binary.LittleEndian.Uint32(key.dst[12:]), 11)
	return (x * 0x9e3779b1) >> (32 - recentHalvesBits)
}

// preparedPacket dissects a packet whose headers and half s found, as
// Packet does; the Dissector must have a SegmentHandler, which takes the
// pure ACKs segmentPrep found halves for too.
func (d *Dissector) preparedPacket(num int64, ci *gopacket.CaptureInfo, ps *preparedSegment) {
	d.stats.Packets++
	if ps.notDecodable {
		d.stats.NotDecodable++
	}
	h := ps.half
	if h == nil {
		return
	}
	if rev := ps.rev; rev != nil {
		h.rev, rev.rev = rev, h
	}
	d.electionSegment(num, ci, &ps.hdr, h)
}

// adoptHalves makes the halves s found the Dissector's, once s is done.
func (d *Dissector) adoptHalves(s *segmentPrep) { d.halves = s.halves }
