package node

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/google/uuid"
)

// A peers file lists one member per line:
//
//	# comments run from # to the end of the line
//	6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f  10.0.0.1:7946
//	0b7e9a51-3c2d-4f10-8e7a-5b6c7d8e9f01  node2.example.com:7946
//	c3a1f0de-7b62-4e35-a9d4-1e2f3a4b5c6d  [fd00::3]:7946  ed25519:8Jw4...=
//
// IDs are version-4 UUIDs in their 36-character form; addresses are
// host:port with a numeric port, and an IPv6 host in brackets. The third
// field, optional, is the member's public member key as `bullylab keygen
// --member` prints it (wire.EncodePublicKey): when any line gives one, a
// node requires every HELLO to be signed by its sender's member key
// (TCPConfig.PeerKeys). No ID, no address and no key may appear twice: a
// key two members share would let either sign as the other. The same
// list in a flag is comma-separated ID@host:port or ID@host:port@KEY
// entries.
//
// Addresses are returned in a canonical form (lowercase host name, IP in
// its shortest form, port without leading zeros), so that two spellings of
// one address count as duplicates and a formatted list parses back to
// exactly the same members.

// Peers is a parsed peers file or list.
type Peers struct {
	Members []wire.Member
	// From says where each member was given, for errors about it:
	// From[i] is "peers.txt:3" or "peer list entry 3" for Members[i].
	From []string
	// Keys are the member keys given, by ID (TCPConfig.PeerKeys); nil when
	// none is.
	Keys map[uuid.UUID]ed25519.PublicKey
}

// ParsePeersFile reads the peers file at path; its errors start with path.
func ParsePeersFile(path string) ([]wire.Member, error) {
	p, err := ReadPeersFile(path)
	return p.Members, err
}

// ParsePeersFileFrom is ParsePeersFile, and says where each member is in
// the file: from[i] is "path:line" for ms[i], for errors about a member
// (see ServeOptions.PeersFrom).
func ParsePeersFileFrom(path string) (ms []wire.Member, from []string, err error) {
	p, err := ReadPeersFile(path)
	return p.Members, p.From, err
}

// ReadPeersFile reads the peers file at path, member keys included; its
// errors start with path.
func ReadPeersFile(path string) (Peers, error) {
	f, err := os.Open(path)
	if err != nil {
		return Peers{}, fmt.Errorf("read peers: %w", err)
	}
	defer f.Close()
	return parsePeers(path, f)
}

// ParsePeers reads a peers file from r. name is the file name to report in
// errors, which look like "peers.txt:3: duplicate ID ... (first on line 1)".
func ParsePeers(name string, r io.Reader) ([]wire.Member, error) {
	p, err := parsePeers(name, r)
	return p.Members, err
}

