package wire_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func testKey() wire.Key {
	var k wire.Key
	for i := range k {
		k[i] = byte(i * 7)
	}
	return k
}

// connection seals msgs as node from would on a connection to node to and
// returns the bytes written: the HELLO, then each frame.
func connection(t testing.TB, key *wire.Key, from, to uuid.UUID, msgs ...wire.Message) (hello []byte, frames [][]byte) {
	t.Helper()
	h, err := wire.NewHello(to, time.Unix(1700000000, 5))
	if err != nil {
		t.Fatal(err)
	}
	s, hello := wire.NewSealer(nil, key, from, h)
	for i := range msgs {
		frames = append(frames, s.Seal(nil, wire.Append(nil, &msgs[i])))
	}
	return hello, frames
}

func decode(t testing.TB, b []byte) wire.Message {
	t.Helper()
	var m wire.Message
	n, err := wire.Decode(b, &m)
	if err != nil || n != len(b) {
		t.Fatalf("Decode = %d, %v for a %d-byte frame", n, err, len(b))
	}
	return m
}

func TestSealVerify(t *testing.T) {
	key := testKey()
	msgs := []wire.Message{sample(wire.TypeHeartbeat), sample(wire.TypeMembers), sample(wire.TypeReject), sample(wire.TypeJoin)}
	hello, frames := connection(t, &key, idB, idA, msgs...)
	if len(hello) != wire.MinFrameLen+wire.HelloLen+wire.TagLen {
		t.Errorf("HELLO is %d bytes, want %d", len(hello), wire.MinFrameLen+wire.HelloLen+wire.TagLen)
	}
	hm := decode(t, hello)
	v, h, err := wire.OpenHello(&key, idA, &hm)
	if err != nil {
		t.Fatalf("OpenHello: %v", err)
	}
	if v.From() != idB || h.To != idA || h.Time != time.Unix(1700000000, 5).UnixNano() {
		t.Errorf("OpenHello = from %s, %+v", v.From(), h)
	}
	for i, b := range frames {
		if len(b) != len(wire.Append(nil, &msgs[i]))+wire.TagLen {
			t.Errorf("frame %d: %d bytes, want %d more than unsealed", i, len(b), wire.TagLen)
		}
		m := decode(t, b)
		if err := v.Verify(&m); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		// Isomorphic: the sealed frame re-encodes byte for byte, and is the
		// original message with FlagAuth and a tag.
		if re := wire.Append(nil, &m); !bytes.Equal(re, b) {
			t.Errorf("frame %d re-encodes as %x, want %x", i, re, b)
		}
		want := msgs[i]
		want.Flags |= wire.FlagAuth
		want.Tag = m.Tag
		if !wire.Equal(&m, &want) {
			t.Errorf("frame %d = %v, want %v", i, m, want)
		}
	}
}

func TestSealControlFrameSize(t *testing.T) {
	key := testKey()
	_, frames := connection(t, &key, idB, idA, sample(wire.TypeHeartbeat))
	if got, want := len(frames[0]), wire.MinFrameLen+wire.TagLen; got != want || want != 52 {
		t.Errorf("authenticated control frame is %d bytes, want %d (52)", got, want)
	}
}

