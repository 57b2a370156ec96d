package capture

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// ngFile writes pcapng blocks in either byte order, including the ones
// this package's Writer never writes, so that the reader can be checked
// on what other programs write.
type ngFile struct {
	bytes.Buffer
	order binary.AppendByteOrder
}

func (w *ngFile) opt(code uint16, val []byte) []byte {
	b := w.order.AppendUint16(nil, code)
	b = w.order.AppendUint16(b, uint16(len(val)))
	b = append(b, val...)
	return append(b, make([]byte, (4-len(val)%4)%4)...)
}

func (w *ngFile) block(typ uint32, fixed []byte, opts ...[]byte) {
	body := append([]byte(nil), fixed...)
	body = append(body, make([]byte, (4-len(body)%4)%4)...)
	if len(opts) > 0 {
		for _, o := range opts {
			body = append(body, o...)
		}
		body = append(body, 0, 0, 0, 0)
	}
	n := uint32(12 + len(body))
	w.Write(w.order.AppendUint32(w.order.AppendUint32(nil, typ), n))
	w.Write(body)
	w.Write(w.order.AppendUint32(nil, n))
}

func (w *ngFile) section(opts ...[]byte) {
	b := w.order.AppendUint32(nil, ngByteOrderMagic)
	b = w.order.AppendUint16(b, 1)
	b = w.order.AppendUint16(b, 0)
	b = w.order.AppendUint64(b, ^uint64(0))
	w.block(ngSectionHeader, b, opts...)
}

func (w *ngFile) iface(link uint16, snap uint32, opts ...[]byte) {
	b := w.order.AppendUint16(nil, link)
	b = w.order.AppendUint16(b, 0)
	b = w.order.AppendUint32(b, snap)
	w.block(ngInterfaceDesc, b, opts...)
}

func (w *ngFile) enhanced(iface uint32, ts uint64, data []byte, orig uint32, opts ...[]byte) {
	b := w.order.AppendUint32(nil, iface)
	b = w.order.AppendUint32(b, uint32(ts>>32))
	b = w.order.AppendUint32(b, uint32(ts))
	b = w.order.AppendUint32(b, uint32(len(data)))
	b = w.order.AppendUint32(b, orig)
	w.block(ngEnhancedPacket, append(b, data...), opts...)
}

func (w *ngFile) obsolete(iface uint16, ts uint64, data []byte) {
	b := w.order.AppendUint16(nil, iface)
	b = w.order.AppendUint16(b, 0)
	b = w.order.AppendUint32(b, uint32(ts>>32))
	b = w.order.AppendUint32(b, uint32(ts))
	b = w.order.AppendUint32(b, uint32(len(data)))
	b = w.order.AppendUint32(b, uint32(len(data)))
	w.block(ngObsoletePacket, append(b, data...))
}

func (w *ngFile) simple(data []byte, orig uint32) {
	w.block(ngSimplePacket, append(w.order.AppendUint32(nil, orig), data...))
}

func (w *ngFile) stats(iface uint32) {
	b := w.order.AppendUint32(nil, iface)
	b = w.order.AppendUint64(b, 0)
	w.block(ngInterfaceStatistics, b, w.opt(4, w.order.AppendUint64(nil, 7)))
}

// ngOddFile is a file of everything the reader handles beyond what this
// package writes: two sections of the given byte order and its opposite,
// several interfaces with microsecond, nanosecond, binary and offset
// timestamps, simple and obsolete packet blocks, statistics, name
// resolution, custom and unknown blocks, and comments.
func ngOddFile(order binary.AppendByteOrder) []byte {
	w := &ngFile{order: order}
	w.section(w.opt(4, []byte("another writer")))
	w.iface(1, 0)                              // no if_tsresol: microseconds
	w.block(4, []byte{0, 0, 0, 0})             // name resolution: no records
	w.block(0x40000BAD, []byte("custom data")) // custom, copiable
	w.iface(101, 96, w.opt(ngOptIfName, []byte("raw")), w.opt(ngOptIfDesc, []byte("bullylab node n1 index=1")),
		w.opt(ngOptIfTsresol, []byte{9}))
	w.iface(1, 0, w.opt(ngOptIfTsresol, []byte{0x80 | 20}), w.opt(ngOptIfTsoff, w.order.AppendUint64(nil, 1700000000)))
	w.enhanced(0, 1_700_000_000_123_456, []byte("first packet"), 40)
	w.enhanced(1, 1_700_000_000_123_456_789, []byte("second, with comments"), 21,
		w.opt(ngOptComment, []byte("one")), w.opt(2, w.order.AppendUint32(nil, 1)), w.opt(ngOptComment, []byte("two")))
	w.enhanced(2, 3<<20+5, []byte{}, 0)
	spb := []byte("simple packet; its interface has no snap length")
	w.simple(spb, uint32(len(spb)))
	w.obsolete(1, 42, []byte("obsolete"))
	w.block(0x12345678, []byte("unknown block type"))
	w.stats(2)
	w.stats(0)

	other := binary.AppendByteOrder(binary.BigEndian)
	if order == binary.BigEndian {
		other = binary.LittleEndian
	}
	w.order = other
	w.section()
	w.iface(1, 8)
	w.simple([]byte("longer than the snap length"), 27)
	w.enhanced(0, 99, []byte("section two"), 11)
	w.stats(0)
	return w.Bytes()
}

