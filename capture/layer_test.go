package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

func sampleMessages() []wire.Message {
	id := uuid.MustParse("1a2b3c4d-0000-4000-8000-00000000abcd")
	other := uuid.MustParse("ffffffff-0000-4000-8000-000000000001")
	return []wire.Message{
		{Type: wire.TypeElection, Flags: uint8(wire.ReasonBoot), Epoch: 0, From: id},
		{Type: wire.TypeAnswer, Epoch: 7, From: id},
		{Type: wire.TypeHalt, Flags: uint8(wire.ReasonLeaderFailed), Epoch: 8, From: id},
		{Type: wire.TypeHaltAck, Epoch: 8, From: other},
		{Type: wire.TypeReject, Epoch: 9, From: other, Payload: wire.AppendID(nil, id)},
		{Type: wire.TypeCoordinator, Flags: uint8(wire.ReasonBullied) | 0x50, Epoch: 1<<63 + 5, From: id},
		{Type: wire.TypeHeartbeat, Epoch: 3, From: id},
		{Type: wire.TypeJoin, From: id, Payload: wire.AppendAddr(nil, "10.77.0.9:7946")},
		{Type: wire.TypeLeave, From: id},
		{Type: wire.TypeMembers, From: id, Payload: wire.AppendMembers(nil, []wire.Member{{ID: id, Addr: "10.77.0.2:7946"}, {ID: other, Addr: ""}})},
		{Type: 42, From: id, Payload: []byte("future")}, // unknown type: decodes with ErrUnknownType
		{Type: wire.TypeRingElection, Flags: uint8(wire.ReasonLeaderFailed), Epoch: 4, From: other, Payload: wire.AppendRingElection(nil, id, other)},
		{Type: wire.TypeElected, Flags: uint8(wire.ReasonLeaderFailed), Epoch: 4, From: id, Payload: wire.AppendID(nil, other)},
		{Type: wire.TypeRingElection, From: id, Payload: wire.AppendID(nil, id)}, // 16 bytes, not 32: no ring fields
	}
}

// wantRing returns the ring fields the layer should decode from m: a
// RING_ELECTION's initiator and candidate, an ELECTED's leader, zero
// otherwise.
func wantRing(m *wire.Message) (initiator, candidate, leader uuid.UUID) {
	switch m.Type {
	case wire.TypeRingElection:
		if i, c, err := wire.DecodeRingElection(m.Payload); err == nil {
			return i, c, uuid.UUID{}
		}
	case wire.TypeElected:
		if l, err := wire.DecodeID(m.Payload); err == nil {
			return uuid.UUID{}, uuid.UUID{}, l
		}
	}
	return uuid.UUID{}, uuid.UUID{}, uuid.UUID{}
}

// testKey is the cluster key of the tests' authenticated connections.
var testKey = wire.Key{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}

// authMessages is an authenticated connection from the first sample's
// node: its HELLO, then sealed frames (an unknown type among them), then a
// HELLO-typed frame whose payload is not a HELLO's.
func authMessages() []wire.Message {
	ms := sampleMessages()
	from, to := ms[0].From, ms[3].From
	h := wire.Hello{To: to, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), Nonce: [16]byte{0xde, 0xad, 15: 0xef}}
	s, hello := wire.NewSealer(nil, &testKey, from, h)
	frames := [][]byte{hello}
	for _, i := range []int{6, 5, 4, 9, 10} {
		frames = append(frames, s.Seal(nil, wire.Append(nil, &ms[i])))
	}
	out := make([]wire.Message, len(frames))
	for i, f := range frames {
		if _, err := wire.Decode(f, &out[i]); err != nil && err != wire.ErrUnknownType {
			panic(err)
		}
	}
	odd := wire.Message{Type: wire.TypeHello, Flags: wire.FlagAuth, From: from, Payload: []byte("short"), Tag: bytes.Repeat([]byte{7}, wire.TagLen)}
	return append(out, odd)
}

