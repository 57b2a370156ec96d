package capture

import (
	"github.com/google/uuid"
)

// Verification batches: how many frames, and how many bytes of their
// payloads and tags, one holds at most, and how many are in flight; sized
// as the read-ahead's batches are, for the same reason.
const (
	authBatchFrames = 1024
	authBatchBytes  = 256 << 10
	authBatches     = 8
)

// authQueue verifies frames with the key on a goroutine of its own: the
// tags' HMACs run on another core than the dissection. The frames are
// checked one at a time in the order they were added, as the analysis
// would check them itself, so the report is the same; the checker is
// the goroutine's until finish returns.
type authQueue struct {
	c     *authChecker
	batch *authBatch
	full  chan *authBatch
	free  chan *authBatch
	done  chan struct{}
	ended bool
	// slots counts the slots add gave streams (see authChecker.streams).
	slots int32
}

type authBatch struct {
	frames []authFrame
	buf    []byte // the frames' payloads and tags
}

func newAuthQueue(c *authChecker) *authQueue {
	q := &authQueue{c: c, full: make(chan *authBatch, authBatches), free: make(chan *authBatch, authBatches), done: make(chan struct{})}
	for range authBatches {
		q.free <- &authBatch{frames: make([]authFrame, 0, authBatchFrames), buf: make([]byte, 0, authBatchBytes)}
	}
	go func() {
		defer close(q.done)
		for b := range q.full {
			for i := range b.frames {
				q.c.check(&b.frames[i])
			}
			b.frames, b.buf = b.frames[:0], b.buf[:0]
			q.free <- b
		}
	}()
	return q
}

// add queues f, as authChecker.frame takes it; its bytes are copied.
func (q *authQueue) add(f *Frame, from, to string, toID uuid.UUID) {
	m := &f.Msg
	b := q.batch
	if b != nil && len(b.buf)+len(m.Payload)+len(m.Tag) > cap(b.buf) {
		q.send()
		b = nil
	}
	if b == nil {
		b = <-q.free
		q.batch = b
	}
	af := newAuthFrame(f, from, to, toID, &q.slots)
	af.msg.Payload = q.keep(m.Payload)
	af.msg.Tag = q.keep(m.Tag)
	b.frames = append(b.frames, af)
	if len(b.frames) == authBatchFrames {
		q.send()
	}
}

// keep copies p into the batch's buffer, or on its own when it does not
// fit (a frame near wire.DefaultMaxFrame); nil stays nil.
func (q *authQueue) keep(p []byte) []byte {
	if p == nil {
		return nil
	}
	b := q.batch
	if len(b.buf)+len(p) > cap(b.buf) {
		return append([]byte{}, p...)
	}
	n := len(b.buf)
	b.buf = append(b.buf, p...)
	return b.buf[n:len(b.buf):len(b.buf)]
}

func (q *authQueue) send() {
	q.full <- q.batch
	q.batch = nil
}

// finish checks what is still queued and returns once every frame added
// was checked. It may be called again.
func (q *authQueue) finish() {
	if q.ended {
		return
	}
	q.ended = true
	if q.batch != nil && len(q.batch.frames) > 0 {
		q.send()
	}
	close(q.full)
	<-q.done
}