func TestVerifyRefuses(t *testing.T) {
	key := testKey()
	msgs := []wire.Message{sample(wire.TypeHeartbeat), sample(wire.TypeCoordinator), sample(wire.TypeLeave)}
	hello, frames := connection(t, &key, idB, idA, msgs...)
	open := func(k *wire.Key, self uuid.UUID) (*wire.Verifier, error) {
		hm := decode(t, hello)
		v, _, err := wire.OpenHello(k, self, &hm)
		return v, err
	}
	other := key
	other[0] ^= 1
	if _, err := open(&other, idA); !errors.Is(err, wire.ErrAuth) || !strings.Contains(err.Error(), "wrong cluster key") {
		t.Errorf("HELLO under another key: %v", err)
	}
	if _, err := open(&key, idB); !errors.Is(err, wire.ErrAuth) || !strings.Contains(err.Error(), "not this one") {
		t.Errorf("HELLO to another node: %v", err)
	}
	first := decode(t, frames[0])
	if _, _, err := wire.OpenHello(&key, idA, &first); !errors.Is(err, wire.ErrAuth) {
		t.Errorf("a connection opened by a HEARTBEAT: %v", err)
	}

	cases := []struct {
		name  string
		order [][]byte
	}{
		{"replayed frame", [][]byte{frames[0], frames[0]}},
		{"reordered", [][]byte{frames[1], frames[0]}},
		{"dropped from the middle", [][]byte{frames[0], frames[2]}},
		{"HELLO replayed inside", [][]byte{frames[0], hello}},
		{"unsealed", [][]byte{frames[0], wire.Append(nil, &msgs[1])}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := open(&key, idA)
			if err != nil {
				t.Fatal(err)
			}
			var last error
			for _, b := range c.order {
				m := decode(t, b)
				last = v.Verify(&m)
			}
			if !errors.Is(last, wire.ErrAuth) {
				t.Errorf("last frame verified: %v", last)
			}
		})
	}

	// Every bit of a sealed frame matters: flip each one, fix the CRC so
	// that the frame decodes, and the tag must catch it (or the frame no
	// longer decodes at all).
	for bit := range (len(frames[1]) - wire.TrailerLen) * 8 {
		b := bytes.Clone(frames[1])
		b[bit/8] ^= 1 << (bit % 8)
		b = resum(b)
		var m wire.Message
		if _, err := wire.Decode(b, &m); err != nil {
			continue
		}
		v, _ := open(&key, idA)
		m0 := decode(t, frames[0])
		if err := v.Verify(&m0); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(&m); !errors.Is(err, wire.ErrAuth) {
			t.Fatalf("bit %d flipped: Verify = %v", bit, err)
		}
	}
}

// TestVerifierSeek checks that a reader missing frames finds the position
// of the next one it has, and that Seek back replays a position.
func TestVerifierSeek(t *testing.T) {
	key := testKey()
	msgs := []wire.Message{sample(wire.TypeHeartbeat), sample(wire.TypeCoordinator), sample(wire.TypeHeartbeat), sample(wire.TypeLeave)}
	hello, frames := connection(t, &key, idB, idA, msgs...)
	hm := decode(t, hello)
	v, _, err := wire.OpenHello(&key, idA, &hm)
	if err != nil {
		t.Fatal(err)
	}
	// Frames 1 and 2 are lost: frame 3 fails at 1 and 2 and verifies at 3.
	m := decode(t, frames[2])
	for i := uint64(1); i <= 3; i++ {
		v.Seek(i)
		err := v.Verify(&m)
		if (err == nil) != (i == 3) {
			t.Errorf("frame 3 checked as frame %d: %v", i, err)
		}
	}
	next := decode(t, frames[3])
	if err := v.Verify(&next); err != nil {
		t.Errorf("frame 4 after frame 3: %v", err)
	}
	v.Seek(1)
	first := decode(t, frames[0])
	if err := v.Verify(&first); err != nil {
		t.Errorf("frame 1 after Seek(1): %v", err)
	}
}

