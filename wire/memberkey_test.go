package wire_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

var idC = uuid.MustParse("5a5a5a5a-0000-4000-8000-00000000000c")

// testMemberKey is a fixed member key, so that fuzz workers and golden
// bytes agree on it.
func testMemberKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func signedHello(from ed25519.PrivateKey) wire.Hello {
	h := wire.Hello{To: idA, Time: 1700000000123456789, Nonce: [16]byte{1, 2, 3, 4}}
	h.Sign(idB, from)
	return h
}

func TestSignedHelloRoundTrip(t *testing.T) {
	priv := testMemberKey(7)
	h := signedHello(priv)
	if !h.Signed || !bytes.Equal(h.PublicKey[:], priv.Public().(ed25519.PublicKey)) {
		t.Fatalf("Sign left %+v", h)
	}
	p := wire.AppendHello(nil, h)
	if len(p) != wire.SignedHelloLen || h.Len() != wire.SignedHelloLen || wire.SignedHelloLen != 136 {
		t.Fatalf("signed HELLO payload is %d bytes (Len %d, SignedHelloLen %d), want 136", len(p), h.Len(), wire.SignedHelloLen)
	}
	// The unsigned fields keep their places; key and signature follow.
	unsigned := h
	unsigned.Signed = false
	if u := wire.AppendHello(nil, unsigned); !bytes.Equal(p[:wire.HelloLen], u) || len(u) != wire.HelloLen {
		t.Errorf("signed payload starts %x, want the unsigned one %x", p[:wire.HelloLen], u)
	}
	if !bytes.Equal(p[wire.HelloLen:wire.HelloLen+32], h.PublicKey[:]) || !bytes.Equal(p[wire.HelloLen+32:], h.Signature[:]) {
		t.Errorf("key and signature not at 40 and 72: %x", p)
	}
	got, err := wire.DecodeHello(p)
	if err != nil || got != h {
		t.Fatalf("DecodeHello = %+v, %v; want %+v", got, err, h)
	}
	if err := got.CheckSignature(idB); err != nil {
		t.Errorf("CheckSignature: %v", err)
	}

	key := testKey()
	s, hello := wire.NewSealer(nil, &key, idB, h)
	if len(hello) != wire.MinFrameLen+wire.SignedHelloLen+wire.TagLen {
		t.Errorf("signed HELLO frame is %d bytes, want %d", len(hello), wire.MinFrameLen+wire.SignedHelloLen+wire.TagLen)
	}
	hm := decode(t, hello)
	v, oh, err := wire.OpenHello(&key, idA, &hm)
	if err != nil || oh != h {
		t.Fatalf("OpenHello = %+v, %v", oh, err)
	}
	hb := sample(wire.TypeHeartbeat)
	m := decode(t, s.Seal(nil, wire.Append(nil, &hb)))
	if err := v.Verify(&m); err != nil {
		t.Errorf("frame after a signed HELLO: %v", err)
	}
}

func TestSignedHelloRefused(t *testing.T) {
	key := testKey()
	priv := testMemberKey(7)
	open := func(from uuid.UUID, h wire.Hello) error {
		_, b := wire.NewSealer(nil, &key, from, h)
		m := decode(t, b)
		_, _, err := wire.OpenHello(&key, idA, &m)
		return err
	}
	h := signedHello(priv)
	// Sealed under the cluster key, so only the signature can tell.
	if err := open(idC, h); !errors.Is(err, wire.ErrSignature) || !errors.Is(err, wire.ErrAuth) {
		t.Errorf("B's signed HELLO sent as C: %v; want ErrSignature", err)
	}
	for name, change := range map[string]func(*wire.Hello){
		"time":      func(h *wire.Hello) { h.Time += 4 * 60e9 },
		"nonce":     func(h *wire.Hello) { h.Nonce[0] ^= 1 },
		"to":        func(h *wire.Hello) { h.To = idC },
		"signature": func(h *wire.Hello) { h.Signature[5] ^= 1 },
		"key":       func(h *wire.Hello) { copy(h.PublicKey[:], testMemberKey(8).Public().(ed25519.PublicKey)) },
	} {
		bad := signedHello(priv)
		change(&bad)
		if err := bad.CheckSignature(idB); !errors.Is(err, wire.ErrSignature) {
			t.Errorf("%s changed: CheckSignature = %v; want ErrSignature", name, err)
		}
	}
	unsigned := wire.Hello{To: idA, Time: 1}
	if err := unsigned.CheckSignature(idB); !errors.Is(err, wire.ErrSignature) {
		t.Errorf("unsigned: CheckSignature = %v", err)
	}
	if err := open(idB, unsigned); err != nil {
		t.Errorf("unsigned HELLO: OpenHello = %v; the caller decides whether it needs a signature", err)
	}
	for _, n := range []int{0, wire.HelloLen - 1, wire.HelloLen + 1, wire.HelloLen + 32, wire.SignedHelloLen - 1, wire.SignedHelloLen + 1} {
		if _, err := wire.DecodeHello(make([]byte, n)); !errors.Is(err, wire.ErrPayload) {
			t.Errorf("DecodeHello of %d bytes = %v; want ErrPayload", n, err)
		}
	}
}

