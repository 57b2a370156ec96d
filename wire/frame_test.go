package wire_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

var (
	idA = uuid.MustParse("1234abcd-0000-4000-8000-000000000001")
	idB = uuid.MustParse("fedcba98-7654-4321-8fed-cba987654321")
)

var testMembers = []wire.Member{
	{ID: idA, Addr: "10.0.0.1:7946"},
	{ID: idB, Addr: "[fe80::1%eth0]:7946"},
	{ID: uuid.UUID{}, Addr: ""},
	{ID: uuid.Max, Addr: strings.Repeat("h", wire.MaxAddrLen)},
}

// sample returns one realistic message of type t, with the payload and
// flags that type carries.
func sample(t wire.Type) wire.Message {
	m := wire.Message{Type: t, Epoch: 42 + uint64(t), From: idA}
	if t.HasReason() {
		m.Flags = uint8(wire.ReasonLeaderFailed)
	}
	switch t {
	case wire.TypeReject:
		m.Payload = wire.AppendID(nil, idB)
	case wire.TypeJoin:
		m.Payload = wire.AppendAddr(nil, "node-7.example:7946")
	case wire.TypeMembers:
		m.Payload = wire.AppendMembers(nil, testMembers)
	}
	return m
}

func frame(m wire.Message) []byte { return wire.Append(nil, &m) }

