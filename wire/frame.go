package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"slices"
	"strconv"
)

const (
	// StartByte opens every frame.
	StartByte = 0x1B
	// HeaderLen is the fixed part before the payload; FrameLen needs this much.
	HeaderLen = 32
	// TrailerLen is the CRC-32C after the payload (and the tag, if any).
	TrailerLen = 4
	// TagLen is the authentication tag of a frame with FlagAuth: HMAC-SHA256
	// cut to 128 bits, as RFC 4868 does for IPsec.
	TagLen = 16
	// MinFrameLen is the size of a frame without payload.
	MinFrameLen = HeaderLen + TrailerLen
	// DefaultMaxFrame bounds what NewReader buffers when given no limit. It
	// holds a MEMBERS list of some 1,700 nodes with 20-byte addresses, while
	// keeping a misbehaving peer from making a reader buffer up to 4 GiB.
	DefaultMaxFrame = 64 << 10
	// MaxPayloadLen is the largest payload the 32-bit length field can carry.
	MaxPayloadLen = math.MaxUint32
	// DefaultPort is the TCP port elections run on unless configured
	// otherwise: what testbeds use and what dissectors look for first.
	// Wireshark's Gryphon dissector claims 7000, so not that.
	DefaultPort = 7946
)

// Header offsets.
const (
	offVersion = 1
	offType    = 2
	offFlags   = 3
	offEpoch   = 4
	offFrom    = 12
	offLength  = 28
)

