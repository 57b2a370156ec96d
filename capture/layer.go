package capture

// The bullylab election frame as a gopacket layer. One layer is one frame;
// a TCP segment carrying several whole frames decodes into that many
// consecutive Bullylab layers, and a frame cut by a segment boundary needs
// reassembly (see Dissector) before it decodes.
//
// The package wire defines the frame (header, payload, authentication tag
// with FlagAuth, CRC-32C: see its package doc) and is the only code that
// parses or builds one here: the layer decodes with wire.Decode and
// serializes with wire.Append, so the two never disagree about which bytes
// are a frame (layer_test.go checks it both ways). The layer decodes a
// frame's tag but does not verify it: that takes the cluster key
// (wire.OpenHello and wire.Verifier; Analyze does it with
// AnalyzeOptions.Key). A signed HELLO's signature needs no key:
// Bullylab.CheckSignature verifies it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// LayerTypeNumber is the gopacket layer type number of Bullylab; gopacket
// leaves 1000-1999 to applications.
const LayerTypeNumber = 1946

// LayerTypeBullylab is the gopacket layer type of one election frame.
const LayerTypeBullylab = gopacket.LayerType(LayerTypeNumber)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func init() {
	// Registered here rather than in the declaration, because the decoder
	// refers back to the layer type.
	gopacket.RegisterLayerType(LayerTypeNumber, gopacket.LayerTypeMetadata{
		Name:    "Bullylab",
		Decoder: gopacket.DecodeFunc(decodeBullylab),
	})
	RegisterPort(wire.DefaultPort)
}

var portsMu sync.Mutex

// RegisterPort makes gopacket decode TCP payloads to or from port as
// Bullylab frames (layers.TCP.NextLayerType, and gopacket.NewPacket with
// DecodeOptions.DecodeStreamsAsDatagrams), for topologies that use another
// election port; the default port is registered at init. gopacket's port table is not
// synchronized: call it before decoding starts, not while packets are
// being decoded on other goroutines.
func RegisterPort(port uint16) {
	portsMu.Lock()
	defer portsMu.Unlock()
	layers.RegisterTCPPortLayerType(layers.TCPPort(port), LayerTypeBullylab)
}

// Bullylab is one decoded frame. Contents is the whole frame, header to
// CRC; Payload (gopacket's name for what follows this layer) is whatever
// the segment carries after the frame; Data is the frame's own payload
// (REJECT's node ID, JOIN's address, MEMBERS' list, HELLO's fields, the
// ring's IDs). gopacket.LayerString shows every field, the ring's IDs
// included.
type Bullylab struct {
	layers.BaseLayer
	Version uint8
	Type    wire.Type
	Flags   uint8
	Epoch   uint64
	From    uuid.UUID
	Length  uint32
	Data    []byte
	// Tag is the authentication tag of a frame with FlagAuth, wire.TagLen
	// bytes (aliasing Contents); nil without FlagAuth.
	Tag []byte
	// Hello is Data decoded, for a HELLO whose payload is wire.HelloLen
	// bytes, or wire.SignedHelloLen signed (Hello.Signed, with the sender's
	// member key in Hello.PublicKey); zero otherwise.
	Hello wire.Hello
	// Initiator and Candidate are a RING_ELECTION's payload decoded: the
	// node that started the run and the highest ID it has passed; Leader
	// is an ELECTED's, the node the run elected. Zero for other frames
	// and for a payload of the wrong length.
	Initiator uuid.UUID
	Candidate uuid.UUID
	Leader    uuid.UUID
	CRC       uint32
}

var (
	_ gopacket.DecodingLayer     = (*Bullylab)(nil)
	_ gopacket.SerializableLayer = (*Bullylab)(nil)
)

// LayerType returns LayerTypeBullylab.
func (b *Bullylab) LayerType() gopacket.LayerType { return LayerTypeBullylab }

// CanDecode returns LayerTypeBullylab.
func (b *Bullylab) CanDecode() gopacket.LayerClass { return LayerTypeBullylab }

// NextLayerType is Bullylab again while whole frames follow, so that a
// segment with several frames decodes into several layers; a partial frame
// at the end is a Fragment, to be reassembled by the caller.
func (b *Bullylab) NextLayerType() gopacket.LayerType {
	if len(b.Payload) == 0 {
		return gopacket.LayerTypeZero
	}
	if n, err := wire.FrameLen(b.Payload); err == nil && n <= len(b.Payload) {
		return LayerTypeBullylab
	}
	return gopacket.LayerTypeFragment
}

// Reason returns the election reason carried in the flags byte.
func (b *Bullylab) Reason() wire.Reason { return (&wire.Message{Flags: b.Flags}).Reason() }

// Authenticated reports whether the frame carries FlagAuth and a tag.
func (b *Bullylab) Authenticated() bool { return b.Flags&wire.FlagAuth != 0 }

// Message returns the frame as a wire.Message; its Payload aliases Data
// and its Tag aliases Tag.
func (b *Bullylab) Message() wire.Message {
	return wire.Message{Type: b.Type, Flags: b.Flags, Epoch: b.Epoch, From: b.From, Payload: b.Data, Tag: b.Tag}
}

// errLayerTruncated is what DecodeFromBytes returns, wrapped, for a frame
// that data holds only the start of.
var errLayerTruncated = errors.New("bullylab: frame truncated (needs TCP reassembly)")

