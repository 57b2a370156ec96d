package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"testing/iotest"
	"time"

	"github.com/bullylab/bullylab/wire"
)

// stream returns every sample message and their concatenated frames.
func stream() ([]wire.Message, []byte) {
	var ms []wire.Message
	var b []byte
	for _, typ := range wire.Types {
		m := sample(typ)
		ms = append(ms, m)
		b = wire.Append(b, &m)
	}
	// A payload beyond the initial buffer makes the Reader grow once.
	big := wire.Message{Type: wire.TypeJoin, From: idB, Payload: bytes.Repeat([]byte("x"), 10000)}
	ms = append(ms, big)
	b = wire.Append(b, &big)
	return ms, b
}

func TestReaderStream(t *testing.T) {
	want, b := stream()
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"data+EOF": iotest.DataErrReader,
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			r := wire.NewReader(wrap(bytes.NewReader(b)), 0)
			for i, w := range want {
				var m wire.Message
				if err := r.Read(&m); err != nil {
					t.Fatalf("Read %d: %v", i, err)
				}
				if !wire.Equal(&m, &w) {
					t.Fatalf("Read %d = %v, want %v", i, m, w)
				}
			}
			var m wire.Message
			for range 2 {
				if err := r.Read(&m); err != io.EOF {
					t.Fatalf("Read at end = %v, want io.EOF", err)
				}
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	good := frame(sample(wire.TypeHeartbeat))
	members := frame(sample(wire.TypeMembers))
	edit := func(b []byte, f func(b []byte)) []byte { b = bytes.Clone(b); f(b); return b }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	huge := edit(good[:wire.HeaderLen], func(b []byte) { binary.BigEndian.PutUint32(b[28:], 1<<30) })

	tests := []struct {
		name     string
		in       []byte
		maxFrame int
		okBefore int     // frames read before the error
		want     []error // all must match
		sticky   bool    // the next Read fails the same way
		okAfter  int     // frames read after a non-sticky error
	}{
		{"empty", nil, 0, 0, []error{io.EOF}, false, 0},
		{"clean end", cat(good, good), 0, 2, []error{io.EOF}, false, 0},
		{"partial header", good[:10], 0, 0, []error{wire.ErrTruncated, io.ErrUnexpectedEOF}, false, 0},
		{"partial payload", cat(good, members[:40]), 0, 1, []error{wire.ErrTruncated, io.ErrUnexpectedEOF}, false, 0},
		{"missing trailer byte", members[:len(members)-1], 0, 0, []error{wire.ErrTruncated, io.ErrUnexpectedEOF}, false, 0},
		{"bad start", cat(good, []byte("HTTP/1.1 200 OK\r\n"), good), 0, 1, []error{wire.ErrBadStart}, true, 0},
		{"version", cat(edit(good, func(b []byte) { b[1] = 9; resum(b) }), good), 0, 0, []error{wire.ErrVersion}, true, 0},
		{"checksum", cat(good, edit(good, func(b []byte) { b[5] ^= 1 }), good), 0, 1, []error{wire.ErrChecksum}, true, 0},
		{"too large", cat(good, members), len(members) - 1, 1, []error{wire.ErrTooLarge}, true, 0},
		{"exactly max", cat(members, good), len(members), 2, []error{io.EOF}, false, 0},
		// The limit is enforced from the header alone: no payload is awaited.
		{"too large header only", huge, 0, 0, []error{wire.ErrTooLarge}, true, 0},
		{"unknown type", cat(good, edit(good, func(b []byte) { b[2] = 0x42; resum(b) }), good, members), 0, 1,
			[]error{wire.ErrUnknownType}, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wire.NewReader(bytes.NewReader(tt.in), tt.maxFrame)
			var m wire.Message
			for i := range tt.okBefore {
				if err := r.Read(&m); err != nil {
					t.Fatalf("Read %d: %v", i, err)
				}
			}
			err := r.Read(&m)
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Read error = %v, want errors.Is %v", err, w)
				}
			}
			if tt.sticky {
				if again := r.Read(&m); again != err {
					t.Errorf("second Read = %v, want the same error %v", again, err)
				}
			}
			for i := range tt.okAfter {
				if err := r.Read(&m); err != nil {
					t.Fatalf("Read %d after the error: %v", i, err)
				}
			}
		})
	}
}

