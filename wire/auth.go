package wire

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"

	"github.com/google/uuid"
)

// HelloLen is the size of an unsigned HELLO payload: To, Time and Nonce.
const HelloLen = IDLen + 8 + 16

// SignedHelloLen is the size of a signed HELLO payload: HelloLen bytes,
// then the dialer's member key (ed25519 public key) and its signature. The
// length alone tells the two kinds apart.
const SignedHelloLen = HelloLen + ed25519.PublicKeySize + ed25519.SignatureSize

// helloSigLabel starts the message a HELLO's signature covers, so that a
// signature over it cannot be taken for one over anything else a member
// key might sign.
const helloSigLabel = "bullylab-hello-v1"

// sessionLabel starts the input of the session key's derivation, so that
// the cluster key's HMACs for this purpose cannot be mistaken for any other.
const sessionLabel = "bullylab-v1"

// ErrAuth is wrapped by every authentication failure: a HELLO or a frame
// whose tag does not verify, a HELLO for another node, a frame without a
// tag on an authenticated connection.
var ErrAuth = errors.New("wire: authentication failed")

// ErrSignature is wrapped, with ErrAuth, by the error of a signed HELLO
// whose signature does not verify under the public key it carries.
var ErrSignature = errors.New("HELLO signature does not verify")

// Hello is the payload of a HELLO frame (see Sealer).
type Hello struct {
	// To is the node the connection was dialled to, so that a HELLO cannot
	// be replayed to another member.
	To uuid.UUID
	// Time is the dialer's wall clock in Unix nanoseconds, strictly
	// increasing across the dialer's connections to one peer, so that the
	// receiver can refuse a replayed HELLO.
	Time int64
	// Nonce is random: two connections never share a session key.
	Nonce [16]byte
	// Signed says that the HELLO carries PublicKey and Signature (Sign):
	// its payload is SignedHelloLen bytes, not HelloLen.
	Signed bool
	// PublicKey is the dialer's member key, an ed25519 public key.
	PublicKey [ed25519.PublicKeySize]byte
	// Signature is PublicKey's signature of the HELLO and its sender's ID
	// (see doc.go, "Authentication").
	Signature [ed25519.SignatureSize]byte
}

// Len returns the size of h's payload: HelloLen or SignedHelloLen.
func (h *Hello) Len() int {
	if h.Signed {
		return SignedHelloLen
	}
	return HelloLen
}

// Sign signs h as the HELLO of node from with its member key priv.
func (h *Hello) Sign(from uuid.UUID, priv ed25519.PrivateKey) {
	h.Signed = true
	copy(h.PublicKey[:], priv.Public().(ed25519.PublicKey))
	var buf [len(helloSigLabel) + IDLen + HelloLen + ed25519.PublicKeySize]byte
	copy(h.Signature[:], ed25519.Sign(priv, h.signed(buf[:0], from)))
}

// CheckSignature reports whether h is signed, by the key it carries, as
// the HELLO of node from. It says nothing of whose key that is: the
// receiver compares PublicKey with the one it knows for from. Errors wrap
// ErrAuth and ErrSignature.
func (h *Hello) CheckSignature(from uuid.UUID) error {
	if !h.Signed {
		return fmt.Errorf("%w: %w: HELLO from %s is not signed", ErrAuth, ErrSignature, from)
	}
	var buf [len(helloSigLabel) + IDLen + HelloLen + ed25519.PublicKeySize]byte
	if !ed25519.Verify(h.PublicKey[:], h.signed(buf[:0], from), h.Signature[:]) {
		return fmt.Errorf("%w: %w (from %s, key %s)", ErrAuth, ErrSignature, from, EncodePublicKey(h.PublicKey[:]))
	}
	return nil
}

// signed appends the message h's signature covers to dst. From is in it,
// though not in the payload, so that a member's signed HELLO cannot be
// passed off as another member's.
func (h *Hello) signed(dst []byte, from uuid.UUID) []byte {
	dst = append(dst, helloSigLabel...)
	dst = append(dst, from[:]...)
	dst = append(dst, h.To[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Time))
	dst = append(dst, h.Nonce[:]...)
	return append(dst, h.PublicKey[:]...)
}

