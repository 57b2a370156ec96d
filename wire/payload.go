package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/uuid"
)

const (
	// IDLen is the size of a node ID on the wire (REJECT payload, MEMBERS entry).
	IDLen = len(uuid.UUID{})
	// MaxAddrLen is the longest address a MEMBERS entry can carry (its
	// length is one byte). JOIN is held to it too, or a joiner could not be
	// listed afterwards.
	MaxAddrLen = math.MaxUint8
	// MaxMembers is the most entries a MEMBERS list can carry (the count is
	// two bytes). In practice the receiver's frame limit binds first: with
	// DefaultMaxFrame, at some 1,700 members with 20-byte addresses.
	MaxMembers = math.MaxUint16
)

// ErrPayload reports a payload that does not have the shape its type
// prescribes; the decoders wrap it with what was wrong.
var ErrPayload = errors.New("wire: malformed payload")

// AppendID appends the REJECT or ELECTED payload: the 16 bytes of id.
func AppendID(dst []byte, id uuid.UUID) []byte { return append(dst, id[:]...) }

// DecodeID parses a REJECT or ELECTED payload, which must be exactly IDLen bytes.
func DecodeID(p []byte) (uuid.UUID, error) {
	if len(p) != IDLen {
		return uuid.UUID{}, fmt.Errorf("%w: ID is %d bytes, want %d", ErrPayload, len(p), IDLen)
	}
	return uuid.UUID(p), nil
}

// RingElectionLen is the size of a RING_ELECTION payload.
const RingElectionLen = 2 * IDLen

// AppendRingElection appends the RING_ELECTION payload: the run's initiator
// and the best candidate so far, 16 bytes each.
func AppendRingElection(dst []byte, initiator, candidate uuid.UUID) []byte {
	dst = append(dst, initiator[:]...)
	return append(dst, candidate[:]...)
}

// DecodeRingElection parses a RING_ELECTION payload, which must be exactly
// RingElectionLen bytes.
func DecodeRingElection(p []byte) (initiator, candidate uuid.UUID, err error) {
	if len(p) != RingElectionLen {
		return uuid.UUID{}, uuid.UUID{}, fmt.Errorf("%w: RING_ELECTION is %d bytes, want %d", ErrPayload, len(p), RingElectionLen)
	}
	return uuid.UUID(p[:IDLen]), uuid.UUID(p[IDLen:]), nil
}

// CheckAddr reports whether addr fits a JOIN or MEMBERS payload. Check
// addresses from configuration or the command line with it: AppendAddr and
// AppendMembers panic on one that does not fit.
func CheckAddr(addr string) error {
	if len(addr) > MaxAddrLen {
		return fmt.Errorf("%w: address %.20q... is %d bytes, max %d", ErrPayload, addr, len(addr), MaxAddrLen)
	}
	return nil
}

// AppendAddr appends the JOIN payload: addr's bytes. It panics if addr is
// longer than MaxAddrLen (see CheckAddr).
func AppendAddr(dst []byte, addr string) []byte {
	if err := CheckAddr(addr); err != nil {
		panic(err)
	}
	return append(dst, addr...)
}

// DecodeAddr parses a JOIN payload.
func DecodeAddr(p []byte) (string, error) {
	if len(p) > MaxAddrLen {
		return "", fmt.Errorf("%w: address is %d bytes, max %d", ErrPayload, len(p), MaxAddrLen)
	}
	return string(p), nil
}

// CheckMembers reports whether ms fits a MEMBERS payload (see CheckAddr).
func CheckMembers(ms []Member) error {
	if len(ms) > MaxMembers {
		return fmt.Errorf("%w: %d members, max %d", ErrPayload, len(ms), MaxMembers)
	}
	for i := range ms {
		if err := CheckAddr(ms[i].Addr); err != nil {
			return fmt.Errorf("member %s: %w", ms[i].ID, err)
		}
	}
	return nil
}

// AppendMembers appends the MEMBERS payload for ms. It panics if ms does
// not fit (see CheckMembers).
func AppendMembers(dst []byte, ms []Member) []byte {
	if err := CheckMembers(ms); err != nil {
		panic(err)
	}
	size := 2
	for i := range ms {
		size += IDLen + 1 + len(ms[i].Addr)
	}
	dst = binary.BigEndian.AppendUint16(slices.Grow(dst, size), uint16(len(ms)))
	for i := range ms {
		dst = append(dst, ms[i].ID[:]...)
		dst = append(dst, byte(len(ms[i].Addr)))
		dst = append(dst, ms[i].Addr...)
	}
	return dst
}

// DecodeMembers parses a MEMBERS payload. The result does not alias p. All
// the addresses share one string, so the whole list costs two allocations.
// An empty list decodes to an empty, non-nil slice.
func DecodeMembers(p []byte) ([]Member, error) {
	if len(p) < 2 {
		return nil, fmt.Errorf("%w: MEMBERS payload is %d bytes, too short for the count", ErrPayload, len(p))
	}
	count := int(binary.BigEndian.Uint16(p))
	// Validate before allocating, so that a count that lies costs nothing.
	rest, addrLen := p[2:], 0
	for i := range count {
		if len(rest) < IDLen+1 {
			return nil, fmt.Errorf("%w: MEMBERS entry %d of %d truncated", ErrPayload, i, count)
		}
		n := int(rest[IDLen])
		if len(rest) < IDLen+1+n {
			return nil, fmt.Errorf("%w: MEMBERS entry %d of %d: address truncated", ErrPayload, i, count)
		}
		addrLen += n
		rest = rest[IDLen+1+n:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last of %d MEMBERS entries", ErrPayload, len(rest), count)
	}

	var sb strings.Builder
	sb.Grow(addrLen)
	for i, rest := 0, p[2:]; i < count; i++ {
		n := int(rest[IDLen])
		sb.Write(rest[IDLen+1 : IDLen+1+n])
		rest = rest[IDLen+1+n:]
	}
	addrs := sb.String()

	ms := make([]Member, count)
	for i, rest, off := 0, p[2:], 0; i < count; i++ {
		n := int(rest[IDLen])
		ms[i].ID = uuid.UUID(rest[:IDLen])
		ms[i].Addr = addrs[off : off+n]
		off += n
		rest = rest[IDLen+1+n:]
	}
	return ms, nil
}
