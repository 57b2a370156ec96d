package node

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

const (
	v1ID      = "c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d"
	variantID = "c3a1f0de-7b62-4e35-c9d4-1e2f3a4b5c6d"
)

func TestParsePeersFile(t *testing.T) {
	text := "\uFEFF# cluster of three\r\n" +
		"\n" +
		idA.String() + "  10.0.0.1:7946\r\n" +
		"   # indented comment\n" +
		strings.ToUpper(idB.String()) + "\tNode2.Example.COM:07946   # trailing comment\n" +
		idC.String() + " [FD00:0:0::3]:7946" // no final newline
	path := filepath.Join(t.TempDir(), "peers.txt")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ParsePeersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.Member{
		{ID: idA, Addr: "10.0.0.1:7946"},
		{ID: idB, Addr: "node2.example.com:7946"},
		{ID: idC, Addr: "[fd00::3]:7946"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ParsePeersFile = %v; want %v", got, want)
	}

	for _, empty := range []string{"", "\n\n", "# nobody yet\n"} {
		if got, err := ParsePeers("p", strings.NewReader(empty)); err != nil || len(got) != 0 {
			t.Errorf("ParsePeers(%q) = %v, %v; want no peers", empty, got, err)
		}
	}

	missing := filepath.Join(t.TempDir(), "nope.txt")
	if _, err := ParsePeersFile(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ParsePeersFile(missing) = %v", err)
	}
}

func TestParsePeersErrors(t *testing.T) {
	a, b, c := idA.String(), idB.String(), idC.String()
	for _, tc := range []struct {
		text, want string
	}{
		// The messages the command line shows, in full.
		{a + " h1:1\n" + b + " h2:1\n" + a + " h3:1\n", "peers.txt:3: duplicate ID " + a + " (first on line 1)"},
		{"# x\n" + a + " foo\n", `peers.txt:2: bad address "foo": missing port`},
		{"\n\n\n" + v1ID + " h:1\n", "peers.txt:4: ID " + v1ID + " is not a version-4 UUID (it is version 1)"},
		{"#\n#\n#\n#\n" + a + " h:1 extra\n", `peers.txt:5: bad member key "extra": not a member key: want ed25519:BASE64`},
		{a + " h:1 " + keyA + " extra\n", "peers.txt:1: want `ID host:port [KEY]`, got 4 fields"},
		{a + "\n", "peers.txt:1: want `ID host:port [KEY]`, got 1 field"},
		{a + " h:1 ed25519:AAAA\n", `peers.txt:1: bad member key "ed25519:AAAA": not a member key: want 44 base64 characters after ed25519: for a 32-byte public key`},
		{a + " h:1 " + keyA + "\n" + b + " h:2 " + keyA + "\n", "peers.txt:2: duplicate member key " + keyA + " (first on line 1)"},
		{a + " h:1\n" + b + " h:1\n", "peers.txt:2: duplicate address h:1 (first on line 1)"},
		{a + " Host:080\n" + b + " host:80\n", "peers.txt:2: duplicate address host:80 (first on line 1)"},
		{a + " [::1]:80\n" + b + " [0:0::1]:80\n", "peers.txt:2: duplicate address [::1]:80 (first on line 1)"},
		{a + "@h:1\n", "peers.txt:1: want `ID host:port [KEY]`, got \"" + a + "@h:1\" (ID@host:port is the form for lists in flags)"},
		{variantID + " h:1\n", "peers.txt:1: ID " + variantID + " is not a version-4 UUID (its variant is Microsoft)"},
		{uuid.Nil.String() + " h:1\n", "peers.txt:1: ID " + uuid.Nil.String() + " is not a version-4 UUID (it is the nil UUID)"},
		{"node1 h:1\n", `peers.txt:1: bad ID "node1": want a UUID like 6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f`},
		{"{" + a + "} h:1\n", `peers.txt:1: bad ID "{` + a + `}": want a UUID like 6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f`},
		{strings.Replace(a, "-", "x", 1) + " h:1\n", "peers.txt:1: bad ID"},
		{c + " h:0\n", `peers.txt:1: bad address "h:0": port 0 out of range 1-65535`},
		{c + " h:65536\n", `peers.txt:1: bad address "h:65536": port 65536 out of range 1-65535`},
		{c + " h:99999999999999999999\n", `port 99999999999999999999 out of range`},
		{c + " h:http\n", `peers.txt:1: bad address "h:http": port "http" is not a number`},
		{c + " h:+80\n", `port "+80" is not a number`},
		{c + " h:\n", `peers.txt:1: bad address "h:": missing port`},
		{c + " :80\n", `peers.txt:1: bad address ":80": missing host`},
		{c + " ::1:80\n", `peers.txt:1: bad address "::1:80": too many colons`},
		{c + " [::1:80\n", `peers.txt:1: bad address "[::1:80": missing ']'`},
		{c + " [10.0.0.1]:80\n", `peers.txt:1: bad address "[10.0.0.1]:80": brackets are only for IPv6 addresses`},
		{c + " [host]:80\n", `brackets are only for IPv6 addresses`},
		{c + " 0.0.0.0:80\n", `peers.txt:1: bad address "0.0.0.0:80": 0.0.0.0 is a listen address, not one a peer can dial`},
		{c + " [::]:80\n", `:: is a listen address`},
		{c + " 10.0.0.256:80\n", `peers.txt:1: bad address "10.0.0.256:80": "10.0.0.256" is not a valid IPv4 address`},
		{c + " 010.0.0.1:80\n", `is not a valid IPv4 address`},
		{c + " a..b:80\n", `empty or over-long label`},
		{c + " -a.b:80\n", `starts or ends with '-'`},
		{c + " a/b:80\n", `host name "a/b" contains "/"`},
		{c + " h\xff:80\n", `contains "\xff"`},
		{c + " [fe80::1%a,b]:80\n", `bad zone "a,b"`},
		{c + " " + strings.Repeat("a", 64) + ":80\n", `empty or over-long label`},
		{c + " " + strings.Repeat("a.", 127) + "a:80\n", `host name of 255 characters`},
		{c + " h:1\n" + strings.Repeat("x", 70000) + "\n", "peers.txt:2: line too long"},
	} {
		_, err := ParsePeers("peers.txt", strings.NewReader(tc.text))
		if err == nil {
			t.Errorf("ParsePeers(%q) succeeded; want %q", tc.text, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePeers(%q) = %q; want %q", tc.text, err, tc.want)
		}
		checkOneLine(t, err)
	}
}

func TestParsePeersAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:1":         "localhost:1",
		"node_1.svc:65535":    "node_1.svc:65535",
		"host.example.:7946":  "host.example.:7946",
		"127.0.0.1:7946":      "127.0.0.1:7946",
		"[::1]:7946":          "[::1]:7946",
		"[::FFFF:1.2.3.4]:80": "[::ffff:1.2.3.4]:80",
		"[fe80::1%eth0]:80":   "[fe80::1%eth0]:80",
		"x1:00001":            "x1:1",
	} {
		got, err := ParsePeerList(idA.String() + "@" + in)
		if err != nil || len(got) != 1 || got[0].Addr != want {
			t.Errorf("address %q: got %v, %v; want %q", in, got, err, want)
		}
	}
}