func TestSealAllocs(t *testing.T) {
	key := testKey()
	s, _ := wire.NewSealer(nil, &key, idB, wire.Hello{To: idA, Time: 1})
	m := sample(wire.TypeHeartbeat)
	plain := wire.Append(nil, &m)
	buf := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { buf = s.Seal(buf[:0], plain) }); n != 0 {
		t.Errorf("Seal allocates %v times per frame", n)
	}
	_, hb := wire.NewSealer(nil, &key, idB, wire.Hello{To: idA, Time: 1})
	hm := decode(t, hb)
	v, _, err := wire.OpenHello(&key, idA, &hm)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := wire.NewSealer(nil, &key, idB, wire.Hello{To: idA, Time: 1})
	frames := make([][]byte, 101)
	for i := range frames {
		frames[i] = s2.Seal(nil, plain)
	}
	i := 0
	var in wire.Message
	if n := testing.AllocsPerRun(100, func() {
		if _, err := wire.Decode(frames[i], &in); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(&in); err != nil {
			t.Fatal(err)
		}
		i++
	}); n != 0 {
		t.Errorf("Decode+Verify allocates %v times per frame", n)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	k, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cluster.key")
	if err := wire.WriteKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	got, err := wire.ReadKeyFile(path)
	if err != nil || got != k {
		t.Fatalf("ReadKeyFile = %v, want the written key", err)
	}
	if err := wire.WriteKeyFile(path, k); err == nil {
		t.Error("WriteKeyFile overwrote an existing key")
	}
	if s := k.String(); strings.Contains(s, k.Encode()) {
		t.Errorf("String() prints the key: %s", s)
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
		{"world readable", write("open.key", k.Encode(), 0o644), "mode 0644 lets other users read"},
		{"group writable", write("group.key", k.Encode(), 0o620), "chmod 600"},
		{"not base64", write("junk.key", "hello world", 0o600), "not a cluster key"},
		{"short", write("short.key", "AAAA", 0o600), "not a cluster key"},
		{"huge", write("huge.key", strings.Repeat("A", 1<<20), 0o600), "longer than"},
		{"missing", filepath.Join(dir, "none.key"), "no such file"},
		{"directory", dir, "not a regular file"},
		{"device", "/dev/zero", "not a regular file"},
	} {
		_, err := wire.ReadKeyFile(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: ReadKeyFile error %q, want one line naming the file and %q", c.name, err, c.want)
		}
	}
}

func FuzzParseKey(f *testing.F) {
	k := testKey()
	f.Add(k.Encode())
	f.Add(" " + k.Encode() + "\n")
	f.Add("AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := wire.ParseKey(s)
		if err != nil {
			if !errors.Is(err, wire.ErrKey) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseKey error %q", err)
			}
			return
		}
		if again, err := wire.ParseKey(k.Encode()); err != nil || again != k {
			t.Fatalf("key does not round-trip: %v", err)
		}
	})
}

// FuzzOpenHello feeds arbitrary first frames and later frames to an
// authenticated connection: nothing may panic, and nothing but a frame
// sealed under the key may verify.
func FuzzOpenHello(f *testing.F) {
	key := testKey()
	// A fixed nonce, not connection's random one: each fuzz worker process
	// runs this function and must seal the very HELLO of the seed corpus.
	s, hello := wire.NewSealer(nil, &key, idB, wire.Hello{To: idA, Time: 1700000000, Nonce: [16]byte{1, 2, 3}})
	hb := sample(wire.TypeHeartbeat)
	frames := [][]byte{s.Seal(nil, wire.Append(nil, &hb))}
	f.Add(hello, frames[0])
	f.Add(frames[0], hello)
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, first, next []byte) {
		var m wire.Message
		if _, err := wire.Decode(first, &m); err != nil {
			return
		}
		v, _, err := wire.OpenHello(&key, idA, &m)
		if err != nil {
			if !errors.Is(err, wire.ErrAuth) {
				t.Fatalf("OpenHello error %v does not wrap ErrAuth", err)
			}
			return
		}
		if !bytes.Equal(first[:wire.MinFrameLen+wire.HelloLen+wire.TagLen], hello) {
			t.Fatalf("a HELLO other than the sealed one verified: %x", first)
		}
		if _, err := wire.Decode(next, &m); err != nil {
			return
		}
		if err := v.Verify(&m); err == nil && !bytes.Equal(next[:len(frames[0])], frames[0]) {
			t.Fatalf("a frame other than the sealed one verified: %x", next)
		}
	})
}