// resum recomputes the trailer after a test edited a frame's header, so the
// edit is what Decode sees rather than a checksum mismatch.
func resum(b []byte) []byte {
	end := len(b) - wire.TrailerLen
	binary.BigEndian.PutUint32(b[end:], crc32.Checksum(b[:end], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// TestGolden pins the byte layout: if it fails, the wire format changed and
// every deployed node and dissector breaks with it.
func TestGolden(t *testing.T) {
	m := wire.Message{
		Type:    wire.TypeCoordinator,
		Flags:   uint8(wire.ReasonLeaderFailed),
		Epoch:   0x0102030405060708,
		From:    idA,
		Payload: []byte("hi"),
	}
	want := "1b" + "01" + "06" + "02" + // start, version, type, flags
		"0102030405060708" + // epoch
		"1234abcd000040008000000000000001" + // sender
		"00000002" + // length
		"6869" + // payload
		"2a64a5c1" // CRC-32C, cross-checked with a bitwise implementation

	if got := hex.EncodeToString(wire.Append(nil, &m)); got != want {
		t.Errorf("Append:\n got %s\nwant %s", got, want)
	}
}

func TestControlFrameLen(t *testing.T) {
	if wire.MinFrameLen != 36 {
		t.Errorf("MinFrameLen = %d, want 36", wire.MinFrameLen)
	}
	for _, typ := range wire.Types {
		m := sample(typ)
		m.Payload = nil
		b := frame(m)
		if len(b) != wire.MinFrameLen || len(b) > 40 {
			t.Errorf("%v control frame is %d bytes, want 36", typ, len(b))
		}
		n, err := wire.FrameLen(b[:wire.HeaderLen])
		if err != nil || n != len(b) {
			t.Errorf("FrameLen(%v header) = %d, %v; want %d", typ, n, err, len(b))
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, typ := range wire.Types {
		t.Run(typ.String(), func(t *testing.T) {
			in := sample(typ)
			prefix := []byte("prefix")
			b := wire.Append(bytes.Clone(prefix), &in)
			if !bytes.Equal(b[:len(prefix)], prefix) {
				t.Fatalf("Append clobbered dst")
			}
			b = b[len(prefix):]
			if want := wire.MinFrameLen + len(in.Payload); len(b) != want {
				t.Fatalf("frame is %d bytes, want %d", len(b), want)
			}
			// A following frame must not be consumed with this one.
			b = append(b, frame(sample(wire.TypeHeartbeat))...)

			var out wire.Message
			n, err := wire.Decode(b, &out)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if n != wire.MinFrameLen+len(in.Payload) {
				t.Errorf("Decode consumed %d bytes, want %d", n, wire.MinFrameLen+len(in.Payload))
			}
			if !wire.Equal(&in, &out) {
				t.Errorf("Decode = %v, want %v", out, in)
			}
			if out.Reason() != in.Reason() {
				t.Errorf("Reason = %v, want %v", out.Reason(), in.Reason())
			}

			switch typ {
			case wire.TypeReject:
				if id, err := wire.DecodeID(out.Payload); err != nil || id != idB {
					t.Errorf("DecodeID = %v, %v; want %v", id, err, idB)
				}
			case wire.TypeJoin:
				if a, err := wire.DecodeAddr(out.Payload); err != nil || a != "node-7.example:7946" {
					t.Errorf("DecodeAddr = %q, %v", a, err)
				}
			case wire.TypeMembers:
				ms, err := wire.DecodeMembers(out.Payload)
				if err != nil || !equalMembers(ms, testMembers) {
					t.Errorf("DecodeMembers = %v, %v; want %v", ms, err, testMembers)
				}
			default:
				if out.Payload != nil {
					t.Errorf("control message decoded with payload %x", out.Payload)
				}
			}
		})
	}
}

func TestDecodePayloadCapacity(t *testing.T) {
	in := sample(wire.TypeJoin)
	b := frame(in)
	var out wire.Message
	if _, err := wire.Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	_ = append(out.Payload, "clobber"...)
	if _, err := wire.Decode(b, &out); err != nil {
		t.Fatalf("appending to Payload damaged the frame: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := frame(sample(wire.TypeJoin))
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }

	tests := []struct {
		name  string
		in    []byte
		want  error
		wantN int // bytes consumed despite the error
	}{
		{"empty", nil, wire.ErrTruncated, 0},
		{"start byte only", []byte{wire.StartByte}, wire.ErrTruncated, 0},
		{"header minus one", good[:wire.HeaderLen-1], wire.ErrTruncated, 0},
		{"header only", good[:wire.HeaderLen], wire.ErrTruncated, 0},
		{"no trailer", good[:len(good)-wire.TrailerLen], wire.ErrTruncated, 0},
		{"trailer minus one", good[:len(good)-1], wire.ErrTruncated, 0},
		{"length beyond input", edit(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[28:], 0xFFFFFFFF)
			return b
		}), wire.ErrTruncated, 0},

		{"zero start", edit(func(b []byte) []byte { b[0] = 0; return b }), wire.ErrBadStart, 0},
		{"HTTP", []byte("GET / HTTP/1.1\r\n"), wire.ErrBadStart, 0},
		{"bad start, one byte", []byte{'x'}, wire.ErrBadStart, 0},

		{"version 0", edit(func(b []byte) []byte { b[1] = 0; return resum(b) }), wire.ErrVersion, 0},
		{"version 2", edit(func(b []byte) []byte { b[1] = 2; return resum(b) }), wire.ErrVersion, 0},
		{"version 2, two bytes", []byte{wire.StartByte, 2}, wire.ErrVersion, 0},

		{"type 0", edit(func(b []byte) []byte { b[2] = 0; return resum(b) }), wire.ErrUnknownType, len(good)},
		{"type 14", edit(func(b []byte) []byte { b[2] = 14; return resum(b) }), wire.ErrUnknownType, len(good)},
		{"type 255", edit(func(b []byte) []byte { b[2] = 255; return resum(b) }), wire.ErrUnknownType, len(good)},

		{"flipped epoch bit", edit(func(b []byte) []byte { b[11] ^= 1; return b }), wire.ErrChecksum, 0},
		{"flipped sender bit", edit(func(b []byte) []byte { b[12] ^= 0x80; return b }), wire.ErrChecksum, 0},
		{"flipped payload bit", edit(func(b []byte) []byte { b[wire.HeaderLen] ^= 4; return b }), wire.ErrChecksum, 0},
		{"flipped trailer bit", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), wire.ErrChecksum, 0},
		// A corrupted type byte must read as corruption, not as a new type.
		{"unknown type, bad sum", edit(func(b []byte) []byte { b[2] = 99; return b }), wire.ErrChecksum, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m wire.Message
			n, err := wire.Decode(tt.in, &m)
			if !errors.Is(err, tt.want) {
				t.Errorf("Decode error = %v, want %v", err, tt.want)
			}
			if n != tt.wantN {
				t.Errorf("Decode consumed %d bytes, want %d", n, tt.wantN)
			}
		})
	}
}

func TestDecodeUnknownTypeFillsMessage(t *testing.T) {
	b := frame(sample(wire.TypeHeartbeat))
	b[2] = 42
	resum(b)
	var m wire.Message
	if _, err := wire.Decode(b, &m); !errors.Is(err, wire.ErrUnknownType) {
		t.Fatalf("Decode error = %v, want ErrUnknownType", err)
	}
	if m.Type != 42 || m.From != idA {
		t.Errorf("unknown-type frame decoded as %v", m)
	}
}

func TestFrameLen(t *testing.T) {
	b := frame(sample(wire.TypeMembers))
	if n, err := wire.FrameLen(b[:wire.HeaderLen]); err != nil || n != len(b) {
		t.Errorf("FrameLen = %d, %v; want %d", n, err, len(b))
	}
	b[2] = 200 // unknown types still have a length
	if n, err := wire.FrameLen(b[:wire.HeaderLen]); err != nil || n != len(b) {
		t.Errorf("FrameLen of unknown type = %d, %v; want %d", n, err, len(b))
	}
	binary.BigEndian.PutUint32(b[28:], 0xFFFFFFFF)
	n, err := wire.FrameLen(b[:wire.HeaderLen])
	if strconv.IntSize == 32 {
		// The length does not fit an int, so no buffer could hold the frame.
		if !errors.Is(err, wire.ErrTooLarge) {
			t.Errorf("FrameLen of max length = %d, %v; want ErrTooLarge", n, err)
		}
	} else if err != nil || uint64(n) != wire.MinFrameLen+wire.MaxPayloadLen {
		t.Errorf("FrameLen of max length = %d, %v", n, err)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		m    wire.Message
		want string
	}{
		{wire.Message{Type: wire.TypeCoordinator, Epoch: 3, From: idA, Flags: uint8(wire.ReasonLeaderFailed)},
			"COORDINATOR epoch=3 from=1234abcd reason=leader-failed len=0"},
		{wire.Message{Type: wire.TypeElection, Epoch: 0, From: idB},
			"ELECTION epoch=0 from=fedcba98 reason=none len=0"},
		{wire.Message{Type: wire.TypeHeartbeat, Epoch: 18446744073709551615, From: idA},
			"HEARTBEAT epoch=18446744073709551615 from=1234abcd len=0"},
		{sample(wire.TypeReject), "REJECT epoch=47 from=1234abcd len=16"},
		{wire.Message{Type: wire.TypeHalt, Flags: 0x51, From: idA},
			"HALT epoch=0 from=1234abcd reason=boot flags=0x51 len=0"},
		{wire.Message{Type: wire.TypeHeartbeat, Flags: wire.FlagAuth, From: idA, Tag: make([]byte, wire.TagLen)},
			"HEARTBEAT epoch=0 from=1234abcd len=0 auth"},
		{wire.Message{Type: wire.TypeLeave, Flags: 0x02, From: idA},
			"LEAVE epoch=0 from=1234abcd flags=0x02 len=0"},
		{wire.Message{Type: 77, Payload: []byte{1}},
			"TYPE(77) epoch=0 from=00000000 len=1"},
	}
	for _, tt := range tests {
		if got := tt.m.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestEqual(t *testing.T) {
	a := sample(wire.TypeJoin)
	tests := []struct {
		name string
		edit func(m *wire.Message)
		want bool
	}{
		{"same", func(*wire.Message) {}, true},
		{"copied payload", func(m *wire.Message) { m.Payload = bytes.Clone(m.Payload) }, true},
		{"type", func(m *wire.Message) { m.Type++ }, false},
		{"flags", func(m *wire.Message) { m.Flags++ }, false},
		{"epoch", func(m *wire.Message) { m.Epoch++ }, false},
		{"from", func(m *wire.Message) { m.From[15]++ }, false},
		{"payload", func(m *wire.Message) { m.Payload = []byte("x") }, false},
	}
	for _, tt := range tests {
		b := a
		tt.edit(&b)
		if got := wire.Equal(&a, &b); got != tt.want {
			t.Errorf("%s: Equal = %v, want %v", tt.name, got, tt.want)
		}
	}
	empty, null := wire.Message{Payload: []byte{}}, wire.Message{}
	if !wire.Equal(&empty, &null) {
		t.Error("empty and nil payloads differ")
	}
	if wire.Equal(&null, nil) || !wire.Equal(nil, nil) {
		t.Error("Equal mishandles nil")
	}
}

func TestAllocs(t *testing.T) {
	members := sample(wire.TypeMembers)
	buf := make([]byte, 0, wire.MinFrameLen+len(members.Payload))
	frameBytes := frame(members)
	var out wire.Message

	for name, f := range map[string]func(){
		"Append": func() { buf = wire.Append(buf[:0], &members) },
		"Decode": func() { _, _ = wire.Decode(frameBytes, &out) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", name, n)
		}
	}

	// The error paths Decode shares with dissector heuristics must not
	// allocate either.
	garbage := []byte("GET / HTTP/1.1\r\n\r\n-----------------------")
	if n := testing.AllocsPerRun(100, func() { _, _ = wire.Decode(garbage, &out) }); n != 0 {
		t.Errorf("Decode(garbage): %v allocs per run, want 0", n)
	}
}

func equalMembers(a, b []wire.Member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