// TestLayerIsomorphic checks the layer against the wire codec both ways,
// authenticated frames and HELLOs included.
func TestLayerIsomorphic(t *testing.T) {
	for _, m := range append(sampleMessages(), authMessages()...) {
		frame := wire.Append(nil, &m)
		var want wire.Message
		_, wantErr := wire.Decode(frame, &want)

		// wire -> layer
		var l Bullylab
		err := l.DecodeFromBytes(frame, gopacket.NilDecodeFeedback)
		if !errors.Is(err, wantErr) && err != wantErr {
			t.Fatalf("%v: layer error %v, wire error %v", m, err, wantErr)
		}
		got := l.Message()
		if !wire.Equal(&got, &want) || !bytes.Equal(l.Contents, frame) || len(l.Payload) != 0 || l.Length != uint32(len(m.Payload)) {
			t.Errorf("layer decoded %v, wire %v", got, want)
		}
		if l.Authenticated() != (m.Flags&wire.FlagAuth != 0) || !bytes.Equal(l.Tag, m.Tag) {
			t.Errorf("%v: layer tag %x (authenticated %v), wire %x", m, l.Tag, l.Authenticated(), m.Tag)
		}
		wantHello, herr := wire.DecodeHello(m.Payload)
		if m.Type != wire.TypeHello || herr != nil {
			wantHello = wire.Hello{}
		}
		if l.Hello != wantHello {
			t.Errorf("%v: layer HELLO %+v, want %+v", m, l.Hello, wantHello)
		}
		if i, c, ld := wantRing(&m); l.Initiator != i || l.Candidate != c || l.Leader != ld {
			t.Errorf("%v: layer ring fields %v %v %v, want %v %v %v", m, l.Initiator, l.Candidate, l.Leader, i, c, ld)
		}

		// layer -> wire
		buf := gopacket.NewSerializeBuffer()
		src := Bullylab{Type: m.Type, Flags: m.Flags, Epoch: m.Epoch, From: m.From, Data: m.Payload, Tag: m.Tag}
		if err := src.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), frame) {
			t.Errorf("%v: serialized\n%x\nwire\n%x", m, buf.Bytes(), frame)
		}
		var back wire.Message
		if _, err := wire.Decode(buf.Bytes(), &back); err != wantErr || !wire.Equal(&back, &m) {
			t.Errorf("wire decoded the layer's %v as %v, %v", m, back, err)
		}
	}

	// A HELLO serialized from its fields, without Data, is the HELLO wire
	// seals.
	hello := authMessages()[0]
	src := Bullylab{Type: wire.TypeHello, Flags: hello.Flags, From: hello.From, Tag: hello.Tag}
	var l Bullylab
	if err := l.DecodeFromBytes(wire.Append(nil, &hello), gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	src.Hello = l.Hello
	buf := gopacket.NewSerializeBuffer()
	if err := src.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	if want := wire.Append(nil, &hello); !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("HELLO from its fields:\n%x\nwire:\n%x", buf.Bytes(), want)
	}
	src.Tag = src.Tag[:5]
	if err := src.SerializeTo(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{}); err == nil {
		t.Error("serialized FlagAuth with a 5-byte tag")
	}

	// RING_ELECTION and ELECTED serialized from their fields, without
	// Data, are the frames wire encodes, and decode back to those fields.
	for _, m := range sampleMessages()[11:13] {
		i, c, ld := wantRing(&m)
		src := Bullylab{Type: m.Type, Flags: m.Flags, Epoch: m.Epoch, From: m.From, Initiator: i, Candidate: c, Leader: ld}
		buf := gopacket.NewSerializeBuffer()
		if err := src.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}); err != nil {
			t.Fatal(err)
		}
		if want := wire.Append(nil, &m); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s from its fields:\n%x\nwire:\n%x", m.Type, buf.Bytes(), want)
		}
		var l Bullylab
		if err := l.DecodeFromBytes(buf.Bytes(), gopacket.NilDecodeFeedback); err != nil || l.Initiator != i || l.Candidate != c || l.Leader != ld {
			t.Errorf("%s decoded back as %v %v %v (%v)", m.Type, l.Initiator, l.Candidate, l.Leader, err)
		}
	}
}

// TestLayerStringRing checks that gopacket's layer string, as a packet
// dump prints it, names a RING_ELECTION's initiator and candidate and an
// ELECTED's leader.
func TestLayerStringRing(t *testing.T) {
	ms := sampleMessages()
	for _, c := range []struct {
		m    wire.Message
		want []string
	}{
		{ms[11], []string{"Type=RING_ELECTION", "Initiator=" + ms[0].From.String(), "Candidate=" + ms[3].From.String()}},
		{ms[12], []string{"Type=ELECTED", "Leader=" + ms[3].From.String()}},
	} {
		var l Bullylab
		if err := l.DecodeFromBytes(wire.Append(nil, &c.m), gopacket.NilDecodeFeedback); err != nil {
			t.Fatal(err)
		}
		s := gopacket.LayerString(&l)
		for _, w := range c.want {
			if !strings.Contains(s, w) {
				t.Errorf("layer string %q lacks %q", s, w)
			}
		}
	}
}