// DecodeFromBytes decodes the frame at the start of data with wire.Decode,
// and returns its errors, wire's sentinels, but for a frame cut short:
// then it calls df.SetTruncated and returns an error of its own that says
// the frame needs reassembly. An unknown type with a valid CRC decodes and
// returns wire.ErrUnknownType, as wire.Decode does, so the caller can skip
// the frame and stay in sync.
func (b *Bullylab) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	var m wire.Message
	n, err := wire.Decode(data, &m)
	if n == 0 { // an error before the type: m is untouched
		if errors.Is(err, wire.ErrTruncated) {
			df.SetTruncated()
			return truncated(data)
		}
		return err
	}
	// Field by field, and Hello once: a tuple assignment would build its
	// values in temporaries and copy them.
	b.Version = wire.Version // Decode accepts no other
	b.Type = m.Type
	b.Flags = m.Flags
	b.Epoch = m.Epoch
	b.From = m.From
	b.Length = uint32(len(m.Payload))
	b.Data = m.Payload
	b.Tag = m.Tag
	b.decodeHello(&m)
	b.decodeRing(&m)
	b.CRC = binary.BigEndian.Uint32(data[n-wire.TrailerLen : n])
	b.Contents = data[:n:n]
	b.Payload = data[n:]
	return err // nil or wire.ErrUnknownType
}

// truncated returns the error for data, the start of a frame.
func truncated(data []byte) error {
	if n, err := wire.FrameLen(data); err == nil {
		return fmt.Errorf("%w: %d bytes of a %d-byte frame", errLayerTruncated, len(data), n)
	}
	return fmt.Errorf("%w: %d bytes, header needs %d", errLayerTruncated, len(data), wire.HeaderLen)
}

// decodeRing sets b's ring fields from m, a frame b decodes: m's payload
// decoded for a RING_ELECTION or ELECTED of the right length, zero
// otherwise.
func (b *Bullylab) decodeRing(m *wire.Message) {
	b.Initiator, b.Candidate, b.Leader = uuid.UUID{}, uuid.UUID{}, uuid.UUID{}
	switch m.Type {
	case wire.TypeRingElection:
		if i, c, err := wire.DecodeRingElection(m.Payload); err == nil {
			b.Initiator, b.Candidate = i, c
		}
	case wire.TypeElected:
		if l, err := wire.DecodeID(m.Payload); err == nil {
			b.Leader = l
		}
	}
}

// SerializeTo writes the frame, as wire.Append encodes it. The payload is
// Data, except for a frame with no Data of a type whose payload the layer
// decodes into fields: a HELLO's is Hello, signed or not as Hello.Signed
// says; a RING_ELECTION's Initiator and Candidate; an ELECTED's Leader. With
// FlagAuth, Tag follows the payload and must be wire.TagLen bytes
// (wire.Sealer computes it); without it, Tag is ignored. With FixLengths,
// Length is set from the payload; with ComputeChecksums, CRC is computed;
// otherwise both are written as they are, so that tests can build the
// frames a decoder must refuse. Version 0 is written as wire.Version.
func (b *Bullylab) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	m := b.Message()
	var fields [wire.SignedHelloLen]byte
	if b.Data == nil {
		switch b.Type {
		case wire.TypeHello:
			m.Payload = wire.AppendHello(fields[:0], b.Hello)
		case wire.TypeRingElection:
			m.Payload = wire.AppendRingElection(fields[:0], b.Initiator, b.Candidate)
		case wire.TypeElected:
			m.Payload = wire.AppendID(fields[:0], b.Leader)
		}
	}
	if !b.Authenticated() {
		m.Tag = nil
	} else if len(m.Tag) != wire.TagLen {
		return fmt.Errorf("bullylab: FlagAuth set with a tag of %d bytes, want %d", len(m.Tag), wire.TagLen)
	}
	plen := len(m.Payload)
	if uint64(plen) > wire.MaxPayloadLen {
		return fmt.Errorf("bullylab: payload of %d bytes does not fit the length field", plen)
	}
	if opts.FixLengths {
		b.Length = uint32(plen)
	}
	n := wire.MinFrameLen + plen + len(m.Tag)
	frame, err := buf.PrependBytes(n)
	if err != nil {
		return err
	}
	wire.Append(frame[:0:n], &m) // exactly n bytes: in place
	if b.setRaw(frame, uint32(plen)) && opts.ComputeChecksums {
		binary.BigEndian.PutUint32(frame[n-wire.TrailerLen:], crc32.Checksum(frame[:n-wire.TrailerLen], castagnoli))
	}
	if opts.ComputeChecksums {
		b.CRC = binary.BigEndian.Uint32(frame[n-wire.TrailerLen:])
	} else {
		binary.BigEndian.PutUint32(frame[n-wire.TrailerLen:], b.CRC)
	}
	return nil
}

// setRaw overwrites the version and length fields of frame, encoded by
// wire with a payload of plen bytes, with b's where they differ (see the
// header in wire's package doc), and reports whether it did.
func (b *Bullylab) setRaw(frame []byte, plen uint32) bool {
	changed := false
	if b.Version != 0 && b.Version != frame[1] {
		frame[1] = b.Version
		changed = true
	}
	if b.Length != plen {
		binary.BigEndian.PutUint32(frame[wire.HeaderLen-4:wire.HeaderLen], b.Length)
		changed = true
	}
	return changed
}

// decodeBullylab is the gopacket.Decoder behind LayerTypeBullylab.
func decodeBullylab(data []byte, p gopacket.PacketBuilder) error {
	b := &Bullylab{}
	err := b.DecodeFromBytes(data, p)
	if err != nil && !errors.Is(err, wire.ErrUnknownType) {
		return err
	}
	p.AddLayer(b)
	return p.NextDecoder(b.NextLayerType())
}
