package capture

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// decodeHello sets b.Hello from m, a frame b decodes: m's payload decoded
// for a HELLO of either length, zero otherwise.
func (b *Bullylab) decodeHello(m *wire.Message) {
	if m.Type == wire.TypeHello && (len(m.Payload) == wire.HelloLen || len(m.Payload) == wire.SignedHelloLen) {
		b.Hello, _ = wire.DecodeHello(m.Payload) // cannot fail: the length is right
	} else {
		b.Hello = wire.Hello{}
	}
}

// PublicKey returns the member key a signed HELLO carries, as the peers
// file gives it (ed25519:BASE64), or "" for any other frame.
func (b *Bullylab) PublicKey() string {
	if b.Type != wire.TypeHello || !b.Hello.Signed {
		return ""
	}
	return wire.EncodePublicKey(b.Hello.PublicKey[:])
}

// CheckSignature verifies a signed HELLO's signature by the key it
// carries, which needs no cluster key; an unsigned HELLO, or any other
// frame, is an error wrapping wire.ErrSignature too. Whether the key is
// the sender's own is for whoever knows the members' keys (the peers
// file) to say.
func (b *Bullylab) CheckSignature() error {
	if b.Type != wire.TypeHello {
		return fmt.Errorf("%w: a %s frame carries no signature", wire.ErrSignature, b.Type)
	}
	return b.Hello.CheckSignature(b.From)
}

// helloFailure says why wire.OpenHello refused m with err, for an
// AuthFailure's reason.
func helloFailure(m *wire.Message, err error) string {
	switch {
	case m.Flags&wire.FlagAuth == 0:
		return "HELLO without a tag"
	case len(m.Payload) != wire.HelloLen && len(m.Payload) != wire.SignedHelloLen:
		return fmt.Sprintf("HELLO payload is %d bytes, not %d, or %d signed", len(m.Payload), wire.HelloLen, wire.SignedHelloLen)
	case errors.Is(err, wire.ErrSignature):
		// The tag verified: a member sent it, and signed it with a key
		// that is not the one it carries, or for another sender ID.
		return fmt.Sprintf("HELLO signature does not verify for sender %s (a member forging another's HELLO?)", shortID(m.From))
	}
	return "HELLO tag mismatch (another cluster key?)"
}

// helloSigners remembers the member key each sender's first signed HELLO
// in the capture carried, so that a later HELLO in its name signed by
// another key, which verifies by itself, is still caught: a member that
// holds the cluster key signing in another's name with its own key. Nodes
// refuse it by the peers file's keys, which a capture does not have.
type helloSigners struct {
	first map[uuid.UUID]helloSigner
}

type helloSigner struct {
	key [ed25519.PublicKeySize]byte
	pkt int64
}

// check says why h, a HELLO from from in packet pkt whose tag and
// signature verified, is not from's, or returns "".
func (s *helloSigners) check(from uuid.UUID, h *wire.Hello, pkt int64) string {
	if !h.Signed {
		if f, ok := s.first[from]; ok {
			return fmt.Sprintf("HELLO not signed, while %s's HELLO of packet %d was", shortID(from), f.pkt)
		}
		return ""
	}
	f, ok := s.first[from]
	if !ok {
		if s.first == nil {
			s.first = make(map[uuid.UUID]helloSigner)
		}
		s.first[from] = helloSigner{h.PublicKey, pkt}
		return ""
	}
	if f.key != h.PublicKey {
		return fmt.Sprintf("HELLO signed by %s, not by %s, the key of %s's HELLO of packet %d", wire.EncodePublicKey(h.PublicKey[:]),
			wire.EncodePublicKey(f.key[:]), shortID(from), f.pkt)
	}
	return ""
}