// The sentinel errors. Decode and FrameLen return them bare, so that probing
// arbitrary bytes (a dissector's heuristic, a fuzzer) never allocates; Reader
// wraps them with the stream offset and the offending value.
var (
	ErrBadStart    = errors.New("wire: bad start byte")
	ErrVersion     = errors.New("wire: unsupported version")
	ErrUnknownType = errors.New("wire: unknown message type")
	ErrTooLarge    = errors.New("wire: frame too large")
	ErrTruncated   = errors.New("wire: truncated frame")
	ErrChecksum    = errors.New("wire: checksum mismatch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Append appends m, framed, to dst and returns the extended slice. It does
// not allocate when dst has room for MinFrameLen+len(m.Payload) more bytes
// (and TagLen more with FlagAuth).
//
// Append writes m.Type and m.Flags as given, without checking them, so that
// tests can produce the frames Decode must refuse; with FlagAuth it writes
// m.Tag as the tag, which Sealer computes. It panics if the payload is
// longer than MaxPayloadLen, or if FlagAuth is set and m.Tag is not TagLen
// bytes.
func Append(dst []byte, m *Message) []byte {
	n := len(m.Payload)
	if uint64(n) > MaxPayloadLen {
		panic("wire: payload longer than MaxPayloadLen")
	}
	auth := m.Flags&FlagAuth != 0
	if auth && len(m.Tag) != TagLen {
		panic("wire: FlagAuth set without a TagLen-byte Tag")
	}
	dst = slices.Grow(dst, MinFrameLen+n+len(m.Tag))
	start := len(dst)
	dst = appendHeader(dst, m)
	dst = append(dst, m.Payload...)
	if auth {
		dst = append(dst, m.Tag...)
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// appendHeader appends the HeaderLen bytes before m's payload.
func appendHeader(dst []byte, m *Message) []byte {
	dst = append(dst, StartByte, Version, byte(m.Type), m.Flags)
	dst = binary.BigEndian.AppendUint64(dst, m.Epoch)
	dst = append(dst, m.From[:]...)
	return binary.BigEndian.AppendUint32(dst, uint32(len(m.Payload)))
}

// FrameLen returns the total length (header, payload and trailer) of the
// frame whose header starts b, so that a stream reassembler knows how many
// bytes to wait for. It needs HeaderLen bytes and returns ErrTruncated for
// fewer, but it checks the start and version bytes as soon as they are
// there, so that a heuristic can reject foreign traffic from its first byte.
//
// FrameLen does not check the type: a frame of an unknown type still has a
// trustworthy length (see Decode). A frame with FlagAuth is TagLen longer.
func FrameLen(b []byte) (int, error) {
	if len(b) > 0 && b[0] != StartByte {
		return 0, ErrBadStart
	}
	if len(b) > offVersion && b[offVersion] != Version {
		return 0, ErrVersion
	}
	if len(b) < HeaderLen {
		return 0, ErrTruncated
	}
	n := uint64(MinFrameLen) + uint64(binary.BigEndian.Uint32(b[offLength:]))
	if b[offFlags]&FlagAuth != 0 {
		n += TagLen
	}
	if n > math.MaxInt { // only reachable where int is 32 bits
		return 0, ErrTooLarge
	}
	return int(n), nil
}

// Decode parses the frame at the start of b into m and returns its length.
// It does not allocate: m.Payload aliases b (with its capacity cut at the
// payload's end, so appending to it cannot overwrite the trailer), and is nil
// when the payload is empty; so does m.Tag, nil without FlagAuth. Decode
// checks the CRC, not the tag: that takes the cluster key (Verifier).
//
// Decode returns ErrBadStart, ErrVersion, ErrTruncated (b is shorter than the
// frame), ErrTooLarge or ErrChecksum with n == 0 and m untouched.
// ErrUnknownType comes only after the checksum matched: then n is the
// frame's length and m is filled in, so the caller can log the frame and go
// on after it.
func Decode(b []byte, m *Message) (n int, err error) {
	n, err = FrameLen(b)
	if err != nil {
		return 0, err
	}
	if len(b) < n {
		return 0, ErrTruncated
	}
	end := n - TrailerLen
	if crc32.Checksum(b[:end], castagnoli) != binary.BigEndian.Uint32(b[end:n]) {
		return 0, ErrChecksum
	}
	m.Type = Type(b[offType])
	m.Flags = b[offFlags]
	m.Epoch = binary.BigEndian.Uint64(b[offEpoch:])
	m.From = [16]byte(b[offFrom:offLength])
	m.Payload, m.Tag = nil, nil
	if m.Flags&FlagAuth != 0 {
		m.Tag = b[end-TagLen : end : end]
		end -= TagLen
	}
	if end > HeaderLen {
		m.Payload = b[HeaderLen:end:end]
	}
	if !m.Type.Valid() {
		return n, ErrUnknownType
	}
	return n, nil
}

// String returns a one-line summary for logs, such as
// "COORDINATOR epoch=3 from=1234abcd reason=leader-failed len=0". From is
// cut to its first 4 bytes, which tell a small cluster's nodes apart; reason
// is shown only for the types that carry one, and flags only when bits
// outside the reason are set.
func (m Message) String() string {
	var a [96]byte
	b := append(a[:0], m.Type.String()...)
	b = append(b, " epoch="...)
	b = strconv.AppendUint(b, m.Epoch, 10)
	b = append(b, " from="...)
	b = hex.AppendEncode(b, m.From[:4])
	other := m.Flags &^ FlagAuth
	if m.Type.HasReason() {
		b = append(b, " reason="...)
		b = append(b, m.Reason().String()...)
		other &^= reasonMask
	}
	if other != 0 {
		b = append(b, " flags=0x"...)
		b = hex.AppendEncode(b, []byte{m.Flags})
	}
	b = append(b, " len="...)
	b = strconv.AppendInt(b, int64(len(m.Payload)), 10)
	if m.Flags&FlagAuth != 0 {
		b = append(b, " auth"...)
	}
	return string(b)
}

// Equal reports whether a and b would encode to the same frame. A nil and
// an empty payload are equal, as they are on the wire.
func Equal(a, b *Message) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Flags == b.Flags && a.Epoch == b.Epoch &&
		a.From == b.From && bytes.Equal(a.Payload, b.Payload) && bytes.Equal(a.Tag, b.Tag)
}