func TestMemberKeyFile(t *testing.T) {
	dir := t.TempDir()
	priv, err := wire.NewMemberKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "node.key")
	if err := wire.WriteMemberKeyFile(path, priv); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("member key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	got, err := wire.ReadMemberKeyFile(path)
	if err != nil || !got.Equal(priv) {
		t.Fatalf("ReadMemberKeyFile = %v, want the written key", err)
	}
	if err := wire.WriteMemberKeyFile(path, priv); err == nil {
		t.Error("WriteMemberKeyFile overwrote an existing key")
	}
	pub := priv.Public().(ed25519.PublicKey)
	if p, err := wire.ParsePublicKey(wire.EncodePublicKey(pub)); err != nil || !p.Equal(pub) {
		t.Errorf("public key does not round-trip: %v", err)
	}

	ck := testKey()
	clusterPath := filepath.Join(dir, "cluster.key")
	if err := wire.WriteKeyFile(clusterPath, ck); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, path, want string
	}{
		{"cluster key", clusterPath, "it is a cluster key"},
		{"world readable", write("open.key", wire.EncodeMemberKey(priv), 0o644), "chmod 600"},
		{"public key", write("pub.key", wire.EncodePublicKey(pub), 0o600), "not a member key"},
		{"short", write("short.key", "ed25519-private:AAAA", 0o600), "32-byte seed"},
		{"huge", write("huge.key", strings.Repeat("A", 1<<20), 0o600), "longer than"},
		{"missing", filepath.Join(dir, "none.key"), "no such file"},
		{"directory", dir, "not a regular file"},
	} {
		_, err := wire.ReadMemberKeyFile(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "member key "+c.path) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: ReadMemberKeyFile error %q, want one line naming the file and %q", c.name, err, c.want)
		}
	}
	path2 := filepath.Join(dir, "node2.key")
	if err := wire.WriteMemberKeyFile(path2, priv); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ReadKeyFile(path2); err == nil || !strings.Contains(err.Error(), "it is a member key") {
		t.Errorf("ReadKeyFile of a member key = %v", err)
	}
}

// FuzzDecodeHello: any payload either decodes to a HELLO that encodes back
// to exactly it, or is ErrPayload; no payload but the signed one verifies.
func FuzzDecodeHello(f *testing.F) {
	h := signedHello(testMemberKey(7))
	signed := wire.AppendHello(nil, h)
	f.Add(signed)
	f.Add(signed[:wire.HelloLen])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := wire.DecodeHello(p)
		if err != nil {
			if !errors.Is(err, wire.ErrPayload) {
				t.Fatalf("DecodeHello error %v does not wrap ErrPayload", err)
			}
			return
		}
		if again := wire.AppendHello(nil, got); !bytes.Equal(again, p) || got.Len() != len(p) {
			t.Fatalf("HELLO %x re-encodes as %x", p, again)
		}
		if err := got.CheckSignature(idB); err == nil && !bytes.Equal(p, signed) {
			t.Fatalf("a HELLO other than the signed one verified: %x", p)
		}
	})
}

func FuzzParseMemberKey(f *testing.F) {
	priv := testMemberKey(3)
	f.Add(wire.EncodeMemberKey(priv))
	f.Add(wire.EncodePublicKey(priv.Public().(ed25519.PublicKey)))
	f.Add("ed25519-private:")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := wire.ParseMemberKey(s); err != nil {
			if !errors.Is(err, wire.ErrMemberKey) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseMemberKey error %q", err)
			}
		} else if again, err := wire.ParseMemberKey(wire.EncodeMemberKey(k)); err != nil || !again.Equal(k) {
			t.Fatalf("member key does not round-trip: %v", err)
		}
		if p, err := wire.ParsePublicKey(s); err != nil {
			if !errors.Is(err, wire.ErrMemberKey) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParsePublicKey error %q", err)
			}
		} else if again, err := wire.ParsePublicKey(wire.EncodePublicKey(p)); err != nil || !again.Equal(p) {
			t.Fatalf("public key does not round-trip: %v", err)
		}
	})
}

// BenchmarkSignedHello measures what a member key adds to a connection:
// the dialer signs its HELLO, the acceptor verifies the signature after
// the tag.
func BenchmarkSignedHello(b *testing.B) {
	key := testKey()
	priv := testMemberKey(7)
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			h := wire.Hello{To: idA, Time: 1}
			h.Sign(idB, priv)
		}
	})
	h := signedHello(priv)
	_, hello := wire.NewSealer(nil, &key, idB, h)
	var m wire.Message
	if _, err := wire.Decode(hello, &m); err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := wire.OpenHello(&key, idA, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	unsigned := h
	unsigned.Signed = false
	_, hello = wire.NewSealer(nil, &key, idB, unsigned)
	var um wire.Message
	if _, err := wire.Decode(hello, &um); err != nil {
		b.Fatal(err)
	}
	b.Run("open-unsigned", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := wire.OpenHello(&key, idA, &um); err != nil {
				b.Fatal(err)
			}
		}
	})
}