// NewHello returns the Hello for a connection to node to, dialled at now.
func NewHello(to uuid.UUID, now time.Time) (Hello, error) {
	h := Hello{To: to, Time: now.UnixNano()}
	if _, err := io.ReadFull(rand.Reader, h.Nonce[:]); err != nil {
		return Hello{}, fmt.Errorf("HELLO nonce: %w", err)
	}
	return h, nil
}

// AppendHello appends h as a HELLO payload, signed or not as h is.
func AppendHello(dst []byte, h Hello) []byte {
	dst = append(dst, h.To[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Time))
	dst = append(dst, h.Nonce[:]...)
	if h.Signed {
		dst = append(dst, h.PublicKey[:]...)
		dst = append(dst, h.Signature[:]...)
	}
	return dst
}

// DecodeHello parses a HELLO payload: HelloLen bytes for an unsigned one,
// SignedHelloLen for a signed one. It does not check the signature
// (CheckSignature does).
func DecodeHello(p []byte) (Hello, error) {
	if len(p) != HelloLen && len(p) != SignedHelloLen {
		return Hello{}, fmt.Errorf("%w: HELLO is %d bytes, want %d, or %d signed", ErrPayload, len(p), HelloLen, SignedHelloLen)
	}
	var h Hello
	h.To = uuid.UUID(p[:IDLen])
	h.Time = int64(binary.BigEndian.Uint64(p[IDLen:]))
	h.Nonce = [16]byte(p[IDLen+8:])
	if len(p) == SignedHelloLen {
		h.Signed = true
		h.PublicKey = [ed25519.PublicKeySize]byte(p[HelloLen:])
		h.Signature = [ed25519.SignatureSize]byte(p[HelloLen+ed25519.PublicKeySize:])
	}
	return h, nil
}

// frameMAC computes the tags of one connection's frames.
type frameMAC struct {
	mac hash.Hash
	seq uint64 // of the next frame: 0 is the HELLO
	// Scratch space, in the struct so that passing it to mac does not
	// allocate.
	seqBuf [8]byte
	buf    [HeaderLen]byte
	sum    [sha256.Size]byte
}

// newFrameMAC derives the connection's session key from the cluster key
// and the HELLO that opened it (see doc.go).
func newFrameMAC(key *Key, from uuid.UUID, h Hello) *frameMAC {
	kdf := hmac.New(sha256.New, key[:])
	kdf.Write([]byte(sessionLabel))
	kdf.Write(from[:])
	var p [SignedHelloLen]byte
	kdf.Write(AppendHello(p[:0], h))
	var session [sha256.Size]byte
	return &frameMAC{mac: hmac.New(sha256.New, kdf.Sum(session[:0]))}
}

// tag returns the tag of frame number f.seq with header hdr and payload p,
// and counts the frame. The result is valid until the next call.
func (f *frameMAC) tag(hdr, p []byte) []byte {
	f.mac.Reset()
	binary.BigEndian.PutUint64(f.seqBuf[:], f.seq)
	f.seq++
	f.mac.Write(f.seqBuf[:])
	f.mac.Write(hdr)
	f.mac.Write(p)
	return f.mac.Sum(f.sum[:0])[:TagLen]
}

// Sealer authenticates the frames a node writes on one connection, for the
// node that dialled it. The connection starts with a HELLO (NewSealer); each
// frame after it carries FlagAuth and a tag (Seal) that binds it to the
// session and to its place in the connection, so that a frame cannot be
// forged, altered, replayed, reordered or dropped from the middle without
// the receiver's Verifier noticing. A Sealer is not safe for concurrent use.
type Sealer struct{ f *frameMAC }