func TestParsePeerList(t *testing.T) {
	got, err := ParsePeerList(" " + idA.String() + "@10.0.0.1:7946, " + idB.String() + "@[fd00::2]:7946 ,")
	if err == nil {
		t.Fatalf("trailing comma accepted: %v", got)
	}
	if want := "peer list entry 3 is empty"; err.Error() != want {
		t.Errorf("trailing comma: %q; want %q", err, want)
	}

	got, err = ParsePeerList(" " + idA.String() + "@10.0.0.1:7946, " + idB.String() + "@[fd00::2]:7946 ")
	want := []wire.Member{{ID: idA, Addr: "10.0.0.1:7946"}, {ID: idB, Addr: "[fd00::2]:7946"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParsePeerList = %v, %v; want %v", got, err, want)
	}
	for _, blank := range []string{"", "  "} {
		if got, err := ParsePeerList(blank); got != nil || err != nil {
			t.Errorf("ParsePeerList(%q) = %v, %v; want nil, nil", blank, got, err)
		}
	}

	a, b := idA.String(), idB.String()
	for _, tc := range []struct{ in, want string }{
		{a + "@h:1,," + b + "@h:2", "peer list entry 2 is empty"},
		{a + "@h:1," + b + " h:2", `peer list entry 2 "` + b + ` h:2": want ID@host:port`},
		{a + "@h:1," + b + "@h:2," + a + "@h:3", `peer list entry 3 "` + a + `@h:3": duplicate ID ` + a + " (first in entry 1)"},
		{a + "@h:1," + b + "@H:1", `peer list entry 2 "` + b + `@H:1": duplicate address h:1 (first in entry 1)`},
		{a + "@h", `peer list entry 1 "` + a + `@h": bad address "h": missing port`},
		{a + "@h@x:1", `peer list entry 1 "` + a + `@h@x:1": bad address "h@x:1": host name "h@x" contains "@"`},
		{v1ID + "@h:1", "peer list entry 1 \"" + v1ID + "@h:1\": ID " + v1ID + " is not a version-4 UUID (it is version 1)"},
		{"nodeA@h:1", `peer list entry 1 "nodeA@h:1": bad ID "nodeA"`},
		{strings.Repeat("x", 200), `peer list entry 1 "` + strings.Repeat("x", 64) + `"... (200 bytes): want ID@host:port`},
	} {
		_, err := ParsePeerList(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePeerList(%q) = %v; want %q", tc.in, err, tc.want)
			continue
		}
		checkOneLine(t, err)
	}
}

func TestFormatPeers(t *testing.T) {
	ms := []wire.Member{
		{ID: idC, Addr: "node3.example.com:7946"},
		{ID: idA, Addr: "[FD00::1]:7946"},
		{ID: idB, Addr: "10.0.0.2:7946"},
	}
	var buf bytes.Buffer
	if err := FormatPeers(&buf, ms); err != nil {
		t.Fatal(err)
	}
	wantText := idC.String() + " node3.example.com:7946\n" + idA.String() + " [fd00::1]:7946\n" + idB.String() + " 10.0.0.2:7946\n"
	if buf.String() != wantText {
		t.Errorf("FormatPeers wrote %q; want %q", buf.String(), wantText)
	}
	got, err := ParsePeers("gen", &buf)
	if err != nil {
		t.Fatal(err)
	}
	ms[1].Addr = "[fd00::1]:7946"
	if !slices.Equal(got, ms) {
		t.Errorf("round trip = %v; want %v", got, ms)
	}

	for _, bad := range [][]wire.Member{
		{{ID: idA, Addr: "h:1"}, {ID: idB, Addr: "nope"}},
		{{ID: idA, Addr: "h:1"}, {ID: idA, Addr: "h:2"}},
		{{ID: uuid.Nil, Addr: "h:1"}},
		{{ID: idA, Addr: "h#x:1"}},
	} {
		buf.Reset()
		err := FormatPeers(&buf, bad)
		if err == nil || buf.Len() != 0 {
			t.Errorf("FormatPeers(%v) = %v, wrote %q; want an error and nothing written", bad, err, buf.String())
		}
	}
}

// checkAcceptedPeers checks what a parser accepted without trusting its
// helpers, then that formatting and parsing again is the identity.
func checkAcceptedPeers(t *testing.T, ms []wire.Member) {
	t.Helper()
	ids := map[uuid.UUID]bool{}
	addrs := map[string]bool{}
	for _, m := range ms {
		if m.ID.Version() != 4 || m.ID.Variant() != uuid.RFC4122 {
			t.Fatalf("accepted ID %v is not a version-4 UUID", m.ID)
		}
		host, port, err := net.SplitHostPort(m.Addr)
		if err != nil || host == "" {
			t.Fatalf("accepted address %q: %v", m.Addr, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			t.Fatalf("accepted address %q has port %q", m.Addr, port)
		}
		if strings.ContainsAny(m.Addr, " \t\r\n#,@") {
			t.Fatalf("accepted address %q contains a separator", m.Addr)
		}
		if ids[m.ID] || addrs[m.Addr] {
			t.Fatalf("accepted a duplicate: %v", m)
		}
		ids[m.ID], addrs[m.Addr] = true, true
	}

	var buf bytes.Buffer
	if err := FormatPeers(&buf, ms); err != nil {
		t.Fatalf("FormatPeers of accepted list: %v", err)
	}
	again, err := ParsePeers("formatted", &buf)
	if err != nil {
		t.Fatalf("reparse of formatted list: %v", err)
	}
	if !slices.Equal(ms, again) {
		t.Fatalf("file round trip changed %v into %v", ms, again)
	}

	entries := make([]string, len(ms))
	for i, m := range ms {
		entries[i] = m.ID.String() + "@" + m.Addr
	}
	again, err = ParsePeerList(strings.Join(entries, ","))
	if err != nil {
		t.Fatalf("reparse as list: %v", err)
	}
	if !slices.Equal(ms, again) {
		t.Fatalf("list round trip changed %v into %v", ms, again)
	}
}

func FuzzParsePeers(f *testing.F) {
	f.Add("# peers\n" + idA.String() + " 10.0.0.1:7946\n" + idB.String() + " [fd00::2]:7946 # two\n")
	f.Add(idC.String() + " Node3.Example.com:07946\r\n")
	f.Add(idA.String() + " [fe80::1%eth0]:1\n\n")
	f.Add(idA.String() + " h:1\n" + idA.String() + " h:2\n")
	f.Add(idA.String() + " h:1 " + keyA + "\n" + idB.String() + " h:2\n" + idC.String() + " h:3 " + keyC + "\n")
	f.Add(idA.String() + " h:1 " + keyA + "\n" + idB.String() + " h:2 " + keyA + "\n")
	f.Add(idA.String() + " h:1 ed25519:\n")
	f.Add("x y z\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := parsePeers("fuzz", strings.NewReader(text))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") || strings.Contains(err.Error(), "\n") || len(err.Error()) > 1024 {
				t.Fatalf("error %.2000q does not name the file, spans lines or is long", err)
			}
			return
		}
		checkAcceptedPeers(t, p.Members)
		checkFrom(t, p.Members, p.From, "fuzz:")
		checkPeerKeys(t, p)
	})
}

