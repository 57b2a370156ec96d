package capture

// Read-ahead batches: how many packets, and how many bytes of them, one
// holds at most, and how many are in flight between the reader and the
// analysis.
const (
	batchPackets = 512
	batchBytes   = 256 << 10
	batchesKept  = 3
)

// packetBatch is a run of packets read ahead, their data copied.
type packetBatch struct {
	pkts []Packet
	buf  []byte
	// ifaces are the interfaces known after packet 1, in its batch.
	ifaces []*Interface
	// err ends the batches: io.EOF or the reader's error after the
	// packets of this one.
	err error
}

// readAhead reads rd's packets on a goroutine of its own, so that reading
// and parsing the file (a fifth of an analysis) runs on another core
// than the dissection. Batches come in file order; the last one carries
// the error that ended the reading (io.EOF at the end), after which the
// goroutine has returned. Each batch received is handed back on free
// once its packets were used.
func readAhead(rd *FileReader) (full <-chan *packetBatch, free chan<- *packetBatch) {
	fullC := make(chan *packetBatch, batchesKept)
	freeC := make(chan *packetBatch, batchesKept)
	for range batchesKept {
		freeC <- &packetBatch{pkts: make([]Packet, 0, batchPackets), buf: make([]byte, 0, batchBytes)}
	}
	go func() {
		defer close(fullC)
		for {
			b := <-freeC
			b.pkts, b.buf, b.ifaces, b.err = b.pkts[:0], b.buf[:0], nil, nil
			var ends [batchPackets]int
			for len(b.pkts) < batchPackets && len(b.buf) < batchBytes {
				p, err := rd.Next()
				if err != nil {
					b.err = err
					break
				}
				if p.Num == 1 {
					b.ifaces = rd.Interfaces()
				}
				b.buf = append(b.buf, p.Data...)
				ends[len(b.pkts)] = len(b.buf)
				b.pkts = append(b.pkts, *p)
			}
			// The data's slices are cut once buf is done growing.
			start := 0
			for i := range b.pkts {
				b.pkts[i].Data = b.buf[start:ends[i]:ends[i]]
				start = ends[i]
			}
			fullC <- b
			if b.err != nil {
				return
			}
		}
	}()
	return fullC, freeC
}
