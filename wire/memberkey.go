package wire

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// A member key is a node's own ed25519 key pair. The cluster key proves
// that a connection is a member's; the member key proves which member's:
// a node signs the HELLO of every connection it dials with it (Hello.Sign),
// and its peers know its public key from the peers file.
//
// A member key file holds the private key's 32-byte seed as one line,
//
//	ed25519-private:BASE64
//
// and a public key is written, in the peers file too, as
//
//	ed25519:BASE64
//
// The prefixes keep a cluster key file, also 32 base64-encoded bytes,
// from being taken for a member key, and name the algorithm, so that
// another could follow.
const (
	memberKeyPrefix = "ed25519-private:"
	publicKeyPrefix = "ed25519:"
)

// ErrMemberKey is wrapped by the errors of ParseMemberKey, ReadMemberKeyFile
// and ParsePublicKey.
var ErrMemberKey = errors.New("not a member key")

// NewMemberKey returns a new random member key.
func NewMemberKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("new member key: %w", err)
	}
	return priv, nil
}

// EncodeMemberKey returns the member key file's text for priv.
func EncodeMemberKey(priv ed25519.PrivateKey) string {
	return memberKeyPrefix + base64.StdEncoding.EncodeToString(priv.Seed())
}

// ParseMemberKey parses what EncodeMemberKey returns; surrounding white
// space is ignored.
func ParseMemberKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(s, memberKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: want %sBASE64 as `bullylab keygen --member` writes", ErrMemberKey, memberKeyPrefix)
	}
	seed, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: want %d base64 characters after %s for a %d-byte seed", ErrMemberKey, base64.StdEncoding.EncodedLen(ed25519.SeedSize), memberKeyPrefix, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// EncodePublicKey returns pub as the peers file gives it: ed25519:BASE64.
func EncodePublicKey(pub ed25519.PublicKey) string {
	return publicKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// LooksLikePublicKey reports whether s starts as an encoded public key
// does, for parsers that must tell a key from other fields.
func LooksLikePublicKey(s string) bool { return strings.HasPrefix(s, publicKeyPrefix) }

// ParsePublicKey parses what EncodePublicKey returns.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(s, publicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: want %sBASE64 as `bullylab keygen --member` prints", ErrMemberKey, publicKeyPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: want %d base64 characters after %s for a %d-byte public key", ErrMemberKey, base64.StdEncoding.EncodedLen(ed25519.PublicKeySize), publicKeyPrefix, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ReadMemberKeyFile reads a member key file, which like a cluster key file
// must be a regular file only its owner can read or write: whoever reads
// it can sign HELLOs as that member. Errors are one line that names the
// file.
func ReadMemberKeyFile(path string) (ed25519.PrivateKey, error) {
	b, err := readSecretFile(path, "member key", ErrMemberKey)
	if err != nil {
		return nil, err
	}
	priv, err := ParseMemberKey(string(b))
	if err != nil {
		if _, kerr := ParseKey(string(b)); kerr == nil {
			return nil, fmt.Errorf("member key %s: %w: it is a cluster key (give it as --cluster-key)", path, ErrMemberKey)
		}
		return nil, fmt.Errorf("member key %s: %w", path, err)
	}
	return priv, nil
}

// WriteMemberKeyFile writes priv to a new file at path, mode 0600; it
// refuses to overwrite an existing file, so that a member's key is never
// replaced by accident.
func WriteMemberKeyFile(path string, priv ed25519.PrivateKey) error {
	return writeSecretFile(path, "member key", EncodeMemberKey(priv))
}
