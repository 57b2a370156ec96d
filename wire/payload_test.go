package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func TestMembersRoundTrip(t *testing.T) {
	for _, ms := range [][]wire.Member{nil, testMembers[:1], testMembers} {
		p := wire.AppendMembers(nil, ms)
		got, err := wire.DecodeMembers(p)
		if err != nil {
			t.Fatalf("DecodeMembers(%d members): %v", len(ms), err)
		}
		if got == nil || !equalMembers(got, ms) {
			t.Errorf("DecodeMembers = %#v, want %#v", got, ms)
		}
	}
}

func TestMembersLayout(t *testing.T) {
	p := wire.AppendMembers([]byte("x"), []wire.Member{{ID: idB, Addr: "ab"}})
	want := append([]byte("x\x00\x01"), idB[:]...)
	want = append(want, 2, 'a', 'b')
	if !bytes.Equal(p, want) {
		t.Errorf("AppendMembers = %x, want %x", p, want)
	}
}

// The decoded list must own its memory: a Reader reuses the frame buffer.
func TestDecodeMembersDoesNotAlias(t *testing.T) {
	p := wire.AppendMembers(nil, testMembers[:2])
	ms, err := wire.DecodeMembers(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p {
		p[i] = 0
	}
	if !equalMembers(ms, testMembers[:2]) {
		t.Errorf("DecodeMembers result changed with its input: %v", ms)
	}
}

func TestDecodeMembersErrors(t *testing.T) {
	one := wire.AppendMembers(nil, testMembers[:1])
	two := wire.AppendMembers(nil, testMembers[:2])
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"half count", []byte{0}},
		{"count without entries", []byte{0, 1}},
		{"count says two, one entry", append([]byte{0, 2}, one[2:]...)},
		{"truncated ID", two[:2+10]},
		{"missing address length", two[:2+16]},
		{"truncated address", two[:len(two)-1]},
		{"trailing byte", append(bytes.Clone(two), 0)},
		{"trailing after empty list", []byte{0, 0, 0}},
		{"huge count, no entries", []byte{0xff, 0xff}},
	}
	for _, tt := range tests {
		ms, err := wire.DecodeMembers(tt.in)
		if !errors.Is(err, wire.ErrPayload) || ms != nil {
			t.Errorf("%s: DecodeMembers = %v, %v; want ErrPayload", tt.name, ms, err)
		}
	}
}

func TestMembersLimits(t *testing.T) {
	long := []wire.Member{{ID: idA, Addr: strings.Repeat("a", wire.MaxAddrLen+1)}}
	if err := wire.CheckMembers(long); !errors.Is(err, wire.ErrPayload) {
		t.Errorf("CheckMembers(256-byte address) = %v, want ErrPayload", err)
	}
	if err := wire.CheckMembers(make([]wire.Member, wire.MaxMembers+1)); !errors.Is(err, wire.ErrPayload) {
		t.Errorf("CheckMembers(65536 members) = %v, want ErrPayload", err)
	}
	if err := wire.CheckMembers(testMembers); err != nil {
		t.Errorf("CheckMembers(testMembers) = %v", err)
	}
	mustPanic(t, "AppendMembers(256-byte address)", func() { wire.AppendMembers(nil, long) })
	mustPanic(t, "AppendAddr(256-byte address)", func() { wire.AppendAddr(nil, long[0].Addr) })
}

func TestID(t *testing.T) {
	p := wire.AppendID([]byte{9}, idB)
	if !bytes.Equal(p[1:], idB[:]) || p[0] != 9 {
		t.Fatalf("AppendID = %x", p)
	}
	if id, err := wire.DecodeID(p[1:]); err != nil || id != idB {
		t.Errorf("DecodeID = %v, %v; want %v", id, err, idB)
	}
	for _, n := range []int{0, 15, 17, 32} {
		if id, err := wire.DecodeID(make([]byte, n)); !errors.Is(err, wire.ErrPayload) || id != (uuid.UUID{}) {
			t.Errorf("DecodeID(%d bytes) = %v, %v; want ErrPayload", n, id, err)
		}
	}
}

func TestAddr(t *testing.T) {
	for _, a := range []string{"", "10.0.0.1:7946", strings.Repeat("h", wire.MaxAddrLen)} {
		if got, err := wire.DecodeAddr(wire.AppendAddr(nil, a)); err != nil || got != a {
			t.Errorf("DecodeAddr(AppendAddr(%q)) = %q, %v", a, got, err)
		}
	}
	if _, err := wire.DecodeAddr(make([]byte, wire.MaxAddrLen+1)); !errors.Is(err, wire.ErrPayload) {
		t.Errorf("DecodeAddr(256 bytes) = %v, want ErrPayload", err)
	}
}

func TestDecodeMembersAllocs(t *testing.T) {
	p := wire.AppendMembers(nil, testMembers)
	if n := testing.AllocsPerRun(100, func() { _, _ = wire.DecodeMembers(p) }); n > 2 {
		t.Errorf("DecodeMembers: %v allocs, want at most 2 (list and addresses)", n)
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	f()
}
