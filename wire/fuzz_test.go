package wire_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/bullylab/bullylab/wire"
)

var sentinels = []error{
	wire.ErrBadStart, wire.ErrVersion, wire.ErrUnknownType,
	wire.ErrTooLarge, wire.ErrTruncated, wire.ErrChecksum,
}

func isSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func addFrameSeeds(f *testing.F, add func(b []byte)) {
	for _, typ := range wire.Types {
		add(frame(sample(typ)))
	}
	_, all := stream()
	add(all)
	hb := frame(sample(wire.TypeHeartbeat))
	add(nil)
	add(hb[:wire.HeaderLen])
	add(hb[:len(hb)-1])
	add(append(bytes.Clone(hb), 0x1B, 1))
	unknown := bytes.Clone(hb)
	unknown[2] = 0x42
	add(resum(unknown))
	add([]byte("GET / HTTP/1.1\r\n\r\n"))
}

func FuzzDecode(f *testing.F) {
	addFrameSeeds(f, func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, b []byte) {
		var m wire.Message
		n, err := wire.Decode(b, &m)
		if err != nil {
			if !isSentinel(err) {
				t.Fatalf("Decode error %v is not a sentinel", err)
			}
			if errors.Is(err, wire.ErrUnknownType) != (n > 0) {
				t.Fatalf("Decode consumed %d bytes with error %v", n, err)
			}
			if n == 0 {
				return
			}
		}
		if n < wire.MinFrameLen || n > len(b) {
			t.Fatalf("Decode consumed %d of %d bytes", n, len(b))
		}
		if fl, err := wire.FrameLen(b); err != nil || fl != n {
			t.Fatalf("FrameLen = %d, %v; Decode consumed %d", fl, err, n)
		}
		if re := wire.Append(nil, &m); !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, b[:n])
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	for _, typ := range wire.Types {
		m := sample(typ)
		f.Add(uint8(m.Type), m.Flags, m.Epoch, m.From[:], m.Payload)
	}
	f.Add(uint8(0), uint8(0xff), ^uint64(0), []byte{}, []byte{})
	f.Add(uint8(200), uint8(0x10), uint64(1), []byte("short"), []byte("payload"))
	f.Fuzz(func(t *testing.T, typ, flags uint8, epoch uint64, from, payload []byte) {
		in := wire.Message{Type: wire.Type(typ), Flags: flags, Epoch: epoch, Payload: payload}
		copy(in.From[:], from)
		if flags&wire.FlagAuth != 0 {
			in.Tag = make([]byte, wire.TagLen)
			copy(in.Tag, from)
		}
		b := wire.Append(nil, &in)
		if len(b) != wire.MinFrameLen+len(payload)+len(in.Tag) {
			t.Fatalf("frame is %d bytes for a %d-byte payload", len(b), len(payload))
		}
		var out wire.Message
		n, err := wire.Decode(b, &out)
		if in.Type.Valid() != (err == nil) || (err != nil && !errors.Is(err, wire.ErrUnknownType)) {
			t.Fatalf("Decode(type %d) error = %v", typ, err)
		}
		if n != len(b) || !wire.Equal(&in, &out) {
			t.Fatalf("Decode = %v (%d bytes), want %v (%d bytes)", out, n, in, len(b))
		}
	})
}

func FuzzReader(f *testing.F) {
	addFrameSeeds(f, func(b []byte) { f.Add(b, 0, uint8(0)) })
	_, all := stream()
	f.Add(all, 100, uint8(1))
	f.Add(all, wire.MinFrameLen, uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, maxFrame int, mode uint8) {
		var src io.Reader = bytes.NewReader(b)
		switch mode % 4 {
		case 1:
			src = iotest.OneByteReader(src)
		case 2:
			src = iotest.HalfReader(src)
		case 3:
			src = iotest.DataErrReader(src)
		}
		r := wire.NewReader(src, maxFrame)
		off := 0
		// Every frame is at least MinFrameLen, so this bounds the loop even
		// if Read wrongly reported success forever.
		for range len(b)/wire.MinFrameLen + 2 {
			var m wire.Message
			err := r.Read(&m)
			if err != nil && !errors.Is(err, wire.ErrUnknownType) {
				if err != io.EOF && !isSentinel(err) {
					t.Fatalf("Read error %v is neither io.EOF nor a sentinel", err)
				}
				if err == io.EOF && off != len(b) {
					t.Fatalf("io.EOF at offset %d of %d", off, len(b))
				}
				return
			}
			// What Read returned must be the next frame of the stream.
			re := wire.Append(nil, &m)
			if !bytes.Equal(re, b[off:min(off+len(re), len(b))]) {
				t.Fatalf("frame at offset %d re-encodes as %x", off, re)
			}
			off += len(re)
		}
		t.Fatalf("Read did not end after %d bytes", len(b))
	})
}

func FuzzDecodeMembers(f *testing.F) {
	f.Add(wire.AppendMembers(nil, nil))
	f.Add(wire.AppendMembers(nil, testMembers))
	f.Add(wire.AppendMembers(nil, testMembers[:1]))
	f.Add([]byte{0xff, 0xff, 1, 2, 3})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, p []byte) {
		ms, err := wire.DecodeMembers(p)
		if err != nil {
			if !errors.Is(err, wire.ErrPayload) || ms != nil {
				t.Fatalf("DecodeMembers = %v, %v", ms, err)
			}
			return
		}
		if re := wire.AppendMembers(nil, ms); !bytes.Equal(re, p) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, p)
		}
	})
}

func FuzzDecodeRingElection(f *testing.F) {
	a, b := testMembers[0].ID, testMembers[1].ID
	f.Add(wire.AppendRingElection(nil, a, b))
	f.Add(wire.AppendID(nil, a))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		initiator, candidate, err := wire.DecodeRingElection(p)
		if err != nil {
			if !errors.Is(err, wire.ErrPayload) {
				t.Fatalf("DecodeRingElection error %v does not wrap ErrPayload", err)
			}
		} else if re := wire.AppendRingElection(nil, initiator, candidate); !bytes.Equal(re, p) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", re, p)
		}
		// ELECTED carries one ID, decoded as REJECT's is.
		id, err := wire.DecodeID(p)
		if err != nil {
			if !errors.Is(err, wire.ErrPayload) {
				t.Fatalf("DecodeID error %v does not wrap ErrPayload", err)
			}
		} else if re := wire.AppendID(nil, id); !bytes.Equal(re, p) {
			t.Fatalf("re-encoding the ID differs:\n got %x\nwant %x", re, p)
		}
	})
}