func TestReaderErrorDetail(t *testing.T) {
	good := frame(sample(wire.TypeHeartbeat))
	in := append(bytes.Clone(good), 'G', 'E', 'T')
	r := wire.NewReader(bytes.NewReader(in), 0)
	var m wire.Message
	_ = r.Read(&m)
	err := r.Read(&m)
	want := "wire: bad start byte at stream offset 36: got 0x47, want 0x1b"
	if err == nil || err.Error() != want {
		t.Errorf("Read error = %v, want %q", err, want)
	}
}

// A net.Conn read deadline is not fatal: the bytes read before it stay
// buffered and the next Read completes the frame.
func TestReaderDeadlineResumes(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()

	b := frame(sample(wire.TypeMembers))
	written := make(chan error, 1)
	go func() {
		_, err := client.Write(b[:50])
		written <- err
	}()
	r := wire.NewReader(server, 0)
	var m wire.Message
	if err := server.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := r.Read(&m); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read before the deadline = %v, want a timeout", err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}

	go func() {
		_, err := client.Write(b[50:])
		written <- err
	}()
	if err := server.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Read(&m); err != nil {
		t.Fatalf("Read after the deadline: %v", err)
	}
	want := sample(wire.TypeMembers)
	if !wire.Equal(&m, &want) {
		t.Errorf("Read = %v, want %v", m, want)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
}

// brokenReader claims to have read more than it was given.
type brokenReader struct{}

func (brokenReader) Read(p []byte) (int, error) { return len(p) + 1, nil }

// stuckReader returns nothing, forever, without an error.
type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderMisbehavingSource(t *testing.T) {
	var m wire.Message
	if err := wire.NewReader(brokenReader{}, 0).Read(&m); err == nil {
		t.Error("Read from a reader overreporting its count succeeded")
	}
	if err := wire.NewReader(stuckReader{}, 0).Read(&m); err != io.ErrNoProgress {
		t.Errorf("Read from a stuck reader = %v, want io.ErrNoProgress", err)
	}
}

// loopReader replays the same bytes forever, so a Reader can be measured in
// steady state.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.b[l.off:])
		n += c
		l.off = (l.off + c) % len(l.b)
	}
	return n, nil
}

func TestReaderAllocs(t *testing.T) {
	_, b := stream()
	r := wire.NewReader(&loopReader{b: b}, 0)
	var m wire.Message
	read := func() {
		if err := r.Read(&m); err != nil {
			t.Fatal(err)
		}
	}
	// Warm up: one pass over the stream grows the buffer to its final size.
	for range wire.Types {
		read()
	}
	read()
	if n := testing.AllocsPerRun(1000, read); n != 0 {
		t.Errorf("Reader.Read: %v allocs per run in steady state, want 0", n)
	}
}

// A header may announce up to maxFrame bytes; the Reader must not allocate
// them before the peer has sent them.
func TestReaderGrowsWithData(t *testing.T) {
	hdr := frame(sample(wire.TypeJoin))[:wire.HeaderLen]
	binary.BigEndian.PutUint32(hdr[28:], 1<<30)
	in := append(hdr, make([]byte, 100)...)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := wire.NewReader(bytes.NewReader(in), 1<<30+wire.MinFrameLen)
	var m wire.Message
	err := r.Read(&m)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, wire.ErrTruncated) {
		t.Fatalf("Read = %v, want ErrTruncated", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("Read allocated %d bytes for a 132-byte stream", grew)
	}
}