// TestLayerRefuses checks that the layer refuses what wire refuses, with
// the same errors.
func TestLayerRefuses(t *testing.T) {
	m := sampleMessages()[4]
	good := wire.Append(nil, &m)
	sealed := authMessages()[3] // the REJECT, sealed
	auth := wire.Append(nil, &sealed)
	for name, mutate := range map[string]func([]byte) []byte{
		"start":     func(b []byte) []byte { b[0] = 0x1c; return b },
		"version":   func(b []byte) []byte { b[1] = 2; return b },
		"crc":       func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"payload":   func(b []byte) []byte { b[40] ^= 0x80; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-1] },
		"short":     func(b []byte) []byte { return b[:20] },
		// FlagAuth makes the frame 16 bytes longer than the bytes there.
		"auth flag set": func(b []byte) []byte { b[3] |= wire.FlagAuth; return b },
		"auth tag":      func([]byte) []byte { b := bytes.Clone(auth); b[len(b)-6] ^= 1; return b },
		"auth cleared":  func([]byte) []byte { b := bytes.Clone(auth); b[3] &^= wire.FlagAuth; return b },
		"auth cut":      func([]byte) []byte { return auth[:len(auth)-wire.TagLen] },
	} {
		b := mutate(bytes.Clone(good))
		var w wire.Message
		_, wantErr := wire.Decode(b, &w)
		var l Bullylab
		err := l.DecodeFromBytes(b, gopacket.NilDecodeFeedback)
		if err == nil || !errors.Is(err, wantErr) && !(errors.Is(wantErr, wire.ErrTruncated) && errors.Is(err, errLayerTruncated)) {
			t.Errorf("%s: layer error %v, wire error %v", name, err, wantErr)
		}
	}
}

// TestLayerSerializeRaw checks that SerializeTo writes Version, Length
// and CRC as they are when asked to, so that tests can build the frames a
// decoder must refuse, and computes the CRC over what it wrote.
func TestLayerSerializeRaw(t *testing.T) {
	m := sampleMessages()[4] // a REJECT: 16 bytes of payload
	good := wire.Append(nil, &m)
	end := len(good) - wire.TrailerLen
	for _, c := range []struct {
		name    string
		version uint8
		length  uint32
		crc     bool
	}{
		{"as wire", 0, 16, true},
		{"version", 2, 16, true},
		{"length", 1, 17, true},
		{"crc as is", 1, 16, false},
	} {
		src := Bullylab{Version: c.version, Type: m.Type, Flags: m.Flags, Epoch: m.Epoch, From: m.From, Data: m.Payload, Length: c.length, CRC: 0xdeadbeef}
		buf := gopacket.NewSerializeBuffer()
		if err := src.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: c.crc}); err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(good)
		if c.version != 0 {
			want[1] = c.version
		}
		binary.BigEndian.PutUint32(want[28:32], c.length)
		binary.BigEndian.PutUint32(want[end:], 0xdeadbeef)
		if c.crc {
			binary.BigEndian.PutUint32(want[end:], crc32.Checksum(want[:end], castagnoli))
		}
		if !bytes.Equal(buf.Bytes(), want) || src.CRC != binary.BigEndian.Uint32(want[end:]) {
			t.Errorf("%s: serialized\n%x (CRC field %08x)\nwant\n%x", c.name, buf.Bytes(), src.CRC, want)
		}
	}
}

