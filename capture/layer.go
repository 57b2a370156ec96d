package capture

// The bullylab election frame as a gopacket layer. One layer is one frame;
// a TCP segment carrying several whole frames decodes into that many
// consecutive Bullylab layers, and a frame cut by a segment boundary needs
// reassembly (see Dissector) before it decodes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Start (0x1B) |  Version (1)  |      Type     | Rsvd  | Reason|   0
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |   4
//	+                         Epoch (uint64)                        +
//	|                                                               |   8
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |  12
//	+                                                               +
//	|                                                               |  16
//	+                 Sender ID (16 raw bytes of a UUID)            +
//	|                                                               |  20
//	+                                                               +
//	|                                                               |  24
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Payload Length (uint32)                   |  28
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Payload (Length bytes) ...                   |  32
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     CRC-32C (uint32)                          |  32+Length
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// All integers are big-endian; the CRC covers bytes 0 .. 32+Length-1. With
// FlagAuth (0x20 in the flags byte) a 16-byte authentication tag sits
// between the payload and the CRC, which covers it too; Length still
// counts the payload alone:
//
//	+-----------------+-------------------+--------------+-------------+
//	| Header (32)     | Payload (Length)  | Tag (16)     | CRC-32C (4) |
//	+-----------------+-------------------+--------------+-------------+
//
// A HELLO (type 11, always with FlagAuth) opens an authenticated
// connection; its 40-byte payload is To (16), Time (int64, Unix ns) and
// Nonce (16). Checking a tag takes the cluster key (wire.OpenHello and
// wire.Verifier; Analyze does it with AnalyzeOptions.Key): the layer
// decodes the tag, it does not verify it.
//
// The package wire is the reference for the format: this layer must decode
// exactly what wire.Decode decodes (layer_test.go checks it both ways).

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
// (REJECT's node ID, JOIN's address, MEMBERS' list, HELLO's fields).
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
	// bytes; zero otherwise.
	Hello wire.Hello
	CRC   uint32
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
func (b *Bullylab) Reason() wire.Reason { return wire.Reason(b.Flags & 0x0f) }

// Authenticated reports whether the frame carries FlagAuth and a tag.
func (b *Bullylab) Authenticated() bool { return b.Flags&wire.FlagAuth != 0 }

// Message returns the frame as a wire.Message; its Payload aliases Data
// and its Tag aliases Tag.
func (b *Bullylab) Message() wire.Message {
	return wire.Message{Type: b.Type, Flags: b.Flags, Epoch: b.Epoch, From: b.From, Payload: b.Data, Tag: b.Tag}
}

// Errors of DecodeFromBytes beyond wire's sentinels.
var errLayerTruncated = errors.New("bullylab: frame truncated (needs TCP reassembly)")

// DecodeFromBytes decodes the frame at the start of data. It checks what
// wire.Decode checks, in the same order, and wraps the same sentinel errors
// (errors.Is works), so that the layer and the codec can never disagree
// about which bytes are a frame. An unknown type with a valid CRC decodes
// and returns wire.ErrUnknownType, as wire.Decode does, so the caller can
// skip the frame and stay in sync.
func (b *Bullylab) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	n, err := wire.FrameLen(data)
	if err != nil {
		if errors.Is(err, wire.ErrTruncated) {
			df.SetTruncated()
			return fmt.Errorf("%w: %d bytes, header needs %d", errLayerTruncated, len(data), wire.HeaderLen)
		}
		return err
	}
	if len(data) < n {
		df.SetTruncated()
		return fmt.Errorf("%w: %d bytes of a %d-byte frame", errLayerTruncated, len(data), n)
	}
	end := n - wire.TrailerLen
	crc := binary.BigEndian.Uint32(data[end:n])
	if crc32.Checksum(data[:end], castagnoli) != crc {
		return wire.ErrChecksum
	}
	b.Version = data[1]
	b.Type = wire.Type(data[2])
	b.Flags = data[3]
	b.Epoch = binary.BigEndian.Uint64(data[4:12])
	b.From = uuid.UUID(data[12:28])
	b.Length = binary.BigEndian.Uint32(data[28:32])
	b.Data, b.Tag, b.Hello = nil, nil, wire.Hello{}
	if b.Flags&wire.FlagAuth != 0 {
		b.Tag = data[end-wire.TagLen : end : end]
		end -= wire.TagLen
	}
	if end > wire.HeaderLen {
		b.Data = data[wire.HeaderLen:end:end]
	}
	if b.Type == wire.TypeHello && len(b.Data) == wire.HelloLen {
		b.Hello, _ = wire.DecodeHello(b.Data) // cannot fail: the length is right
	}
	b.CRC = crc
	b.Contents = data[:n:n]
	b.Payload = data[n:]
	if !b.Type.Valid() {
		return wire.ErrUnknownType
	}
	return nil
}

// SerializeTo writes the frame. The payload is Data, except for a HELLO
// with no Data, whose payload is Hello. With FlagAuth, Tag follows the
// payload and must be wire.TagLen bytes (wire.Sealer computes it). With
// FixLengths, Length is set from the payload; with ComputeChecksums, CRC
// is computed; otherwise both are written as they are, so that tests can
// build the frames a decoder must refuse. Version 0 is written as
// wire.Version.
func (b *Bullylab) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	plen := len(b.Data)
	hello := b.Type == wire.TypeHello && b.Data == nil
	if hello {
		plen = wire.HelloLen
	}
	tagLen := 0
	if b.Flags&wire.FlagAuth != 0 {
		if len(b.Tag) != wire.TagLen {
			return fmt.Errorf("bullylab: FlagAuth set with a tag of %d bytes, want %d", len(b.Tag), wire.TagLen)
		}
		tagLen = wire.TagLen
	}
	if opts.FixLengths {
		if uint64(plen) > wire.MaxPayloadLen {
			return fmt.Errorf("bullylab: payload of %d bytes does not fit the length field", plen)
		}
		b.Length = uint32(plen)
	}
	n := wire.HeaderLen + plen + tagLen + wire.TrailerLen
	bytes, err := buf.PrependBytes(n)
	if err != nil {
		return err
	}
	v := b.Version
	if v == 0 {
		v = wire.Version
	}
	bytes[0], bytes[1], bytes[2], bytes[3] = wire.StartByte, v, byte(b.Type), b.Flags
	binary.BigEndian.PutUint64(bytes[4:], b.Epoch)
	copy(bytes[12:28], b.From[:])
	binary.BigEndian.PutUint32(bytes[28:], b.Length)
	if hello {
		wire.AppendHello(bytes[wire.HeaderLen:wire.HeaderLen], b.Hello)
	} else {
		copy(bytes[wire.HeaderLen:], b.Data)
	}
	copy(bytes[wire.HeaderLen+plen:], b.Tag[:tagLen])
	end := n - wire.TrailerLen
	if opts.ComputeChecksums {
		b.CRC = crc32.Checksum(bytes[:end], castagnoli)
	}
	binary.BigEndian.PutUint32(bytes[end:], b.CRC)
	return nil
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
