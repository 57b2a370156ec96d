package capture

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/gopacket/gopacket"
)

// testMemberKeys are fixed member keys of the synthetic clusters' nodes.
func testMemberKeys(n int) []ed25519.PrivateKey {
	keys := make([]ed25519.PrivateKey, n)
	for i := range keys {
		keys[i] = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{byte(i + 1)}, ed25519.SeedSize))
	}
	return keys
}

// A signed HELLO decodes with its key and signature, serializes back from
// its fields, and its signature verifies without the cluster key; one in
// another sender's name does not.
func TestLayerSignedHello(t *testing.T) {
	ms := sampleMessages()
	from, to := ms[0].From, ms[3].From
	key := testMemberKeys(1)[0]
	h := wire.Hello{To: to, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC).UnixNano(), Nonce: [16]byte{1, 2}}
	h.Sign(from, key)
	_, frame := wire.NewSealer(nil, &testKey, from, h)
	var l Bullylab
	if err := l.DecodeFromBytes(frame, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if l.Hello != h || l.Length != uint32(wire.SignedHelloLen) {
		t.Fatalf("layer HELLO %+v (%d bytes), want %+v", l.Hello, l.Length, h)
	}
	if got, want := l.PublicKey(), wire.EncodePublicKey(key.Public().(ed25519.PublicKey)); got != want {
		t.Errorf("PublicKey = %q, want %q", got, want)
	}
	if err := l.CheckSignature(); err != nil {
		t.Errorf("CheckSignature: %v", err)
	}
	src := Bullylab{Type: wire.TypeHello, Flags: l.Flags, From: from, Tag: l.Tag, Hello: h}
	buf := gopacket.NewSerializeBuffer()
	if err := src.SerializeTo(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), frame) {
		t.Errorf("serialized from its fields\n%x\nwant\n%x", buf.Bytes(), frame)
	}

	_, forged := wire.NewSealer(nil, &testKey, to, h) // the same HELLO, from another node
	if err := l.DecodeFromBytes(forged, gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckSignature(); !errors.Is(err, wire.ErrSignature) {
		t.Errorf("CheckSignature of a HELLO in another's name = %v", err)
	}
	unsigned := authMessages()[0]
	if err := l.DecodeFromBytes(wire.Append(nil, &unsigned), gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if l.PublicKey() != "" || !errors.Is(l.CheckSignature(), wire.ErrSignature) {
		t.Errorf("unsigned HELLO: key %q, CheckSignature %v", l.PublicKey(), l.CheckSignature())
	}
}

// TestAuthSignedHellos analyzes a cluster whose HELLOs are signed: every
// frame verifies. A member that forges HELLOs in the leader's name fails
// them: one whose signature does not verify, one signed by its own key,
// the leader's ID in From.
func TestAuthSignedHellos(t *testing.T) {
	var buf bytes.Buffer
	s := authSynth(t, &buf, 31)
	s.memberKeys = testMemberKeys(4)
	authScenario(s)
	s.close(t)
	rep := analyzeKey(t, buf.Bytes(), &testKey)
	if a := rep.Auth; a.Verified != rep.Frames || a.Failed != 0 || a.Streams != rep.Messages.Hello || rep.Messages.Hello == 0 {
		t.Fatalf("signed HELLOs: %+v, %d frames", a, rep.Frames)
	}

	// n2 (node 1) forges n4's (node 3, the leader's) HELLOs to n1: the
	// leader's own HELLOs come first, so the capture knows its key.
	buf.Reset()
	s = authSynth(t, &buf, 31)
	s.memberKeys = testMemberKeys(4)
	authScenario(s)
	hb := s.msg(wire.TypeHeartbeat, 3, 1, 0)
	forge := func(sign func(h *wire.Hello)) {
		s.closeConn(3, 0)
		s.signHello = func(a, b int, h *wire.Hello) {
			if a == 3 && b == 0 {
				sign(h)
			}
		}
		s.send(3, 0, hb)
		s.signHello = nil
	}
	forge(func(h *wire.Hello) { h.Signature[0] ^= 1 })
	forge(func(h *wire.Hello) { h.Sign(s.nodes[3].ID, s.memberKeys[1]) })
	forge(func(h *wire.Hello) { h.Signed = false })
	s.close(t)
	rep = analyzeKey(t, buf.Bytes(), &testKey)
	var reasons []string
	for _, f := range rep.Auth.Failures {
		if f.Type == "HELLO" {
			reasons = append(reasons, f.Reason)
		}
	}
	for _, want := range []string{"HELLO signature does not verify for sender", "HELLO signed by " + wire.EncodePublicKey(s.memberKeys[1].Public().(ed25519.PublicKey)),
		"HELLO not signed, while"} {
		if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, want) }) {
			t.Errorf("no HELLO failure %q among %q", want, reasons)
		}
	}
	if rep.Auth.OK() || len(reasons) != 3 {
		t.Errorf("forged HELLOs: %+v", rep.Auth)
	}
}