// TestLayerInPacket decodes a whole packet with gopacket: several frames in
// one segment become consecutive layers, a trailing partial frame a
// Fragment.
func TestLayerInPacket(t *testing.T) {
	ms := sampleMessages()
	var payload []byte
	for i := range 3 {
		payload = wire.Append(payload, &ms[i])
	}
	// An authenticated connection's HELLO and first frame, as the dialer
	// writes them, in one segment.
	am := authMessages()
	payload = wire.Append(payload, &am[0])
	payload = wire.Append(payload, &am[1])
	partial := wire.Append(nil, &ms[4])
	payload = append(payload, partial[:10]...)
	eth := &layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: []byte{10, 77, 0, 2}, DstIP: []byte{10, 77, 0, 3}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 7946, Seq: 1, ACK: true, Window: 500}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	p := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeEthernet, gopacket.DecodeOptions{DecodeStreamsAsDatagrams: true})
	var got []wire.Type
	for _, l := range p.Layers() {
		if b, ok := l.(*Bullylab); ok {
			got = append(got, b.Type)
			if b.Authenticated() != (len(got) > 3) || b.Type == wire.TypeHello && b.Hello.Time != 1767323045000000006 {
				t.Errorf("frame %d: %s authenticated %v, tag %x, HELLO %+v", len(got), b.Type, b.Authenticated(), b.Tag, b.Hello)
			}
		}
	}
	if len(got) != 5 || got[0] != ms[0].Type || got[2] != ms[2].Type || got[3] != wire.TypeHello || got[4] != am[1].Type {
		t.Errorf("frames decoded: %v (layers %v)", got, p.Layers())
	}
	if p.Layer(gopacket.LayerTypeFragment) == nil {
		t.Errorf("no fragment layer for the partial frame: %v", p.Layers())
	}
	if p.ErrorLayer() != nil {
		t.Errorf("error: %v", p.ErrorLayer().Error())
	}

	// Another port once registered.
	RegisterPort(7947)
	tcp.DstPort = 7947
	buf.Clear()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	if p := gopacket.NewPacket(buf.Bytes(), layers.LayerTypeEthernet, gopacket.DecodeOptions{DecodeStreamsAsDatagrams: true}); p.Layer(LayerTypeBullylab) == nil {
		t.Errorf("port 7947 not decoded as bullylab: %v", p.Layers())
	}
}

// BenchmarkLayerDecode decodes a COORDINATOR, the same sealed, and a
// HELLO.
func BenchmarkLayerDecode(b *testing.B) {
	ms, am := sampleMessages(), authMessages()
	for _, c := range []struct {
		name string
		m    *wire.Message
	}{
		{"control", &ms[5]},
		{"authenticated", &am[2]},
		{"hello", &am[0]},
	} {
		b.Run(c.name, func(b *testing.B) {
			frame := wire.Append(nil, c.m)
			var l Bullylab
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				if err := l.DecodeFromBytes(frame, gopacket.NilDecodeFeedback); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzLayer checks on arbitrary bytes that the layer and wire.Decode agree
// and that what decodes serializes back to the same bytes.
func FuzzLayer(f *testing.F) {
	for _, m := range append(sampleMessages(), authMessages()...) {
		f.Add(wire.Append(nil, &m))
	}
	signed := wire.Hello{To: sampleMessages()[3].From, Time: 1}
	signed.Sign(sampleMessages()[0].From, testMemberKeys(1)[0])
	_, hello := wire.NewSealer(nil, &testKey, sampleMessages()[0].From, signed)
	f.Add(hello)
	f.Add([]byte{wire.StartByte, wire.Version})
	f.Fuzz(func(t *testing.T, data []byte) {
		var l Bullylab
		err := l.DecodeFromBytes(data, gopacket.NilDecodeFeedback)
		var w wire.Message
		n, werr := wire.Decode(data, &w)
		switch {
		case werr == nil || werr == wire.ErrUnknownType:
			if err != werr {
				t.Fatalf("wire: %v, layer: %v", werr, err)
			}
			m := l.Message()
			if !wire.Equal(&m, &w) || len(l.Contents) != n {
				t.Fatalf("wire %v, layer %v", w, m)
			}
			if h, err := wire.DecodeHello(w.Payload); w.Type == wire.TypeHello && err == nil && l.Hello != h {
				t.Fatalf("layer HELLO %+v, wire %+v", l.Hello, h)
			}
			if i, c, ld := wantRing(&w); l.Initiator != i || l.Candidate != c || l.Leader != ld {
				t.Fatalf("layer ring fields %v %v %v, wire %v %v %v", l.Initiator, l.Candidate, l.Leader, i, c, ld)
			}
			buf := gopacket.NewSerializeBuffer()
			if err := l.SerializeTo(buf, gopacket.SerializeOptions{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), data[:n]) {
				t.Fatalf("reserialized\n%x\nfrom\n%x", buf.Bytes(), data[:n])
			}
		case err == nil:
			t.Fatalf("layer decoded what wire refuses (%v)", werr)
		}
		_ = gopacket.NewPacket(data, LayerTypeBullylab, gopacket.Default)
	})
}