func parsePeers(name string, r io.Reader) (Peers, error) {
	var set peerSet
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if line == 1 {
			// Editors on Windows start UTF-8 files with a byte order mark.
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		switch {
		case len(fields) == 0:
			continue
		case len(fields) == 1 && strings.Contains(fields[0], "@"):
			return Peers{}, fmt.Errorf("%s:%d: want `ID host:port [KEY]`, got %s (ID@host:port is the form for lists in flags)", name, line, bounded.Quote(fields[0]))
		case len(fields) != 2 && len(fields) != 3:
			return Peers{}, fmt.Errorf("%s:%d: want `ID host:port [KEY]`, got %d %s", name, line, len(fields), peerPlural(len(fields), "field"))
		}
		key := ""
		if len(fields) == 3 {
			key = fields[2]
		}
		if err := set.addText(fields[0], fields[1], key, fmt.Sprintf("on line %d", line), fmt.Sprintf("%s:%d", name, line)); err != nil {
			return Peers{}, fmt.Errorf("%s:%d: %v", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Peers{}, fmt.Errorf("%s:%d: line too long", name, line+1)
		}
		return Peers{}, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	return set.peers(), nil
}

// ParsePeerList parses the flag form: comma-separated ID@host:port entries,
// with optional spaces around each. An empty or all-blank s is no peers.
// Errors name the entry by its 1-based index and quote it.
func ParsePeerList(s string) ([]wire.Member, error) {
	p, err := ParsePeerListKeys(s)
	return p.Members, err
}

// ParsePeerListFrom is ParsePeerList, and says where each member is in the
// list: from[i] is "peer list entry N" for ms[i].
func ParsePeerListFrom(s string) (ms []wire.Member, from []string, err error) {
	p, err := ParsePeerListKeys(s)
	return p.Members, p.From, err
}

// ParsePeerListKeys is ParsePeerList with member keys: an entry may be
// ID@host:port@KEY.
func ParsePeerListKeys(s string) (Peers, error) {
	if strings.TrimSpace(s) == "" {
		return Peers{}, nil
	}
	var set peerSet
	for i, entry := range strings.Split(s, ",") {
		n := i + 1
		entry = strings.TrimSpace(entry)
		// An empty entry is more often an unset variable in "$A,$B" than a
		// stray comma, so it is not skipped.
		if entry == "" {
			return Peers{}, fmt.Errorf("peer list entry %d is empty", n)
		}
		idText, addrText, ok := strings.Cut(entry, "@")
		if !ok {
			return Peers{}, fmt.Errorf("peer list entry %d %s: want ID@host:port or ID@host:port@KEY", n, bounded.Quote(entry))
		}
		// A key is what follows the last @ when it names a key type, so
		// that a stray @ in an address is still reported as the address's.
		key := ""
		if i := strings.LastIndexByte(addrText, '@'); i >= 0 && wire.LooksLikePublicKey(addrText[i+1:]) {
			addrText, key = addrText[:i], addrText[i+1:]
		}
		if err := set.addText(idText, addrText, key, fmt.Sprintf("in entry %d", n), fmt.Sprintf("peer list entry %d", n)); err != nil {
			return Peers{}, fmt.Errorf("peer list entry %d %s: %v", n, bounded.Quote(entry), err)
		}
	}
	return set.peers(), nil
}

// FormatPeers writes ms in the peers file format. It checks ms as
// ParsePeers would and writes nothing if any member is invalid, so a tool
// cannot produce a file that nodes then refuse.
func FormatPeers(w io.Writer, ms []wire.Member) error {
	return FormatPeersKeys(w, ms, nil)
}

// FormatPeersKeys is FormatPeers with the members' keys: a member with one
// in keys gets it as its line's third field.
func FormatPeersKeys(w io.Writer, ms []wire.Member, keys map[uuid.UUID]ed25519.PublicKey) error {
	var set peerSet
	for i, m := range ms {
		if err := set.add(m.ID, m.Addr, keys[m.ID], fmt.Sprintf("as member %d", i+1), ""); err != nil {
			return fmt.Errorf("format peers: member %d: %v", i+1, err)
		}
	}
	bw := bufio.NewWriter(w)
	for _, m := range set.members {
		if k, ok := set.keys[m.ID]; ok {
			fmt.Fprintf(bw, "%s %s %s\n", m.ID, m.Addr, wire.EncodePublicKey(k))
		} else {
			fmt.Fprintf(bw, "%s %s\n", m.ID, m.Addr)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("format peers: %w", err)
	}
	return nil
}

// peerSet accumulates members and remembers where each ID, address and
// key was first seen, for duplicate errors.
type peerSet struct {
	members []wire.Member
	from    []string // from[i] says where members[i] was given
	ids     map[uuid.UUID]string
	addrs   map[string]string
	keys    map[uuid.UUID]ed25519.PublicKey
	keyAt   map[[ed25519.PublicKeySize]byte]string
}

func (ps *peerSet) peers() Peers {
	return Peers{Members: ps.members, From: ps.from, Keys: ps.keys}
}

// addText adds a member given as text; keyText is "" when no key is.
func (ps *peerSet) addText(idText, addrText, keyText, where, from string) error {
	// Only the 36-character form: uuid.Parse also takes the URN, braced and
	// bare-hex forms, which would make one ID look like several in a file.
	if len(idText) != 36 {
		return fmt.Errorf("bad ID %s: want a UUID like 6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f", bounded.Quote(idText))
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return fmt.Errorf("bad ID %s: want a UUID like 6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f", bounded.Quote(idText))
	}
	var key ed25519.PublicKey
	if keyText != "" {
		if key, err = wire.ParsePublicKey(keyText); err != nil {
			return fmt.Errorf("bad member key %s: %v", bounded.Quote(keyText), err)
		}
	}
	return ps.add(id, addrText, key, where, from)
}

// add adds a member, with its key unless key is nil; where says where it
// was given in the words of a duplicate's error ("on line 3"), from in
// those of a reference to it ("peers.txt:3").
func (ps *peerSet) add(id uuid.UUID, addrText string, key ed25519.PublicKey, where, from string) error {
	if why := election.IDProblem(id); why != "" {
		return fmt.Errorf("ID %s is not a version-4 UUID (%s)", id, why)
	}
	addr, err := canonicalPeerAddr(addrText)
	if err != nil {
		return err
	}
	if first, dup := ps.ids[id]; dup {
		return fmt.Errorf("duplicate ID %s (first %s)", id, first)
	}
	if first, dup := ps.addrs[addr]; dup {
		return fmt.Errorf("duplicate address %s (first %s)", addr, first)
	}
	if key != nil {
		if len(key) != ed25519.PublicKeySize {
			return fmt.Errorf("member key of %d bytes, want %d", len(key), ed25519.PublicKeySize)
		}
		if first, dup := ps.keyAt[[ed25519.PublicKeySize]byte(key)]; dup {
			return fmt.Errorf("duplicate member key %s (first %s): each member signs with its own", wire.EncodePublicKey(key), first)
		}
	}
	if ps.ids == nil {
		ps.ids = make(map[uuid.UUID]string)
		ps.addrs = make(map[string]string)
	}
	ps.ids[id] = where
	ps.addrs[addr] = where
	if key != nil {
		if ps.keys == nil {
			ps.keys = make(map[uuid.UUID]ed25519.PublicKey)
			ps.keyAt = make(map[[ed25519.PublicKeySize]byte]string)
		}
		ps.keys[id] = key
		ps.keyAt[[ed25519.PublicKeySize]byte(key)] = where
	}
	ps.members = append(ps.members, wire.Member{ID: id, Addr: addr})
	ps.from = append(ps.from, from)
	return nil
}

// CanonicalAddr checks that s is a host:port a peer can dial (an IP
// address or a host name, and a port 1-65535; not an unspecified address
// like 0.0.0.0) and returns it in the canonical form the peers file
// parsers return, so that two spellings of one address compare equal.
func CanonicalAddr(s string) (string, error) { return canonicalPeerAddr(s) }

// ParseID parses a node ID as flags and files give it: a version-4 UUID in
// its 36-character form. The nil UUID is refused like any other
// non-version-4 one: it is no node's ID. Errors quote s and say why.
func ParseID(s string) (uuid.UUID, error) {
	// Only the 36-character form: uuid.Parse also takes the URN, braced and
	// bare-hex forms, which the peers file does not.
	id, err := uuid.Parse(s)
	if len(s) != 36 || err != nil {
		return uuid.Nil, fmt.Errorf("%s: not a UUID (want a version-4 UUID like 6f1c2d3e-8a4b-4c5d-9e6f-0a1b2c3d4e5f)", bounded.Quote(s))
	}
	if why := election.IDProblem(id); why != "" {
		return uuid.Nil, fmt.Errorf("%s is not a version-4 UUID: %s", id, why)
	}
	return id, nil
}

// canonicalPeerAddr checks that s is an address a peer can dial and returns
// its canonical form.
func canonicalPeerAddr(s string) (string, error) {
	bad := func(why string) error { return fmt.Errorf("bad address %s: %s", bounded.Quote(s), why) }
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return "", bad(strings.TrimSuffix(ae.Err, " in address"))
		}
		return "", bad(err.Error())
	}
	port, why := peerPort(portText)
	if why != "" {
		return "", bad(why)
	}
	if host == "" {
		return "", bad("missing host")
	}
	bracketed := strings.HasPrefix(s, "[")
	if ip, err := netip.ParseAddr(host); err == nil {
		// SplitHostPort already refuses an IPv6 address without brackets.
		switch {
		case bracketed && !ip.Is6():
			return "", bad("brackets are only for IPv6 addresses")
		case ip.IsUnspecified():
			return "", bad(ip.String() + " is a listen address, not one a peer can dial")
		case !peerValidZone(ip.Zone()):
			return "", bad(fmt.Sprintf("bad zone %s", bounded.Quote(ip.Zone())))
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(port)), nil
	}
	if bracketed {
		return "", bad("brackets are only for IPv6 addresses")
	}
	name, why := peerHostName(host)
	if why != "" {
		return "", bad(why)
	}
	return net.JoinHostPort(name, strconv.Itoa(port)), nil
}

func peerPort(s string) (int, string) {
	if s == "" {
		return 0, "missing port"
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Sprintf("port %s is not a number", bounded.Quote(s))
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Sprintf("port %s out of range 1-65535", s)
	}
	return n, ""
}

// peerHostName checks a DNS name (RFC 1123 letters, digits and hyphens, plus
// the underscores that container runtimes put in service names) and returns
// it in lowercase, since DNS names are case-insensitive.
func peerHostName(host string) (string, string) {
	name := strings.TrimSuffix(host, ".")
	if len(name) == 0 || len(name) > 253 {
		return "", fmt.Sprintf("host name of %d characters, want 1-253", len(name))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", fmt.Sprintf("host name %s has an empty or over-long label", bounded.Quote(host))
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", fmt.Sprintf("host name %s has a label that starts or ends with '-'", bounded.Quote(host))
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Sprintf("host name %s contains %s", bounded.Quote(host), bounded.Quote(string([]byte{c})))
			}
		}
	}
	// A resolver would look up "10.0.0.256" or "010.0.0.1" as a name and
	// fail late and confusingly; a top-level label is never all digits.
	if last := labels[len(labels)-1]; strings.Trim(last, "0123456789") == "" {
		return "", fmt.Sprintf("%s is not a valid IPv4 address", bounded.Quote(host))
	}
	return strings.ToLower(host), ""
}

// peerValidZone keeps zones to characters that interface names use, so that
// a zone cannot smuggle a '#', ',' or '@' into the file or flag formats.
func peerValidZone(z string) bool {
	for i := 0; i < len(z); i++ {
		c := z[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func peerPlural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// NewIDs draws n version-4 UUIDs and sorts them, Bully priority
// ascending, so that the i-th goes to a topology's i-th node. A seed other
// than 0 draws them from an RNG seeded with it, reproducibly; 0 draws them
// from crypto/rand.
func NewIDs(n int, seed int64) ([]uuid.UUID, error) {
	var r io.Reader = crand.Reader
	if seed != 0 {
		var s [32]byte
		binary.LittleEndian.PutUint64(s[:], uint64(seed))
		r = rand.NewChaCha8(s)
	}
	ids := make([]uuid.UUID, n)
	for i := range ids {
		id, err := uuid.NewRandomFromReader(r)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for i := 1; i < n; i++ {
		if ids[i] == ids[i-1] {
			return nil, fmt.Errorf("drew %s twice", ids[i])
		}
	}
	return ids, nil
}