// ngTestFiles are the captures the reader is compared on: this package's
// own (a synthetic run with records, a hard mix, gzip-compressed) and
// other writers'.
func ngTestFiles(t testing.TB) map[string][]byte {
	var run bytes.Buffer
	s := newSynth(t, &run, 4, 5)
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(0, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 3)
	s.crash(leader)
	s.close(t)
	path, _ := writeHardMix(t, t.TempDir(), 8, 2000)
	hard, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(hard)
	zw.Close()
	return map[string][]byte{
		"run": run.Bytes(), "hardmix": hard, "hardmix.gz": gz.Bytes(),
		"odd little-endian": ngOddFile(binary.LittleEndian), "odd big-endian": ngOddFile(binary.BigEndian),
	}
}

// ngPacketSeen is a packet as either reader returned it; iface is
// numbered within its section, as gopacket's reader numbers it.
type ngPacketSeen struct {
	data                []byte
	ci                  gopacket.CaptureInfo
	comments            []string
	name, desc          string
	link                uint16
	unixNano, unixFloor int64
}

// readGopacket reads data with gopacket's reader: its packets, and the
// error that ended them (io.EOF at a clean end). It recovers from a
// panic, which it reports as an error.
func readGopacket(data []byte, limit int) (out []ngPacketSeen, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errors.New("gopacket panicked")
		}
	}()
	ng, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		return nil, err
	}
	for len(out) < limit {
		d, ci, opts, err := ng.ReadPacketDataWithOptions()
		if err != nil {
			return out, err
		}
		ifc, _ := ng.Interface(ci.InterfaceIndex)
		ci.AncillaryData = nil
		out = append(out, ngPacketSeen{data: d, ci: ci, comments: opts.Comments, name: ifc.Name, desc: ifc.Description,
			link: uint16(ifc.LinkType), unixNano: ci.Timestamp.UnixNano(), unixFloor: ci.Timestamp.Unix()})
	}
	return out, nil
}

// readOurs reads data with ngReader, as readGopacket does.
func readOurs(data []byte, limit int) (out []ngPacketSeen, err error) {
	ng, err := newNgReader(bytes.NewReader(data), 4096)
	if err != nil {
		return nil, err
	}
	for len(out) < limit {
		var ci gopacket.CaptureInfo
		d, comments, err := ng.next(&ci)
		if err != nil {
			return out, err
		}
		ifc := ng.ifaces[ci.InterfaceIndex]
		ci.InterfaceIndex -= ng.section
		out = append(out, ngPacketSeen{data: slices.Clone(d), ci: ci, comments: comments, name: ifc.name, desc: ifc.description,
			link: uint16(ifc.linkType), unixNano: ci.Timestamp.UnixNano(), unixFloor: ci.Timestamp.Unix()})
	}
	return out, nil
}

// samePackets reports the first packet where a and b differ, -1 if none.
func samePackets(a, b []ngPacketSeen) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) {
			return i
		}
		x, y := a[i], b[i]
		if !bytes.Equal(x.data, y.data) || !x.ci.Timestamp.Equal(y.ci.Timestamp) || x.ci.Timestamp.Location() != y.ci.Timestamp.Location() ||
			x.unixNano != y.unixNano || x.unixFloor != y.unixFloor || x.ci.CaptureLength != y.ci.CaptureLength ||
			x.ci.Length != y.ci.Length || x.ci.InterfaceIndex != y.ci.InterfaceIndex || !slices.Equal(x.comments, y.comments) ||
			x.name != y.name || x.desc != y.desc || x.link != y.link {
			return i
		}
	}
	return -1
}

// TestNgReaderMatchesGopacket reads each test capture with ngReader and
// with gopacket's reader, which this package used before: every packet
// must come out the same, and both must end cleanly after the last.
func TestNgReaderMatchesGopacket(t *testing.T) {
	files := ngTestFiles(t)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data := files[name]
		want, wantErr := readGopacket(data, 1<<30)
		got, err := readOurs(data, 1<<30)
		if wantErr != io.EOF || err != io.EOF {
			t.Errorf("%s: gopacket ended with %v, ngReader with %v", name, wantErr, err)
		}
		if len(want) < 5 {
			t.Errorf("%s: only %d packets", name, len(want))
		}
		if i := samePackets(got, want); i >= 0 {
			t.Errorf("%s: packet %d differs (%d and %d packets):\n got %+v\nwant %+v", name, i+1, len(got), len(want),
				got[min(i, len(got)-1)], want[min(i, len(want)-1)])
		}
	}
}

