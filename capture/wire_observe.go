package capture

import (
	"iter"
	"slices"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

// wireObserver keeps what the TCP segments under the frames say: when each
// frame's sender sent it (its TCP timestamp), when its receiver
// acknowledged it, the one-way delay of every segment, and the
// transmissions a receiver never acknowledged.
type wireObserver struct {
	clock  *ClockInfo
	frames chunkList[frameObs]
	// bareDelays holds the delay samples of the segments that are no
	// transmission (pure ACKs, resets), in packet order; a
	// transmission's is in sends (see delaySamples). One list, as sends
	// is, where a map of lists by pair of nodes took a tenth of the
	// analysis in its lookups and the lists' growing.
	bareDelays chunkList[delaySample]
	// sends holds every data transmission, in packet order: one list
	// rather than one per pair of nodes, whose many tails, written in
	// turn, each missed the processor's caches.
	sends chunkList[xmitOutcome]
	// resent holds, for each frame a later segment carried again, those
	// segments' indexes in sends, as lists linked backwards from
	// frameObs.resent: a map of them took a tenth of the time spent
	// noting transmissions on the hard mix, in its lookups.
	resent chunkList[resend]
	// dirs counts the connections' directions that carried frames
	// (frameObs.dir); fins holds the FINs each of them carried.
	dirs int32
	fins map[int32][]finObs
	// segments holds, once keepSegments is set (a record of a reset cut
	// was read), every segment between two nodes by sender and receiver.
	keepSegments bool
	segments     map[[2]int32][]segmentObs
}

// segmentObs is a TCP segment on the switch at t, a reset or not.
type segmentObs struct {
	t   int64
	rst bool
}

// finObs is a FIN on the wire: it closes its direction at seq, which its
// sender's kernel sent at sent (0: unknown).
type finObs struct {
	seq           uint32
	sent, sentErr int64
	pkt           int64
}

// frameObs is one wire frame, any type.
type frameObs struct {
	t       int64 // capture timestamp: on the switch, after the sender's egress
	sent    int64 // the sender's kernel sent it (TSval); 0: unknown (its error: wireObserver.sentErr)
	acked   int64 // its receiver's ACK of its last byte was on the switch; 0: never
	ackSent int64 // that ACK's own send time (TSval); 0: unknown
	pkt     int64
	from    int32
	to      int32
	dir     int32  // its direction: wireObserver.dirs index
	end     uint32 // the sequence number just past its last byte
	// xmit is 1 + the index in sends of the segment that
	// carried its last byte when the frame was decoded, its first copy on
	// the wire; 0 when unknown.
	xmit int32
	// resent is 1 + the index in wireObserver.resent of the latest
	// segment that carried the frame again; 0 when none did.
	resent int32
}

// resend is a segment that carried a frame again: xmit is its index in
// sends, prev 1 + the index in wireObserver.resent of the one before it
// that carried the same frame, 0 for the first.
type resend struct {
	xmit, prev int32
}

// dirObs is the wireObserver's state of one direction of a connection,
// kept on the Dissector's half.
type dirObs struct {
	// pending holds the frames awaiting their receiver's ACK, once the
	// connection carried one (hasPending); xmits the data transmissions
	// awaiting theirs. A new connection empties both and keeps their
	// buffers.
	pending    ackQueue
	hasPending bool
	xmits      ackQueue
	// from and to are the sender's and receiver's nodes, once hasNodes.
	from, to int32
	hasNodes bool
}

// ackQueue holds sequence ranges of one direction in the order sent.
type ackQueue struct {
	items []ackItem
	head  int
	dir   int32 // pending's: wireObserver.dirs index
}

type ackItem struct {
	start, end uint32
	frame      int32 // frames index, or the transmission's index in sends
}

// clear empties q for a new connection, keeping its buffer.
func (q *ackQueue) clear() {
	q.items, q.head, q.dir = q.items[:0], 0, 0
}

// ackQueueCap is an ackQueue's first capacity: growing each new
// connection's queues from one item, and growing them again while most of
// what they held was settled, took a tenth of the analysis goroutine's
// time on the hard mix, a capture of many connections. A larger one costs
// memory on short connections: at 32, the two queues of each of the 1.2M
// halves of a star1000 partition's capture took a fifth of its 1.27 GB.
const ackQueueCap = 4

func (q *ackQueue) push(it ackItem) {
	if q.items == nil {
		q.items = make([]ackItem, 0, ackQueueCap)
	}
	if len(q.items) == cap(q.items) && q.head > 0 && q.head*2 >= len(q.items) {
		// At least half is settled: reuse the room rather than grow.
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	q.items = append(q.items, it)
}

// delaySample is one segment's observed one-way delay: from sent it to at
// sent, and it was on the switch at t.
type delaySample struct {
	t, sent  int64
	from, to int32
}

// xmitOutcome is one data transmission of a direction: delivered (its
// receiver acknowledged it before it was sent again) or lost (sent again
// first); undecided ones are neither. cut says a drop-mode fault record
// severed its direction when it was on the switch (markCutCopies).
type xmitOutcome struct {
	t               int64
	sent            int64 // its sender's kernel sent it (TSval); 0: unknown (its error: wireObserver.sentErr)
	from, to        int32
	delivered, lost bool
	cut             bool
}

func seqLE(a, b uint32) bool { return int32(b-a) >= 0 }

// sentAt reads a TSval as the sender's send time on the capture's clock,
// given that the segment was on the switch at t, which it cannot precede:
// the midpoint of the TSval's tick, at most t.
func (w *wireObserver) sentAt(tsval uint32, t int64) (sent, errNS int64) {
	c := w.clock
	if c == nil || c.TSUnitNS <= 0 {
		return 0, 0
	}
	tick := (t - c.MonotonicOffsetNS) / c.TSUnitNS
	full := tick + int64(int32(tsval-uint32(tick)))
	sent = full*c.TSUnitNS + c.MonotonicOffsetNS + c.TSUnitNS/2
	return min(sent, t), c.TSUnitNS/2 + c.OffsetErrorNS
}

// sentErr bounds the error of a send time sentAt returned: the same for
// all of them, so not kept with each.
func (w *wireObserver) sentErr(sent int64) int64 {
	if sent == 0 {
		return 0
	}
	return w.clock.TSUnitNS/2 + w.clock.OffsetErrorNS
}

// frame notes a decoded frame of from to to and returns its index.
func (w *wireObserver) frame(f *Frame, t int64, from, to int32) int32 {
	fo := frameObs{t: t, pkt: f.Packet, from: from, to: to, end: f.EndSeq}
	if f.HasTS {
		fo.sent, _ = w.sentAt(f.TSval, t)
	}
	o := &f.half.obs
	q := &o.pending
	if !o.hasPending {
		q.dir, o.hasPending = w.dirs, true
		w.dirs++
	}
	fo.dir = q.dir
	fo.xmit = w.carrier(o, f.EndSeq-1)
	i := w.frames.add(fo)
	q.push(ackItem{start: f.EndSeq - uint32(f.Len), end: f.EndSeq, frame: i})
	return i
}

// carrier is 1 + the sends index of the unacknowledged transmission of
// direction o that holds sequence number seq, the latest such; 0 when
// none does. The segment being dissected was noted first (Segment), so
// it is the last one of its direction and the search is short.
func (w *wireObserver) carrier(o *dirObs, seq uint32) int32 {
	q := &o.xmits
	for i := len(q.items) - 1; i >= q.head && i >= len(q.items)-8; i-- {
		it := q.items[i]
		if seqLE(it.start, seq) && int32(seq-it.end) < 0 {
			return it.frame + 1
		}
	}
	return 0
}

// Segment implements SegmentHandler.
func (a *analyzer) Segment(s *Segment) {
	w := &a.wire
	t := s.Time.UnixNano()
	o := &s.half.obs
	if !o.hasNodes {
		o.from, o.to, o.hasNodes = a.nodeOfAddr(s.Src.Addr()), a.nodeOfAddr(s.Dst.Addr()), true
	}
	from, to := o.from, o.to
	var sent, sentErr int64
	if s.HasTS {
		sent, sentErr = w.sentAt(s.TSval, t)
		if sent != 0 && !s.transmits() {
			w.bareDelays.add(delaySample{t: t, sent: sent, from: from, to: to})
		}
	}
	if w.keepSegments {
		if w.segments == nil {
			w.segments = map[[2]int32][]segmentObs{}
		}
		k := [2]int32{from, to}
		w.segments[k] = append(w.segments[k], segmentObs{t: t, rst: s.RST})
	}
	if s.SYN {
		// A new connection: what the old one left unacknowledged never
		// will be.
		o.pending.clear()
		o.xmits.clear()
		o.hasPending = false
	}
	if s.FIN {
		w.fin(o, s, sent, sentErr)
	}
	if rev := s.half.rev; s.ACK && rev != nil {
		w.acknowledge(&rev.obs, s.Ack, t, sent)
	}
	if s.transmits() {
		w.transmission(o, s, t, sent, from, to)
	}
}

// transmits says s is a data transmission: it carries bytes, a SYN or a
// FIN, which its receiver acknowledges.
func (s *Segment) transmits() bool { return s.Len > 0 || s.SYN || s.FIN }

// delaySamples yields every segment's delay sample, those of the
// transmissions with a send time (in sends), then the others'.
func (w *wireObserver) delaySamples() iter.Seq[delaySample] {
	return func(yield func(delaySample) bool) {
		for i := range w.sends.len() {
			o := w.sends.at(i)
			if o.sent != 0 && !yield(delaySample{t: o.t, sent: o.sent, from: o.from, to: o.to}) {
				return
			}
		}
		for i := range w.bareDelays.len() {
			if !yield(*w.bareDelays.at(i)) {
				return
			}
		}
	}
}

// fin notes a FIN of direction o, if o carried frames, sent at sent.
func (w *wireObserver) fin(o *dirObs, s *Segment, sent, sentErr int64) {
	if !o.hasPending {
		return
	}
	q := &o.pending
	if w.fins == nil {
		w.fins = map[int32][]finObs{}
	}
	w.fins[q.dir] = append(w.fins[q.dir], finObs{seq: s.Seq + uint32(s.Len), sent: sent, sentErr: sentErr, pkt: s.Packet})
}

// acknowledge settles, in direction o, the frames and transmissions that
// ack covers, acknowledged at t (sent at ackSent).
func (w *wireObserver) acknowledge(o *dirObs, ack uint32, t, ackSent int64) {
	if q := &o.pending; q.head < len(q.items) {
		for q.head < len(q.items) && seqLE(q.items[q.head].end, ack) {
			fo := w.frames.at(q.items[q.head].frame)
			fo.acked, fo.ackSent = t, ackSent
			q.head++
		}
	}
	if q := &o.xmits; q.head < len(q.items) {
		for q.head < len(q.items) && seqLE(q.items[q.head].end, ack) {
			it := q.items[q.head]
			w.sends.at(it.frame).delivered = true
			q.head++
		}
	}
}

// transmission notes a data transmission, sent by its sender's kernel at
// sent; an earlier one it overlaps that is still unacknowledged was lost:
// its sender sent those bytes again. That is the sender's view, and the
// capture's rule: a transmission the receiver did get, but whose ACK was
// lost on its way back (a one-way cut towards the sender), is sent again
// as well and counts as lost here; only the receiver's later ACKs, not
// the capture, could tell the two apart. Frames still awaiting their ACK
// that the transmission carries again are noted in resent.
func (w *wireObserver) transmission(o *dirObs, s *Segment, t, sent int64, from, to int32) {
	q := &o.xmits
	start := s.Seq
	end := start + uint32(s.Len)
	if s.SYN || s.FIN {
		end++
	}
	kept := q.items[:q.head]
	for _, it := range q.items[q.head:] {
		if int32(start-it.end) < 0 && int32(end-it.start) > 0 {
			w.sends.at(it.frame).lost = true
			continue
		}
		kept = append(kept, it)
	}
	q.items = kept
	idx := w.sends.add(xmitOutcome{t: t, sent: sent, from: from, to: to})
	q.push(ackItem{start: start, end: end, frame: idx})
	if p := &o.pending; s.Len > 0 {
		// Frames are queued in sequence order: those this copy carries
		// are at the end, after any it does not reach.
		for i := len(p.items) - 1; i >= p.head && int32(p.items[i].end-start) > 0; i-- {
			if it := p.items[i]; int32(end-it.start) > 0 {
				if fo := w.frames.at(it.frame); fo.xmit != 0 && fo.xmit != idx+1 {
					fo.resent = w.resent.add(resend{xmit: idx, prev: fo.resent}) + 1
				}
			}
		}
	}
}

// markCutCopies marks the data transmissions that were on the switch
// while a drop-mode fault record (partition, isolate or cut) severed
// their direction: from the record's InForce, when the lab had put it in
// place, until the next record changed reachability (as the cut check
// windows them). Between a record's time and its InForce the change was
// being made and the record decides nothing.
func (w *wireObserver) markCutCopies(allCuts []*cuts) {
	if len(allCuts) == 0 {
		return
	}
	for i := range w.sends.len() {
		o := w.sends.at(i)
		c := cutsAt(allCuts, o.t)
		o.cut = c != nil && o.t >= c.inForce && c.mode(o.from, o.to) == fault.ModeDrop
	}
}

// copiesOf returns the transmissions that carried frame fo:
// its first copy, then every later segment that carried any of its bytes
// again before its receiver acknowledged it; nil when unknown.
func (w *wireObserver) copiesOf(fo *frameObs) []Transmission {
	if fo.xmit == 0 {
		return nil
	}
	idxs := []int32{fo.xmit - 1}
	for r := fo.resent; r != 0; {
		rs := w.resent.at(r - 1)
		idxs = append(idxs, rs.xmit)
		r = rs.prev
	}
	slices.Reverse(idxs[1:])
	copies := make([]Transmission, 0, len(idxs))
	for _, i := range idxs {
		if i >= w.sends.len() {
			continue
		}
		o := w.sends.at(i)
		copies = append(copies, o.transmission(w.sentErr(o.sent)))
	}
	return copies
}

// transmission describes o. A copy is lost when its sender sent the same
// bytes again before any ACK covering them came back (see transmission
// for the ambiguity of a lost ACK), or when it was on the switch while a
// drop-mode record severed its direction (markCutCopies) and no ACK
// covered it before its next copy: an ACK is the receiver's word and
// outweighs the record (the cut check then counts the frame as crossed).
// It is delivered when such an ACK came, undecided otherwise (the
// capture ended first).
func (o *xmitOutcome) transmission(sentErr int64) Transmission {
	tr := Transmission{Time: time.Unix(0, o.t).UTC(), Cut: o.cut, Outcome: OutcomeUndecided}
	if o.sent != 0 {
		sent := time.Unix(0, o.sent).UTC()
		tr.Sent, tr.SentErrNS = &sent, sentErr
	}
	switch {
	case o.delivered:
		tr.Outcome = OutcomeDelivered
	case o.lost || o.cut:
		tr.Outcome = OutcomeLost
	}
	return tr
}

// sendsByPair returns the indexes in sends of each pair's transmissions,
// in packet order.
func (w *wireObserver) sendsByPair() map[[2]int32][]int32 {
	out := map[[2]int32][]int32{}
	for i := range w.sends.len() {
		o := w.sends.at(i)
		k := [2]int32{o.from, o.to}
		out[k] = append(out[k], i)
	}
	return out
}