// NewSealer starts an authenticated connection from node from: it returns
// the Sealer for the connection's frames and dst with the HELLO frame
// appended, which must be the first frame written. h is signed (Sign)
// when from has a member key.
func NewSealer(dst []byte, key *Key, from uuid.UUID, h Hello) (*Sealer, []byte) {
	s := &Sealer{f: newFrameMAC(key, from, h)}
	var p [SignedHelloLen]byte
	m := Message{Type: TypeHello, Flags: FlagAuth, From: from, Payload: AppendHello(p[:0], h)}
	var hdr [HeaderLen]byte
	m.Tag = s.f.tag(appendHeader(hdr[:0], &m), m.Payload)
	return s, Append(dst, &m)
}

// Seal appends frame, a whole frame as Append writes it without FlagAuth,
// to dst with FlagAuth set, its tag and a new CRC, and returns the extended
// slice. It does not allocate when dst has room for len(frame)+TagLen more
// bytes.
func (s *Sealer) Seal(dst, frame []byte) []byte {
	end := len(frame) - TrailerLen
	start := len(dst)
	dst = append(dst, frame[:end]...)
	dst[start+offFlags] |= FlagAuth
	dst = append(dst, s.f.tag(dst[start:start+HeaderLen], dst[start+HeaderLen:])...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// Verifier checks the frames of one authenticated connection, for the node
// that accepted it. It is not safe for concurrent use.
type Verifier struct {
	f    *frameMAC
	from uuid.UUID
}

// OpenHello checks m, the first frame of a connection accepted by node
// self, as a HELLO: it must carry a valid tag under the cluster key, be
// addressed to self and, if signed, carry a signature that verifies under
// its public key for m.From. It returns the Verifier for the frames after
// it and the Hello, whose Time the caller checks for freshness, and whose
// PublicKey (or its absence) the caller checks against the key it knows
// for m.From: only then is m.From the connection's proven sender. Errors
// wrap ErrAuth, and ErrSignature for a signature that does not verify.
func OpenHello(key *Key, self uuid.UUID, m *Message) (*Verifier, Hello, error) {
	if m.Type != TypeHello {
		return nil, Hello{}, fmt.Errorf("%w: first frame is %s, want HELLO", ErrAuth, m.Type)
	}
	h, err := DecodeHello(m.Payload)
	if err != nil {
		return nil, Hello{}, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	v := &Verifier{f: newFrameMAC(key, m.From, h), from: m.From}
	if err := v.Verify(m); err != nil {
		return nil, Hello{}, fmt.Errorf("%w (wrong cluster key?)", err)
	}
	if h.To != self {
		return nil, Hello{}, fmt.Errorf("%w: HELLO is for node %s, not this one", ErrAuth, h.To)
	}
	// Last: a signature costs more to check than the tag, and only a
	// holder of the cluster key gets this far.
	if h.Signed {
		if err := h.CheckSignature(m.From); err != nil {
			return nil, Hello{}, err
		}
	}
	return v, h, nil
}

// From returns the node the connection authenticated as.
func (v *Verifier) From() uuid.UUID { return v.from }

// Seek makes frame number i (0 is the HELLO) the next one Verify checks.
// A node never needs it; a reader that knows frames are missing from its
// copy of a connection, such as a capture analysis after bytes the capture
// lost, uses it to try the positions the next frame it has can hold: a tag
// that verifies at some position proves the frame was sealed there.
func (v *Verifier) Seek(i uint64) { v.f.seq = i }

// Verify checks m's tag as the connection's next frame. Every frame must
// be verified, in order, a failed one included: the tags chain by position.
// It does not check m.From; the caller compares it with From.
func (v *Verifier) Verify(m *Message) error {
	if m.Flags&FlagAuth == 0 || len(m.Tag) != TagLen {
		v.f.seq++
		return fmt.Errorf("%w: %s frame without a tag on an authenticated connection", ErrAuth, m.Type)
	}
	want := v.f.tag(appendHeader(v.f.buf[:0], m), m.Payload)
	if !hmac.Equal(want, m.Tag) {
		return fmt.Errorf("%w: %s frame %d: tag mismatch", ErrAuth, m.Type, v.f.seq-1)
	}
	return nil
}
