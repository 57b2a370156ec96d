package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// readBufLen is the Reader's initial buffer: enough for a hundred control
// frames per system call, and for small MEMBERS lists without growing.
const readBufLen = 4096

// keepBufLen is the largest buffer a Reader keeps between frames: one
// grown for a larger frame is given back once that frame is read, so that
// a connection that once carried a 64 KiB MEMBERS list does not hold 64
// KiB for the rest of its life.
const keepBufLen = 4 * readBufLen

// maxEmptyReads bounds how often a broken io.Reader may return 0, nil before
// Read gives up with io.ErrNoProgress, as bufio does.
const maxEmptyReads = 100

// Reader reads frames from a stream such as a net.Conn. It decodes them in
// place in its own buffer, so a Message's Payload is valid only until the
// next Read. Once the buffer has grown to the largest frame seen, Read does
// not allocate, and copies only a partial frame left at the buffer's end.
//
// Errors from Read:
//   - io.EOF when the stream ends at a frame boundary.
//   - An error for which both errors.Is(err, ErrTruncated) and
//     errors.Is(err, io.ErrUnexpectedEOF) hold when it ends inside a frame.
//   - ErrTooLarge (wrapped) when a header announces a frame longer than
//     maxFrame; it is reported before any of the payload is awaited.
//   - ErrBadStart, ErrVersion and ErrChecksum (wrapped). The stream is then
//     out of step and every later Read returns the same error.
//   - ErrUnknownType (wrapped) for an intact frame of a type this version
//     does not know. The frame is consumed and m describes it; Read may be
//     called again.
//   - Any other error of the underlying reader, unwrapped, such as a
//     net.Conn deadline. Bytes already read stay buffered, so Read may be
//     called again after a timeout.
type Reader struct {
	rd   io.Reader
	max  int
	buf  []byte
	r, w int   // buf[r:w] is read from rd but not yet decoded
	off  int64 // stream offset of buf[r], for error messages
	rerr error // error rd returned along with data, for the next fill
	err  error // sticky: the stream is out of step
}

// NewReader returns a Reader that refuses frames longer than maxFrame bytes
// (header and trailer included); maxFrame <= 0 means DefaultMaxFrame.
func NewReader(rd io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	return &Reader{rd: rd, max: maxFrame, buf: make([]byte, readBufLen)}
}

// Buffered returns how many bytes the Reader holds beyond the frames it
// returned: while Read waits on the underlying reader, those of a frame
// begun but not complete. A transport bounds how long a frame may stay
// incomplete with it.
func (r *Reader) Buffered() int { return r.w - r.r }

// Read reads the next frame into m. See Reader for the errors it returns.
func (r *Reader) Read(m *Message) error {
	if r.err != nil {
		return r.err
	}
	if err := r.fill(HeaderLen); err != nil {
		// Junk too short for a header is still junk, not a truncated frame.
		if _, ferr := FrameLen(r.buf[r.r:r.w]); ferr == ErrBadStart || ferr == ErrVersion {
			r.err = r.describe(ferr, r.buf[r.r:r.w])
			return r.err
		}
		return err
	}
	hdr := r.buf[r.r : r.r+HeaderLen]
	n, err := FrameLen(hdr)
	if err == nil && n > r.max {
		err = ErrTooLarge
	}
	if err != nil {
		r.err = r.describe(err, hdr)
		return r.err
	}
	if err := r.fill(n); err != nil {
		return err
	}
	_, err = Decode(r.buf[r.r:r.r+n], m)
	switch err {
	case nil:
	case ErrUnknownType:
		err = fmt.Errorf("%w 0x%02x at stream offset %d", err, byte(m.Type), r.off)
	default:
		r.err = r.describe(err, hdr)
		return r.err
	}
	r.r += n
	r.off += int64(n)
	return err
}

// describe adds to a framing error what a person debugging a capture needs:
// where in the stream it happened and what the bad field held.
func (r *Reader) describe(err error, hdr []byte) error {
	switch err {
	case ErrBadStart:
		return fmt.Errorf("%w at stream offset %d: got 0x%02x, want 0x%02x", err, r.off, hdr[0], StartByte)
	case ErrVersion:
		return fmt.Errorf("%w at stream offset %d: got %d, want %d", err, r.off, hdr[offVersion], Version)
	case ErrTooLarge:
		return fmt.Errorf("%w at stream offset %d: payload length %d, limit for the whole frame %d",
			err, r.off, binary.BigEndian.Uint32(hdr[offLength:]), r.max)
	}
	return fmt.Errorf("%w at stream offset %d", err, r.off)
}

// fill reads until at least need bytes are buffered. It grows the buffer
// only for a frame larger than any seen before, so steady state allocates
// nothing.
func (r *Reader) fill(need int) error {
	if r.w-r.r >= need {
		return nil
	}
	if r.r == r.w {
		// Nothing to keep: read into the whole buffer, not just its tail.
		r.r, r.w = 0, 0
		if len(r.buf) > keepBufLen {
			r.buf = make([]byte, readBufLen)
		}
	}
	if len(r.buf)-r.r < need {
		r.w = copy(r.buf, r.buf[r.r:r.w])
		r.r = 0
	}
	for empty := 0; r.w-r.r < need; {
		if r.rerr != nil {
			err := r.rerr
			r.rerr = nil
			return r.readErr(err)
		}
		if r.w == len(r.buf) {
			// Grow as bytes arrive rather than to the length the header
			// announces, so that a peer claiming a maxFrame-sized frame
			// costs that much memory only once it has sent that much.
			buf := make([]byte, min(2*len(r.buf), r.r+need))
			copy(buf, r.buf[:r.w])
			r.buf = buf
		}
		n, err := r.rd.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			return fmt.Errorf("wire: underlying reader returned %d bytes for a %d-byte buffer", n, len(r.buf)-r.w)
		}
		r.w += n
		r.rerr = err
		if n == 0 && err == nil {
			if empty++; empty >= maxEmptyReads {
				return io.ErrNoProgress
			}
		}
	}
	return nil
}

// readErr turns the end of the stream into io.EOF at a frame boundary and
// into ErrTruncated inside a frame.
func (r *Reader) readErr(err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	if r.w == r.r {
		return io.EOF
	}
	return fmt.Errorf("%w at stream offset %d: %w after %d bytes", ErrTruncated, r.off, io.ErrUnexpectedEOF, r.w-r.r)
}