func FuzzParsePeerList(f *testing.F) {
	f.Add(idA.String() + "@10.0.0.1:7946," + idB.String() + "@[fd00::2]:7946")
	f.Add(" " + idC.String() + "@HOST:08080 ")
	f.Add(idA.String() + "@[fe80::1%lo]:9")
	f.Add("a@b:1,,")
	f.Add(idA.String() + "@10.0.0.1:7946@" + keyA + "," + idB.String() + "@[fd00::2]:7946")
	f.Add(idA.String() + "@h:1@" + keyA + "@x")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePeerListKeys(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "peer list entry ") || strings.Contains(err.Error(), "\n") || len(err.Error()) > 1024 {
				t.Fatalf("error %.2000q does not name the entry, spans lines or is long", err)
			}
			return
		}
		checkAcceptedPeers(t, p.Members)
		checkFrom(t, p.Members, p.From, "peer list entry ")
		checkPeerKeys(t, p)
	})
}

func TestParseID(t *testing.T) {
	if id, err := ParseID(idA.String()); err != nil || id != idA {
		t.Fatalf("ParseID(%s) = %v, %v", idA, id, err)
	}
	if id, err := ParseID(strings.ToUpper(idA.String())); err != nil || id != idA {
		t.Fatalf("ParseID(upper case) = %v, %v", id, err)
	}
	for in, want := range map[string]string{
		"":                                      `"": not a UUID`,
		"nope":                                  `"nope": not a UUID`,
		"urn:uuid:" + idA.String():              "not a UUID",
		"{" + idA.String() + "}":                "not a UUID",
		uuid.Nil.String():                       "00000000-0000-0000-0000-000000000000 is not a version-4 UUID: it is the nil UUID",
		"c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d":  "is not a version-4 UUID: it is version 1",
		"c3a1f0de-7b62-4e35-c9d4-1e2f3a4b5c6d":  "is not a version-4 UUID: its variant is",
		"ffffffff-ffff-ffff-ffff-ffffffffffff":  "is not a version-4 UUID",
		"6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5\n": "not a UUID",
	} {
		id, err := ParseID(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseID(%q) = %v, %v; want one line containing %q", in, id, err, want)
		}
	}
}

