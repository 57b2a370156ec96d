package capture

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/google/uuid"
)

// The capture format as the package doc describes it, checked byte by
// byte without the reader under test; and a file another writer could
// write, following the doc, read back.

// Block types and option codes of pcapng.
const (
	blockSHB = 0x0A0D0D0A
	blockIDB = 1
	blockISB = 5
	blockEPB = 6

	optComment     = 1
	optSHBHardware = 2
	optSHBOS       = 3
	optSHBUserAppl = 4
	optIfName      = 2
	optIfDesc      = 3
	optIfTsresol   = 9
	optIfOS        = 12
	optISBIfRecv   = 4
	optISBIfDrop   = 5
)

// pcapngOptions parses an options list: values by code, in order.
func pcapngOptions(t *testing.T, b []byte) map[uint16][]string {
	t.Helper()
	out := map[uint16][]string{}
	for len(b) >= 4 {
		code, n := binary.LittleEndian.Uint16(b), int(binary.LittleEndian.Uint16(b[2:]))
		if code == 0 {
			return out
		}
		if 4+n > len(b) {
			t.Fatalf("option %d of %d bytes overruns its block", code, n)
		}
		out[code] = append(out[code], string(b[4:4+n]))
		b = b[4+(n+3)&^3:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes after the options", len(b))
	}
	return out
}

func TestFileFormat(t *testing.T) {
	nodes := synthNodes(2, 7946)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
	tb := TestbedInfo{Topology: "star2", Run: "bl0042", Nodes: nodes, HeartbeatNS: 1e8, FailureTimeoutNS: 5e8, ElectionTimeoutNS: 2e8}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, WriterOptions{Testbed: tb, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	frameAt := t0.Add(time.Millisecond + 7)
	if err := w.WriteFrame(1, frameAt, bytes.Repeat([]byte{0xab}, 61), 100); err != nil {
		t.Fatal(err)
	}
	crash := Record{Time: t0.Add(2 * time.Millisecond), Kind: fault.Crash, Nodes: []string{"n2"}, Detail: "SIGKILL to process 4242"}
	if err := w.WriteRecord(crash); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	blocks := pcapngBlocks(t, data)
	var types []uint32
	for _, b := range blocks {
		types = append(types, b.typ)
	}
	// Section header, node n1, node n2, events, the records and the frame,
	// one statistics block per interface.
	want := []uint32{blockSHB, blockIDB, blockIDB, blockIDB, blockEPB, blockEPB, blockEPB, blockEPB, blockISB, blockISB, blockISB}
	if !slices.Equal(types, want) {
		t.Fatalf("blocks %x, want %x", types, want)
	}
	le := binary.LittleEndian
	body := func(b pcapngBlock) []byte { return data[b.start:b.end] }

	shb := body(blocks[0])
	if le.Uint32(shb[8:]) != 0x1A2B3C4D || le.Uint16(shb[12:]) != 1 || le.Uint16(shb[14:]) != 0 || int64(le.Uint64(shb[16:])) != -1 {
		t.Errorf("section header % x", shb[:24])
	}
	if o := pcapngOptions(t, shb[24:len(shb)-4]); o[optSHBUserAppl][0] != "bullylab" || o[optSHBHardware][0] != runtime.GOARCH || o[optSHBOS][0] != runtime.GOOS || len(o) != 3 {
		t.Errorf("section header options %v", o)
	}

	wantIfaces := []struct {
		link       uint16
		name, desc string
	}{
		{1, "n1", "bullylab node n1 index=1 id=" + nodes[0].ID.String() + " addr=10.77.0.2 port=7946"},
		{1, "n2", "bullylab node n2 index=2 id=" + nodes[1].ID.String() + " addr=10.77.0.3 port=7946"},
		{147, "bullylab-events", "bullylab fault and lifecycle records (JSON, one per packet; summary in the packet comment)"},
	}
	for i, wi := range wantIfaces {
		idb := body(blocks[1+i])
		o := pcapngOptions(t, idb[16:len(idb)-4])
		if le.Uint16(idb[8:]) != wi.link || le.Uint32(idb[12:]) != DefaultSnapLen || o[optIfName][0] != wi.name || o[optIfDesc][0] != wi.desc ||
			o[optIfOS][0] != runtime.GOOS || o[optIfTsresol][0] != "\x09" || len(o) != 4 {
			t.Errorf("interface %d: link type %d, snap length %d, options %v; want %+v", i, le.Uint16(idb[8:]), le.Uint32(idb[12:]), o, wi)
		}
	}

	type epb struct {
		iface        uint32
		ts           int64
		capLen, orig int
		data         []byte
		opts         map[uint16][]string
	}
	var pkts []epb
	for _, b := range blocks[4:8] {
		p := body(b)
		e := epb{iface: le.Uint32(p[8:]), ts: int64(le.Uint32(p[12:]))<<32 | int64(le.Uint32(p[16:])),
			capLen: int(le.Uint32(p[20:])), orig: int(le.Uint32(p[24:]))}
		e.data = p[28 : 28+e.capLen]
		e.opts = pcapngOptions(t, p[28+(e.capLen+3)&^3:len(p)-4])
		pkts = append(pkts, e)
	}
	// Records: JSON on the events interface, whole (captured = original
	// length), time = the packet's timestamp in nanoseconds, summary as
	// the one comment.
	var recs []map[string]any
	for i, p := range pkts {
		if i == 1 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(p.data, &m); err != nil {
			t.Fatalf("packet %d: %v", i+1, err)
		}
		rec, err := DecodeRecord(p.data)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := time.Parse(time.RFC3339Nano, m["time"].(string))
		if err != nil || p.iface != 2 || p.capLen != p.orig || p.ts != ts.UnixNano() || m["version"] != 1.0 ||
			len(p.opts) != 1 || len(p.opts[optComment]) != 1 || p.opts[optComment][0] != rec.Comment() {
			t.Errorf("record packet %d: interface %d, %d/%d bytes, timestamp %d, options %v: %s", i+1, p.iface, p.capLen, p.orig, p.ts, p.opts, p.data)
		}
		recs = append(recs, m)
	}
	keys := func(m any) string {
		k := []string{}
		for key := range m.(map[string]any) {
			k = append(k, key)
		}
		slices.Sort(k)
		return strings.Join(k, " ")
	}
	if k := keys(recs[0]); k != "kind testbed time version" || recs[0]["kind"] != "testbed" || pkts[0].ts != t0.UnixNano() {
		t.Errorf("testbed record %v", recs[0])
	}
	tbm := recs[0]["testbed"].(map[string]any)
	if k := keys(tbm); k != "election_timeout_ns failure_timeout_ns heartbeat_ns nodes run topology" {
		t.Errorf("testbed %v", tbm)
	}
	n2 := tbm["nodes"].([]any)[1].(map[string]any)
	if k := keys(n2); k != "addr id index name port" || n2["name"] != "n2" || n2["index"] != 2.0 || n2["id"] != nodes[1].ID.String() ||
		n2["addr"] != "10.77.0.3" || n2["port"] != 7946.0 {
		t.Errorf("testbed node %v", n2)
	}
	if k := keys(recs[1]); k != "detail kind nodes time version" || recs[1]["time"] != "2025-01-02T03:04:05.125456789Z" ||
		pkts[2].opts[optComment][0] != "bullylab: crash n2 (SIGKILL to process 4242)" {
		t.Errorf("crash record %v, comment %q", recs[1], pkts[2].opts[optComment])
	}
	end := recs[2]
	if k := keys(end); k != "capture kind time version" || end["kind"] != "end" {
		t.Errorf("end record %v", end)
	}
	if k := keys(end["capture"]); k != "drops freezes late packets unmatched written wrong_source" || end["capture"].(map[string]any)["written"] != 4.0 {
		t.Errorf("end record's counters %v", end["capture"])
	}
	// Frames: on their node's interface, as given, without options.
	if f := pkts[1]; f.iface != 1 || f.ts != frameAt.UnixNano() || f.capLen != 61 || f.orig != 100 || !bytes.Equal(f.data, bytes.Repeat([]byte{0xab}, 61)) || len(f.opts) != 0 {
		t.Errorf("frame: %+v", f)
	}
	// Statistics: packets written per interface, no drops without a live
	// capture.
	for i, b := range blocks[8:] {
		p := body(b)
		o := pcapngOptions(t, p[20:len(p)-4])
		recv := []uint64{0, 1, 3}[i]
		if le.Uint32(p[8:]) != uint32(i) || len(o[optISBIfRecv]) != 1 || le.Uint64([]byte(o[optISBIfRecv][0])) != recv || o[optISBIfDrop] != nil {
			t.Errorf("statistics %d: %v, want %d received", i, o, recv)
		}
	}
}

// ngBuilder writes a little pcapng file the way another program might,
// following the package doc rather than this package's Writer.
type ngBuilder struct{ ngFile }

func ngOpt(code uint16, val string) []byte {
	return (&ngFile{order: binary.LittleEndian}).opt(code, []byte(val))
}

// le makes w's file little-endian, the zero ngBuilder's order.
func (w *ngBuilder) le() {
	if w.order == nil {
		w.order = binary.LittleEndian
	}
}

// section writes a section header block, version 1.0, length not given.
func (w *ngBuilder) section(opts ...[]byte) { w.le(); w.ngFile.section(opts...) }

func (w *ngBuilder) iface(link uint16, opts ...[]byte) { w.le(); w.ngFile.iface(link, 65535, opts...) }

// packet writes an enhanced packet block; ts is in the interface's
// resolution.
func (w *ngBuilder) packet(iface uint32, ts uint64, data []byte, opts ...[]byte) {
	w.le()
	w.ngFile.enhanced(iface, ts, data, uint32(len(data)), opts...)
}

// TestReadCompatible reads a file written after the package doc by
// another writer: interfaces in another order, microsecond timestamps,
// a node description with a key this version does not know, a record of
// a later version, with a field and a kind this version does not know,
// and an interface of link type 147 that is not the events interface.
func TestReadCompatible(t *testing.T) {
	id := uuid.MustParse("00000000-0000-4000-8000-0000000000aa")
	var w ngBuilder
	w.section(ngOpt(optSHBUserAppl, "another writer"))
	w.iface(147, ngOpt(optIfName, EventsInterfaceName)) // no if_tsresol: microseconds
	w.iface(1, ngOpt(optIfName, "a"), ngOpt(optIfDesc, "bullylab node a index=3 id="+id.String()+" addr=10.0.0.9 port=9000 colour=blue"))
	w.iface(147, ngOpt(optIfName, "other user data"))
	at := time.Date(2025, 6, 7, 8, 9, 10, 11000, time.UTC)
	rec := `{"version":2,"time":"` + at.Format(time.RFC3339Nano) + `","kind":"reboot","nodes":["a"],"detail":"x","reason":{"why":"later"}}`
	w.packet(0, uint64(at.UnixMicro()), []byte(rec), ngOpt(optComment, "bullylab: reboot a (x)"))
	w.packet(2, uint64(at.UnixMicro()+1), []byte("not JSON"))

	rd, err := NewReader(bytes.NewReader(w.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	p, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Record; r == nil || !p.Iface.Events || r.Version != 2 || r.Kind != "reboot" || !slices.Equal(r.Nodes, []string{"a"}) ||
		!p.CI.Timestamp.Equal(at) || !r.Time.Equal(at) || !slices.Equal(p.Comments, []string{"bullylab: reboot a (x)"}) {
		t.Errorf("record: %+v %+v", p, p.Record)
	}
	ifaces := rd.Interfaces()
	if len(ifaces) != 3 || ifaces[1].Node == nil || *ifaces[1].Node != (NodeInfo{Name: "a", Index: 3, ID: id, Addr: netip.MustParseAddr("10.0.0.9"), Port: 9000}) ||
		ifaces[0].Node != nil || ifaces[2].Events || ifaces[2].Node != nil {
		t.Errorf("interfaces %+v %+v %+v", ifaces[0], ifaces[1], ifaces[2])
	}
	p, err = rd.Next()
	if err != nil || p.Record != nil || string(p.Data) != "not JSON" {
		t.Errorf("user data: %+v, %v", p, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
	// The election port is the node descriptions'.
	rep, err := Analyze(bytes.NewReader(w.Bytes()), AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Ports, []uint16{9000}) || len(rep.Records) != 1 || rep.Records[0].Kind != "reboot" {
		t.Errorf("report: ports %v, records %+v", rep.Ports, rep.Records)
	}

	// Records a reader refuses: no version, version 0, no kind, not JSON.
	for _, bad := range []string{`{"kind":"crash"}`, `{"version":0,"kind":"crash"}`, `{"version":1}`, `crash`} {
		if _, err := DecodeRecord([]byte(bad)); err == nil {
			t.Errorf("%s: decoded", bad)
		}
	}
	var w2 ngBuilder
	w2.Write(w.Bytes()[:blocksEnd(t, w.Bytes(), 4)])
	w2.packet(0, 0, []byte(`{"version":0,"kind":"crash"}`))
	rd, err = NewReader(bytes.NewReader(w2.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); err == nil || !strings.Contains(err.Error(), "packet 1: events record: version 0") {
		t.Errorf("a record of version 0: %v", err)
	}
}

// blocksEnd returns where the first n blocks of a pcapng file end.
func blocksEnd(t *testing.T, data []byte, n int) int {
	return pcapngBlocks(t, data)[n-1].end
}

// TestElectionPorts: the ports come from the node interfaces'
// descriptions, else from the testbed record if it is the first packet,
// else wire.DefaultPort; AnalyzeOptions.Ports overrides them.
func TestElectionPorts(t *testing.T) {
	file := func(desc string, first string) []byte {
		var w ngBuilder
		w.section()
		w.iface(1, ngOpt(optIfName, "n1"), ngOpt(optIfDesc, desc))
		w.iface(147, ngOpt(optIfName, EventsInterfaceName))
		w.packet(1, 1, []byte(first))
		return w.Bytes()
	}
	testbed := `{"version":1,"time":"2025-01-01T00:00:00Z","kind":"testbed","testbed":{"nodes":[{"name":"n1","port":9100}]}}`
	crash := `{"version":1,"time":"2025-01-01T00:00:00Z","kind":"crash","nodes":["n1"]}`
	for _, tc := range []struct {
		name, desc, first string
		opts              []uint16
		want              []uint16
	}{
		{"description", "bullylab node n1 port=9000", testbed, nil, []uint16{9000}},
		{"testbed record", "not a node", testbed, nil, []uint16{9100}},
		{"default", "not a node", crash, nil, []uint16{7946}},
		{"options", "bullylab node n1 port=9000", testbed, []uint16{9300, 9200}, []uint16{9200, 9300}},
	} {
		rep, err := Analyze(bytes.NewReader(file(tc.desc, tc.first)), AnalyzeOptions{Ports: tc.opts})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(rep.Ports, tc.want) {
			t.Errorf("%s: ports %v, want %v", tc.name, rep.Ports, tc.want)
		}
	}
}
