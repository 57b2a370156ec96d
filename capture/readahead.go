package capture

// Read-ahead batches: how many packets, and how many bytes of them, one
// holds at most, and how many are in flight between the reader and the
// analysis. Each hand-over can park one goroutine's thread and wake the
// other's, tens of microseconds on a VM: with 512 packets a batch and 3
// in flight, the reader and the analysis waited on each other for a third
// of the run on the hard mix (a batch is about 60 microseconds of
// analysis), and larger batches, past a few thousand packets, no longer
// fit the caches.
const (
	batchPackets = 2048
	batchBytes   = 1 << 20
	batchesKept  = 8
)

// packetBatch is a run of packets read ahead, their data copied.
type packetBatch struct {
	pkts []Packet
	// segs[i] is what the batch's prep found of pkts[i].
	segs []preparedSegment
	buf  []byte
	// ifaces are the interfaces known after packet 1, in its batch.
	ifaces []*Interface
	// prep, set in every batch from packet 1's on, found segs.
	prep *segmentPrep
	// err ends the batches: io.EOF or the reader's error after the
	// packets of this one.
	err error
}

// readAhead reads rd's packets on a goroutine of its own, so that reading
// and parsing the file (a fifth of an analysis) runs on another core
// than the dissection, and so does a segmentPrep on the election ports
// ports names once packet 1 is read. Batches come in file order; the last
// one carries the error that ended the reading (io.EOF at the end), after
// which the goroutine has returned. Each batch received is handed back on
// free once its packets were used.
func readAhead(rd *FileReader, ports func(ifaces []*Interface, first *Packet) []uint16) (full <-chan *packetBatch, free chan<- *packetBatch) {
	fullC := make(chan *packetBatch, batchesKept)
	freeC := make(chan *packetBatch, batchesKept)
	for range batchesKept {
		freeC <- &packetBatch{pkts: make([]Packet, 0, batchPackets), segs: make([]preparedSegment, batchPackets), buf: make([]byte, 0, batchBytes)}
	}
	go func() {
		defer close(fullC)
		var prep *segmentPrep
		for {
			b := <-freeC
			b.pkts, b.buf, b.ifaces, b.err = b.pkts[:0], b.buf[:0], nil, nil
			var ends [batchPackets]int
			for len(b.pkts) < batchPackets && len(b.buf) < batchBytes {
				// The packet is read into its place in the batch: a
				// Packet is 144 bytes, and copying it from the
				// reader's own was a tenth of the reading.
				b.pkts = b.pkts[:len(b.pkts)+1]
				p := &b.pkts[len(b.pkts)-1]
				if err := rd.nextInto(p); err != nil {
					b.pkts = b.pkts[:len(b.pkts)-1]
					b.err = err
					break
				}
				if p.Num == 1 {
					b.ifaces = rd.Interfaces()
					prep = newSegmentPrep(ports(b.ifaces, p))
				}
				b.buf = append(b.buf, p.Data...)
				ends[len(b.pkts)-1] = len(b.buf)
			}
			// The data's slices are cut once buf is done growing.
			start := 0
			for i := range b.pkts {
				b.pkts[i].Data = b.buf[start:ends[i]:ends[i]]
				start = ends[i]
			}
			b.prep = prep
			for i := range b.pkts {
				prep.prepare(&b.pkts[i], &b.segs[i])
			}
			fullC <- b
			if b.err != nil {
				return
			}
		}
	}()
	return fullC, freeC
}