func FuzzParseID(f *testing.F) {
	f.Add(idA.String())
	f.Add(uuid.Nil.String())
	f.Add("c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d")
	f.Add("urn:uuid:" + idB.String())
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if id != uuid.Nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseID(%q) = %v, %q", s, id, err)
			}
			return
		}
		if election.IDProblem(id) != "" || !strings.EqualFold(id.String(), s) {
			t.Fatalf("ParseID(%q) accepted %v", s, id)
		}
	})
}

// checkFrom checks that from names a distinct place, with prefix, for each
// member.
func checkFrom(t *testing.T, ms []wire.Member, from []string, prefix string) {
	t.Helper()
	if len(from) != len(ms) {
		t.Fatalf("%d members, %d places", len(ms), len(from))
	}
	seen := map[string]bool{}
	for _, f := range from {
		if !strings.HasPrefix(f, prefix) || seen[f] {
			t.Fatalf("places %q: want distinct ones starting %q", from, prefix)
		}
		seen[f] = true
	}
}

func TestPeersFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peers.txt")
	text := "# cluster\n" + idA.String() + " 10.0.0.1:1\n\n" + idB.String() + " 10.0.0.2:1 # b\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, from, err := ParsePeersFileFrom(path)
	if err != nil || !slices.Equal(from, []string{path + ":2", path + ":4"}) {
		t.Errorf("ParsePeersFileFrom = %q, %v", from, err)
	}
	_, from, err = ParsePeerListFrom(idA.String() + "@10.0.0.1:1, " + idB.String() + "@10.0.0.2:1")
	if err != nil || !slices.Equal(from, []string{"peer list entry 1", "peer list entry 2"}) {
		t.Errorf("ParsePeerListFrom = %q, %v", from, err)
	}
}