// TestNgReaderSections checks that interfaces are numbered over the whole
// file, so that a later section's packets name its own interfaces.
func TestNgReaderSections(t *testing.T) {
	rd, err := NewReader(bytes.NewReader(ngOddFile(binary.LittleEndian)))
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []int
	for p := range packetsOf(t, rd) {
		ifaces = append(ifaces, p.CI.InterfaceIndex)
		if p.Iface != rd.Interface(p.CI.InterfaceIndex) {
			t.Errorf("packet %d: interface %+v", p.Num, p.Iface)
		}
	}
	if want := []int{0, 1, 2, 0, 1, 3, 3}; !slices.Equal(ifaces, want) {
		t.Errorf("interfaces %v, want %v", ifaces, want)
	}
	if n := rd.Interfaces(); len(n) != 4 || n[1].Node == nil || n[1].Node.Name != "n1" || n[1].Name != "raw" {
		t.Errorf("interfaces %+v", n)
	}
}

// blockErrorRE is how a corrupt block is reported: one line naming the
// block and where it starts.
var blockErrorRE = regexp.MustCompile(`^pcapng [a-z0-9 ]+ block at byte [0-9]+: [^\n]+$`)

// TestNgReaderErrors checks the errors for corrupt blocks.
func TestNgReaderErrors(t *testing.T) {
	le := binary.LittleEndian
	good := ngOddFile(le)
	first := int(le.Uint32(good[4:])) // the section header's length
	second := first + int(le.Uint32(good[first+4:]))
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want string
	}{
		{"trailing length", func(b []byte) []byte { b[second-1] = 9; return b },
			fmt.Sprintf("packet 1: pcapng interface description block at byte %d: block length 20 at its start", first)},
		{"length not a multiple of 4", func(b []byte) []byte { le.PutUint32(b[first+4:], 21); return b },
			fmt.Sprintf("packet 1: pcapng interface description block at byte %d: block length 21 is not", first)},
		{"unknown interface", func(b []byte) []byte {
			w := &ngFile{Buffer: *bytes.NewBuffer(b[:second]), order: le}
			w.enhanced(1, 0, []byte("x"), 1)
			return w.Bytes()
		}, fmt.Sprintf("packet 1: pcapng enhanced packet block at byte %d: interface 1 is not described in its section (1 are)", second)},
		{"captured length", func(b []byte) []byte {
			w := &ngFile{Buffer: *bytes.NewBuffer(b[:second]), order: le}
			w.enhanced(0, 0, []byte("abcd"), 4)
			le.PutUint32(w.Bytes()[second+20:], 5)
			return w.Bytes()
		}, fmt.Sprintf("packet 1: pcapng enhanced packet block at byte %d: captured length 5 overruns the block", second)},
		{"option", func(b []byte) []byte {
			w := &ngFile{Buffer: *bytes.NewBuffer(b[:second]), order: le}
			w.enhanced(0, 0, []byte("abcd"), 4, w.opt(1, []byte("comment")))
			le.PutUint16(w.Bytes()[second+32+2:], 200)
			return w.Bytes()
		}, fmt.Sprintf("packet 1: pcapng enhanced packet block at byte %d: option 1 of 200 bytes overruns the block", second)},
		{"byte order", func(b []byte) []byte { b[8] = 0; return b }, "not a pcapng file: pcapng section header block at byte 0: byte-order magic"},
		{"version", func(b []byte) []byte { b[12] = 2; return b }, "not a pcapng file: pcapng section header block at byte 0: version 2.0, not 1.0"},
		{"first block", func(b []byte) []byte { b[0] = 1; return b }, "not a pcapng file: first block is of type 0xa0d0d01"},
	} {
		data := tc.edit(slices.Clone(good))
		rd, err := NewReader(bytes.NewReader(data))
		if err == nil {
			_, err = rd.Next()
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q...", tc.name, err, tc.want)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: reported as truncation: %v", tc.name, err)
		}
	}
}

// FuzzNgReader reads arbitrary bytes with ngReader: it never panics, a
// corrupt block is one line naming it and its offset, and wherever both
// ngReader and gopacket's reader read a whole file without error, they
// return the same packets.
func FuzzNgReader(f *testing.F) {
	files := ngTestFiles(f)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data := files[name]
		if name == "hardmix.gz" {
			// Mutations of compressed bytes mostly test compress/gzip;
			// TestNgReaderMatchesGopacket covers the compressed path.
			continue
		}
		if len(data) > 64<<10 {
			data = data[:64<<10]
		}
		f.Add(data)
	}
	odd := ngOddFile(binary.BigEndian)
	for _, cut := range []int{10, 30, 100, len(odd) - 3} {
		f.Add(odd[:cut])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const limit = 2000
		got, err := readOurs(data, limit)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF && !blockErrorRE.MatchString(err.Error()) &&
			!strings.HasPrefix(err.Error(), "first block is of type") && !strings.HasPrefix(err.Error(), "gzip") &&
			!strings.HasPrefix(err.Error(), "flate") {
			t.Fatalf("error %q", err)
		}
		if err != io.EOF {
			return
		}
		want, wantErr := readGopacket(data, limit)
		if wantErr != io.EOF {
			return
		}
		if i := samePackets(got, want); i >= 0 {
			t.Fatalf("packet %d differs (%d and %d packets):\n got %+v\nwant %+v", i+1, len(got), len(want),
				got[min(i, len(got)-1)], want[min(i, len(want)-1)])
		}
	})
}
