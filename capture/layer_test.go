package capture

import (
	"bytes"
	"errors"
	"testing"

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
		{Type: wire.TypeCoordinator, Flags: uint8(wire.ReasonBullied) | 0x30, Epoch: 1<<63 + 5, From: id},
		{Type: wire.TypeHeartbeat, Epoch: 3, From: id},
		{Type: wire.TypeJoin, From: id, Payload: wire.AppendAddr(nil, "10.77.0.9:7946")},
		{Type: wire.TypeLeave, From: id},
		{Type: wire.TypeMembers, From: id, Payload: wire.AppendMembers(nil, []wire.Member{{ID: id, Addr: "10.77.0.2:7946"}, {ID: other, Addr: ""}})},
		{Type: 42, From: id, Payload: []byte("future")}, // unknown type: decodes with ErrUnknownType
	}
}

// TestLayerIsomorphic checks the layer against the wire codec both ways.
func TestLayerIsomorphic(t *testing.T) {
	for _, m := range sampleMessages() {
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

		// layer -> wire
		buf := gopacket.NewSerializeBuffer()
		src := Bullylab{Type: m.Type, Flags: m.Flags, Epoch: m.Epoch, From: m.From, Data: m.Payload}
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
}

// TestLayerRefuses checks that the layer refuses what wire refuses, with
// the same errors.
func TestLayerRefuses(t *testing.T) {
	m := sampleMessages()[4]
	good := wire.Append(nil, &m)
	for name, mutate := range map[string]func([]byte) []byte{
		"start":     func(b []byte) []byte { b[0] = 0x1c; return b },
		"version":   func(b []byte) []byte { b[1] = 2; return b },
		"crc":       func(b []byte) []byte { b[len(b)-1] ^= 1; return b },
		"payload":   func(b []byte) []byte { b[40] ^= 0x80; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)-1] },
		"short":     func(b []byte) []byte { return b[:20] },
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

// TestLayerInPacket decodes a whole packet with gopacket: several frames in
// one segment become consecutive layers, a trailing partial frame a
// Fragment.
func TestLayerInPacket(t *testing.T) {
	ms := sampleMessages()
	var payload []byte
	for i := range 3 {
		payload = wire.Append(payload, &ms[i])
	}
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
		}
	}
	if len(got) != 3 || got[0] != ms[0].Type || got[2] != ms[2].Type {
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

func BenchmarkLayerDecode(b *testing.B) {
	ms := sampleMessages()
	frame := wire.Append(nil, &ms[5])
	var l Bullylab
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.DecodeFromBytes(frame, gopacket.NilDecodeFeedback); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzLayer checks on arbitrary bytes that the layer and wire.Decode agree
// and that what decodes serializes back to the same bytes.
func FuzzLayer(f *testing.F) {
	for _, m := range sampleMessages() {
		f.Add(wire.Append(nil, &m))
	}
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