// A seed reproduces the IDs; they ascend, so that index is priority.
func TestNewIDs(t *testing.T) {
	a, err := NewIDs(50, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewIDs(50, 42)
	c, _ := NewIDs(50, 43)
	if !slices.Equal(a, b) {
		t.Error("the same seed drew different IDs")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds drew the same IDs")
	}
	for i, id := range a {
		if id.Version() != 4 || id.Variant() != uuid.RFC4122 {
			t.Errorf("ID %s is not a version-4 UUID", id)
		}
		if i > 0 && !election.Less(a[i-1], id) {
			t.Errorf("IDs not ascending at %d: %s then %s", i, a[i-1], id)
		}
	}
	if r, _ := NewIDs(3, 0); len(r) != 3 {
		t.Errorf("unseeded: %v", r)
	}
}

var (
	privA, privB, privC = testMemberKey(1), testMemberKey(2), testMemberKey(3)
	keyA                = wire.EncodePublicKey(privA.Public().(ed25519.PublicKey))
	keyC                = wire.EncodePublicKey(privC.Public().(ed25519.PublicKey))
)

// testMemberKey is a fixed member key, the same in every fuzz worker.
func testMemberKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

// checkPeerKeys checks that p's keys are of its members, each its own, and
// that p formats and parses back to itself.
func checkPeerKeys(t *testing.T, p Peers) {
	t.Helper()
	seen := map[string]bool{}
	for id, k := range p.Keys {
		if !slices.ContainsFunc(p.Members, func(m wire.Member) bool { return m.ID == id }) {
			t.Fatalf("key for %s, which is not a member", id)
		}
		if len(k) != ed25519.PublicKeySize || seen[string(k)] {
			t.Fatalf("key %x of %s is the wrong size or another member's too", k, id)
		}
		seen[string(k)] = true
	}
	var buf bytes.Buffer
	if err := FormatPeersKeys(&buf, p.Members, p.Keys); err != nil {
		t.Fatalf("FormatPeersKeys of accepted peers: %v", err)
	}
	again, err := parsePeers("formatted", &buf)
	if err != nil || !slices.Equal(again.Members, p.Members) || len(again.Keys) != len(p.Keys) {
		t.Fatalf("round trip: %v, %v; want %v", again, err, p)
	}
	for id, k := range p.Keys {
		if !again.Keys[id].Equal(k) {
			t.Fatalf("round trip changed the key of %s", id)
		}
	}
}

func TestParsePeersKeys(t *testing.T) {
	text := idA.String() + " 10.0.0.1:7946 " + keyA + "\n" +
		idB.String() + " 10.0.0.2:7946\n" + // a member without a key
		idC.String() + "\t10.0.0.3:7946\t" + keyC + "  # c\n"
	path := filepath.Join(t.TempDir(), "peers.txt")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := ReadPeersFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Members) != 3 || len(p.Keys) != 2 || !p.Keys[idA].Equal(privA.Public()) || !p.Keys[idC].Equal(privC.Public()) || p.Keys[idB] != nil {
		t.Fatalf("ReadPeersFile = %+v", p)
	}
	checkPeerKeys(t, p)
	// The member list alone, as before keys.
	if ms, err := ParsePeersFile(path); err != nil || !slices.Equal(ms, p.Members) {
		t.Errorf("ParsePeersFile = %v, %v", ms, err)
	}
	var buf bytes.Buffer
	if err := FormatPeersKeys(&buf, p.Members, p.Keys); err != nil {
		t.Fatal(err)
	}
	want := idA.String() + " 10.0.0.1:7946 " + keyA + "\n" + idB.String() + " 10.0.0.2:7946\n" + idC.String() + " 10.0.0.3:7946 " + keyC + "\n"
	if buf.String() != want {
		t.Errorf("FormatPeersKeys wrote %q; want %q", buf.String(), want)
	}
	// Without keys: Keys is nil, which a transport takes as none required.
	if p, err := parsePeers("p", strings.NewReader(idA.String()+" h:1\n")); err != nil || p.Keys != nil {
		t.Errorf("peers without keys: %+v, %v", p, err)
	}

	l, err := ParsePeerListKeys(idA.String() + "@10.0.0.1:7946@" + keyA + ", " + idB.String() + "@10.0.0.2:7946")
	if err != nil || len(l.Members) != 2 || len(l.Keys) != 1 || !l.Keys[idA].Equal(privA.Public()) {
		t.Fatalf("ParsePeerListKeys = %+v, %v", l, err)
	}
	for in, want := range map[string]string{
		idA.String() + "@h:1@ed25519:AAAA":                                  `peer list entry 1 "` + idA.String() + `@h:1@ed25519:AAAA": bad member key "ed25519:AAAA": not a member key`,
		idA.String() + "@h:1@" + keyA + "@x":                                `bad address "h:1@` + keyA + `@x"`,
		idA.String() + "@h:1@" + keyA + ",x@y":                              "peer list entry 2 ",
		idA.String() + "@h:1@" + keyA + "," + idB.String() + "@h:2@" + keyA: "duplicate member key " + keyA + " (first in entry 1)",
	} {
		_, err := ParsePeerListKeys(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePeerListKeys(%q) = %v; want %q", in, err, want)
		}
	}
}
