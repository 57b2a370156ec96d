//go:build linux

package capture

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// tsharkJSON runs tshark with the Lua dissector on path and returns the
// values it printed for fields (-T json -e), by packet number. It fails
// the test on a Lua error.
func tsharkJSON(t testing.TB, tshark, path string, fields ...string) map[int64]map[string][]string {
	t.Helper()
	args := []string{"-r", path, "-X", "lua_script:" + luaScript, "-T", "json", "-e", "frame.number"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, append(args, tsharkOptions...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Lua") {
		t.Errorf("tshark: %s", stderr.String())
	}
	var pkts []struct {
		Source struct {
			Layers map[string][]string `json:"layers"`
		} `json:"_source"`
	}
	if err := json.Unmarshal(out, &pkts); err != nil {
		t.Fatalf("tshark's JSON: %v", err)
	}
	byNum := map[int64]map[string][]string{}
	for _, p := range pkts {
		num := p.Source.Layers["frame.number"]
		if len(num) != 1 {
			t.Fatalf("tshark printed a packet without a number: %v", p.Source.Layers)
		}
		n, err := strconv.ParseInt(num[0], 10, 64)
		if err != nil {
			t.Fatalf("tshark printed frame number %q", num[0])
		}
		byNum[n] = p.Source.Layers
	}
	return byNum
}

// newRecordFields are the fields of in_force, peers, impair and the
// testbed's clock, which checkRecordFieldsText checks with -T fields.
var newRecordFields = []string{
	"bullylab.record.in_force", "bullylab.record.peers", "bullylab.record.impair.delay_ns",
	"bullylab.record.impair.jitter_ns", "bullylab.record.impair.loss",
	"bullylab.record.testbed.clock.monotonic_offset_ns", "bullylab.record.testbed.clock.offset_error_ns",
	"bullylab.record.testbed.clock.ts_unit_ns", "bullylab.record.clock.offset_ns", "bullylab.record.clock.rate_ppm",
}

// recordFields are the record fields the dissector defines.
var recordFields = slices.Concat(newRecordFields, []string{
	"bullylab.record.version", "bullylab.record.time", "bullylab.record.kind", "bullylab.record.nodes",
	"bullylab.record.groups", "bullylab.record.groups.node", "bullylab.record.one_way", "bullylab.record.detail",
	"bullylab.record.summary", "bullylab.record.links", "bullylab.record.links.node", "bullylab.record.mode",
	"bullylab.record.testbed.topology", "bullylab.record.testbed.run", "bullylab.record.testbed.node",
	"bullylab.record.testbed.node.index", "bullylab.record.testbed.node.id", "bullylab.record.testbed.node.addr",
	"bullylab.record.testbed.node.port", "bullylab.record.testbed.heartbeat_ns",
	"bullylab.record.testbed.failure_timeout_ns", "bullylab.record.testbed.election_timeout_ns",
	"bullylab.record.capture.packets", "bullylab.record.capture.drops", "bullylab.record.capture.freezes",
	"bullylab.record.capture.written", "bullylab.record.capture.late", "bullylab.record.capture.unmatched",
	"bullylab.record.capture.wrong_source",
})

// recordWant returns the values tshark should print for rec's fields, as
// recordFields name them, and its Info column.
func recordWant(rec *Record) map[string][]string {
	w := map[string][]string{}
	set := func(f string, vs ...string) {
		if len(vs) > 0 {
			w[f] = vs
		}
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	utoa := func(n uint64) string { return strconv.FormatUint(n, 10) }
	set("bullylab.record.version", itoa(int64(rec.Version)))
	if !rec.Time.IsZero() {
		set("bullylab.record.time", tsharkTime(rec.Time))
	}
	if !rec.InForce.IsZero() {
		set("bullylab.record.in_force", tsharkTime(rec.InForce))
	}
	set("bullylab.record.peers", rec.Peers...)
	if im := rec.Impair; im != nil {
		// Omitted when 0.
		if im.DelayNS != 0 {
			set("bullylab.record.impair.delay_ns", itoa(im.DelayNS))
		}
		if im.JitterNS != 0 {
			set("bullylab.record.impair.jitter_ns", itoa(im.JitterNS))
		}
		if im.Loss != 0 {
			// Tests write at most 15 significant digits, which tshark 4.0
			// prints as %.15g and later versions as the shortest form.
			set("bullylab.record.impair.loss", strconv.FormatFloat(im.Loss, 'g', -1, 64))
		}
	}
	if c := rec.Clock; c != nil {
		// Both always written, 0 included.
		set("bullylab.record.clock.offset_ns", itoa(c.OffsetNS))
		set("bullylab.record.clock.rate_ppm", strconv.FormatFloat(c.RatePPM, 'g', -1, 64))
	}
	set("bullylab.record.kind", string(rec.Kind))
	set("bullylab.record.nodes", rec.Nodes...)
	for _, g := range rec.Groups {
		set("bullylab.record.groups", append(w["bullylab.record.groups"], strings.Join(g, ","))...)
		set("bullylab.record.groups.node", append(w["bullylab.record.groups.node"], g...)...)
	}
	sep := "<->"
	if rec.OneWay {
		sep = "->"
	}
	for _, l := range rec.Links {
		set("bullylab.record.links", append(w["bullylab.record.links"], l[0]+sep+l[1])...)
		set("bullylab.record.links.node", append(w["bullylab.record.links.node"], l[0], l[1])...)
	}
	if rec.Mode != "" {
		set("bullylab.record.mode", string(rec.Mode))
	}
	if rec.OneWay {
		set("bullylab.record.one_way", "1")
	} else if len(rec.Groups) > 0 || len(rec.Links) > 0 {
		set("bullylab.record.one_way", "0")
	}
	if rec.Detail != "" {
		set("bullylab.record.detail", rec.Detail)
	}
	set("bullylab.record.summary", rec.Comment())
	if tb := rec.Testbed; tb != nil {
		set("bullylab.record.testbed.topology", tb.Topology)
		set("bullylab.record.testbed.run", tb.Run)
		for _, n := range tb.Nodes {
			set("bullylab.record.testbed.node", append(w["bullylab.record.testbed.node"], n.Name)...)
			set("bullylab.record.testbed.node.index", append(w["bullylab.record.testbed.node.index"], strconv.Itoa(n.Index))...)
			set("bullylab.record.testbed.node.id", append(w["bullylab.record.testbed.node.id"], n.ID.String())...)
			set("bullylab.record.testbed.node.addr", append(w["bullylab.record.testbed.node.addr"], n.Addr.String())...)
			set("bullylab.record.testbed.node.port", append(w["bullylab.record.testbed.node.port"], strconv.Itoa(n.Port))...)
		}
		for f, v := range map[string]int64{"heartbeat_ns": tb.HeartbeatNS, "failure_timeout_ns": tb.FailureTimeoutNS, "election_timeout_ns": tb.ElectionTimeoutNS} {
			if v != 0 {
				set("bullylab.record.testbed."+f, itoa(v))
			}
		}
		if c := tb.Clock; c != nil {
			set("bullylab.record.testbed.clock.monotonic_offset_ns", itoa(c.MonotonicOffsetNS))
			set("bullylab.record.testbed.clock.offset_error_ns", itoa(c.OffsetErrorNS))
			set("bullylab.record.testbed.clock.ts_unit_ns", itoa(c.TSUnitNS))
		}
	}
	if c := rec.Capture; c != nil {
		for f, v := range map[string]uint64{"packets": c.Packets, "drops": c.Drops, "freezes": c.Freezes, "written": c.Written,
			"late": c.Late, "unmatched": c.Unmatched, "wrong_source": c.WrongSource} {
			set("bullylab.record.capture."+f, utoa(v))
		}
	}
	return w
}

// tsharkTime is t as tshark prints an absolute time in UTC.
func tsharkTime(t time.Time) string {
	return t.UTC().Format("Jan _2, 2006 15:04:05.000000000 UTC")
}

// checkRecordRow compares what tshark printed for a record's packet with
// the record.
func checkRecordRow(t *testing.T, num int64, rec *Record, got map[string][]string) {
	t.Helper()
	want := recordWant(rec)
	for _, f := range recordFields {
		if !slices.Equal(got[f], want[f]) {
			t.Errorf("packet %d (%s): %s is %q, want %q", num, rec.Kind, f, got[f], want[f])
		}
	}
	if info := got["_ws.col.Info"]; len(info) != 1 || info[0] != rec.Comment() {
		t.Errorf("packet %d: Info column %q, want %q", num, info, rec.Comment())
	}
	if p := got["_ws.col.Protocol"]; len(p) != 1 || p[0] != "BULLYLAB" {
		t.Errorf("packet %d: Protocol column %q", num, p)
	}
	if p := got["frame.protocols"]; len(p) != 1 || p[0] != "bullylab.record" {
		t.Errorf("packet %d: protocols %q, want the record's only", num, p)
	}
}

// TestTsharkRecords writes a capture with frames and records of every
// kind and checks that tshark with the dissector shows each record's
// fields and summary as written, and the frames' types by name as the
// analyzer counts them.
func TestTsharkRecords(t *testing.T) {
	tshark := requireTshark(t)
	path := filepath.Join(t.TempDir(), "records.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// The synth's TCP timestamps count milliseconds of its capture clock.
	s := newSynthClock(t, f, 4, 12, &ClockInfo{MonotonicOffsetNS: 7, OffsetErrorNS: 250_000, TSUnitNS: 1_000_000})
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(0, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 2)
	s.crash(leader)
	s.record(Record{Kind: fault.Pause, Nodes: []string{"n1"}, Detail: "SIGSTOP pid 17"})
	s.record(Record{Kind: fault.Resume, Nodes: []string{"n1"}})
	s.record(Record{Kind: fault.Isolate, Nodes: []string{"n2"}})
	s.record(Record{Kind: fault.Unisolate, Nodes: []string{"n2"}})
	s.record(Record{Kind: fault.Partition, Groups: [][]string{{"n1", "n2"}, {"n3"}, {"n4"}}})
	s.record(Record{Kind: fault.Partition, Groups: [][]string{{"n1"}, {"n2", "n3"}}, OneWay: true})
	s.record(Record{Kind: fault.Partition, Groups: [][]string{{"n1"}, {"n2", "n3"}}, Mode: fault.ModeReset, Detail: "cut {n1} | {n2,n3}, TCP answered with resets"})
	s.record(Record{Kind: fault.Isolate, Nodes: []string{"n4"}, Mode: fault.ModeDrop})
	s.record(Record{Kind: fault.Cut, Links: [][2]string{{"n1", "n2"}, {"n3", "n4"}}, Detail: "dropping n1<->n2, n3<->n4"})
	s.record(Record{Kind: fault.Cut, Links: [][2]string{{"n2", "n1"}}, OneWay: true, Mode: fault.ModeReset})
	s.record(Record{Kind: fault.Heal})
	s.record(Record{Kind: fault.Delay, Nodes: []string{"n1", "n2"}, Peers: []string{"n3", "n4"}, InForce: time.Unix(0, s.t+1_234_567),
		Impair: &RecordImpairment{DelayNS: 50_000_000, JitterNS: 5_000_001}, Detail: "n1,n2 -> n3,n4: delay 50ms±5ms"})
	s.record(Record{Kind: fault.Loss, Nodes: []string{"n3"}, InForce: time.Unix(0, s.t+2_001), Impair: &RecordImpairment{DelayNS: 50_000_000, Loss: 12.5},
		Detail: "n3 -> everyone: loss 12.5%"})
	s.record(Record{Kind: fault.Loss, Nodes: []string{"n4"}, Peers: []string{"n1"}, Impair: &RecordImpairment{Loss: 0.1}})
	s.record(Record{Kind: fault.Clear, Nodes: []string{"n1", "n2", "n3"}})
	s.record(Record{Kind: fault.Clock, Nodes: []string{"n3", "n4"}, InForce: time.Unix(0, s.t+3_001), Clock: &RecordClock{OffsetNS: 90_000_000_000, RatePPM: 500},
		Detail: "n3,n4 clock offset +1m30s rate +500 ppm"})
	s.record(Record{Kind: fault.Clock, Nodes: []string{"n3"}, Clock: &RecordClock{OffsetNS: -1, RatePPM: -0.25}})
	s.record(Record{Kind: fault.Clock, Nodes: []string{"n4"}, Clock: &RecordClock{}})
	// encoding/json escapes <, > and & as \u003c and so on.
	s.record(Record{Kind: fault.Campaign, Nodes: []string{"n2"}, Detail: `"asked" <by> the operator & née 日本 \ 🙂`})
	s.record(Record{Kind: fault.Leave, Nodes: []string{"n1"}})
	s.record(Record{Kind: fault.Join, Nodes: []string{"n1"}})
	s.restart(leader)
	s.advance(10 * time.Millisecond)
	s.send(1, 0, s.msg(wire.Type(14), 1, 1, 0)) // a type this version does not define
	s.send(3, 0, s.msg(wire.TypeHeartbeat, 3, 2, 0))
	s.record(Record{Kind: KindEnd, Capture: &CaptureStats{Packets: 1<<64 - 1, Drops: 3, Freezes: 1, Written: 1<<53 + 1,
		Late: 2, Unmatched: 5, WrongSource: 6}})
	if err := s.w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	fields := append([]string{"_ws.col.Info", "_ws.col.Protocol", "frame.protocols", "_ws.expert.message", "bullylab.type"}, recordFields...)
	got := tsharkJSON(t, tshark, path, fields...)
	rd := openCapture(t, path)
	kinds := map[fault.Kind]bool{}
	var packets int64
	for p := range packetsOf(t, rd) {
		packets++
		row := got[p.Num]
		for _, m := range row["_ws.expert.message"] {
			if strings.Contains(m, "User encapsulation not handled") || strings.Contains(m, "Malformed") || strings.Contains(m, "Lua") {
				t.Errorf("packet %d: expert info %q", p.Num, m)
			}
		}
		if p.Record == nil {
			for _, f := range recordFields {
				if v, ok := row[f]; ok {
					t.Errorf("packet %d, a frame: %s is %q", p.Num, f, v)
				}
			}
			continue
		}
		kinds[p.Record.Kind] = true
		checkRecordRow(t, p.Num, p.Record, row)
		if v, ok := row["bullylab.type"]; ok {
			t.Errorf("packet %d, a record: bullylab.type is %q", p.Num, v)
		}
	}
	if int64(len(got)) != packets {
		t.Errorf("tshark printed %d packets, the capture has %d", len(got), packets)
	}
	if len(kinds) != len(RecordKinds()) {
		t.Errorf("the capture has records of %d kinds, want all %d: %v", len(kinds), len(RecordKinds()), kinds)
	}

	// bullylab.type prints names (capturetest.Types fails on anything
	// else), TYPE(14) for the unknown type, as the analyzer counts them.
	rep, err := AnalyzeFile(path, AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byType, _ := tsharkTypes(t, tshark, path, tsharkOptions...)
	if byType.typeCounts() != rep.Messages || rep.Messages.Unknown != 1 {
		t.Errorf("tshark found %+v\nanalyzer found %+v", byType.typeCounts(), rep.Messages)
	}
	names := map[string]bool{}
	for _, row := range got {
		for _, v := range row["bullylab.type"] {
			names[v] = true
		}
	}
	for _, want := range []string{"ELECTION", "ANSWER", "HALT", "HALT_ACK", "COORDINATOR", "HEARTBEAT", "TYPE(14)"} {
		if !names[want] {
			t.Errorf("tshark printed no bullylab.type %q; it printed %v", want, names)
		}
	}
}

// checkRecordFieldsText runs tshark -T fields on the capture at path for
// newRecordFields and checks that each record's values are those written;
// the testbed record must have a clock, and some delay record in_force,
// peers and impair.
func checkRecordFieldsText(t *testing.T, tshark, path string) {
	t.Helper()
	args := []string{"-r", path, "-X", "lua_script:" + luaScript, "-T", "fields", "-E", "separator=|", "-e", "frame.number"}
	for _, f := range newRecordFields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, append(args, tsharkOptions...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Lua") {
		t.Errorf("tshark: %s", stderr.String())
	}
	rows := map[int64][]string{}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(out), "\n"), "\n") {
		cols := strings.Split(line, "|")
		n, err := strconv.ParseInt(cols[0], 10, 64)
		if err != nil || len(cols) != 1+len(newRecordFields) {
			t.Fatalf("tshark printed %q", line)
		}
		rows[n] = cols[1:]
	}
	rd := openCapture(t, path)
	var clock, delay bool
	for p := range packetsOf(t, rd) {
		if p.Record == nil {
			continue
		}
		r := p.Record
		clock = clock || r.Testbed != nil && r.Testbed.Clock != nil
		delay = delay || r.Kind == fault.Delay && !r.InForce.IsZero() && len(r.Peers) > 0 && r.Impair != nil && r.Impair.DelayNS != 0 && r.Impair.JitterNS != 0
		want := recordWant(r)
		for i, f := range newRecordFields {
			// tshark joins a field's occurrences with commas.
			if w := strings.Join(want[f], ","); rows[p.Num][i] != w {
				t.Errorf("packet %d (%s): tshark -T fields -e %s printed %q, want %q", p.Num, r.Kind, f, rows[p.Num][i], w)
			}
		}
	}
	if !clock || !delay {
		t.Errorf("the capture lacks a testbed record with a clock (%v) or a delay record with in_force, peers and impair (%v)", clock, delay)
	}
}

// TestTsharkRecordsMalformed feeds the dissector records Go's reader
// rejects and some it takes: a record DecodeRecord rejects must be flagged
// (expert info bullylab.record.malformed), never raise a Lua error; one it
// takes must show as Go decodes it. Records on a USER0 interface of
// another name are left to Wireshark's DLT_USER handling.
func TestTsharkRecordsMalformed(t *testing.T) {
	tshark := requireTshark(t)
	nested := func(n int) string {
		return `{"version":1,"kind":"crash","x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}"
	}
	payloads := []string{
		``,
		`not json`,
		`{"version":1,"kind":"crash","nodes":["n1"`,
		`{"version":1,"kind":"crash","nodes":"n1"}`,
		`{"version":1,"kind":"crash","nodes":[1]}`,
		`{"version":0,"kind":"crash"}`,
		`{"version":1.5,"kind":"crash"}`,
		`{"version":"1","kind":"crash"}`,
		`{"version":99999999999999999999,"kind":"crash"}`,
		`{"version":1,"time":"yesterday","kind":"crash"}`,
		`{"version":1,"time":"2025-02-30T00:00:00Z","kind":"crash"}`,
		`{"version":1}`,
		`{"kind":"crash"}`,
		`{"version":1,"kind":null}`,
		`[1,2,3]`,
		`"crash"`,
		`{"version":1,"kind":"crash","detail":"bad \q escape"}`,
		`{"version":1,"kind":"loss","detail":"` + "\x01" + `"}`,
		`{"version":1,"kind":"crash",}`,
		`{"version":1,"kind":"crash" "nodes":[]}`,
		`{"version":1,"kind":"partition","groups":["n1"]}`,
		`{"version":1,"kind":"partition","one_way":"yes"}`,
		`{"version":1,"kind":"cut","links":["n1","n2"]}`,
		`{"version":1,"kind":"cut","links":[["n1",2]]}`,
		`{"version":1,"kind":"cut","links":{"n1":"n2"}}`,
		`{"version":1,"kind":"cut","links":[["n1","n2"]],"mode":1}`,
		`{"version":1,"kind":"testbed","testbed":{"nodes":[{"name":"n1","index":"one"}]}}`,
		`{"version":1,"kind":"end","capture":{"packets":-1}}`,
		`{"version":1,"kind":"end","capture":{"packets":18446744073709551616}}`,
		`{"version":1,"kind":"crash","nodes":["n1"]` + strings.Repeat(" ", 100) + `tru`,
		`{"version":1,"kind":"delay","impair":"50ms"}`,
		`{"version":1,"kind":"delay","impair":["delay_ns",1]}`,
		`{"version":1,"kind":"delay","impair":{"delay_ns":"50ms"}}`,
		`{"version":1,"kind":"delay","impair":{"jitter_ns":1.5}}`,
		`{"version":1,"kind":"delay","impair":{"delay_ns":9223372036854775808}}`,
		`{"version":1,"kind":"loss","impair":{"loss":"20%"}}`,
		`{"version":1,"kind":"loss","impair":{"loss":1e400}}`,
		`{"version":1,"kind":"loss","peers":"n1"}`,
		`{"version":1,"kind":"loss","peers":[["n1"]]}`,
		`{"version":1,"kind":"crash","in_force":1736000000}`,
		`{"version":1,"kind":"crash","in_force":"2025-01-02 03:04:05Z"}`,
		`{"version":1,"kind":"testbed","testbed":{"clock":"monotonic"}}`,
		`{"version":1,"kind":"testbed","testbed":{"clock":{"ts_unit_ns":1e3}}}`,
		nested(100000),
		nested(10000), // with the record, 10001 levels: one too many
		// Taken by DecodeRecord:
		nested(9999),
		`{"version":1,"kind":"crash","nodes":["n1"],"detail":"\u00e9\ud83d\ude00 \ud800 \u003c\u0026\u003e\/","extra":{"a":[true,false,null,-1.5e3,0]}}`,
		`{"VERSION":1,"Kind":"pause","nodes":["n2"],"kind":"resume"}`,
		`{"version":1,"kind":"explode","nodes":["n1",null]}`,
		`{"version":1,"kind":"crash","detail":"caf` + "\xe9\xff" + `"}`,
		"\r\n {\"version\":2,\"kind\":\"restart\",\"nodes\":[\"n3\"],\"time\":\"2024-02-29T03:04:05.5+02:00\",\"detail\":\"\x7f\"}\t",
		`{"version":1,"kind":"partition","groups":[["n1"],null,[]],"one_way":null}`,
		`{"version":1,"kind":"cut","links":[["n1","n2","x",7],null,[],["n3"],[null,"n4"]],"one_way":true,"mode":"reset"}`,
		`{"version":1,"kind":"isolate","nodes":["n1"],"mode":"sideways"}`,
		`{"version":1,"kind":"end","capture":{"packets":18446744073709551615,"drops":3,"late":2},"testbed":null}`,
		`{"version":1,"kind":"testbed","testbed":{"topology":"ring3","run":"r","nodes":[{"name":"n1","index":-1,"port":70000,"addr":"fd00::1","id":"00000000-0000-0000-0000-000000000000"}],"heartbeat_ns":-5}}`,
		`{"version":1,"kind":"delay","nodes":["n1"],"peers":["n2",null],"in_force":"2025-01-02T05:04:05.000000001+02:00","impair":{"delay_ns":-9223372036854775808,"jitter_ns":1,"loss":1.0E-2,"x":{}}}`,
		`{"version":1,"kind":"loss","peers":null,"in_force":null,"impair":null}`,
		`{"version":1,"kind":"loss","impair":{"loss":1e-400,"LOSS":33.3}}`,
		`{"version":1,"kind":"testbed","testbed":{"topology":"t","run":"r","clock":{"monotonic_offset_ns":-1736000000123456789,"ts_unit_ns":1000}}}`,
		`{"version":1,"kind":"testbed","testbed":{"topology":"t","run":"r","clock":null}}`,
	}
	// Not JSON objects alone: DecodeRecord reads the first value, and the
	// dissector flags what follows (bullylab.record.trailing).
	trailing := map[int]bool{}
	payloads = append(payloads, `{"version":1,"kind":"heal"} trailing`, `{"version":1,"kind":"heal"}{}`)
	trailing[len(payloads)-2], trailing[len(payloads)-1] = true, true

	var buf bytes.Buffer
	ifc := func(name string) pcapgo.NgInterface {
		return pcapgo.NgInterface{Name: name, OS: runtime.GOOS, LinkType: LinkTypeEvents, SnapLength: DefaultSnapLen}
	}
	w, err := pcapgo.NewNgWriterInterface(&buf, ifc(EventsInterfaceName), pcapgo.NgWriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := w.AddInterface(ifc("other-user0"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	write := func(i int, iface int, data []byte) {
		ci := gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(data), Length: len(data), InterfaceIndex: iface}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range payloads {
		write(i, 0, []byte(p))
	}
	write(len(payloads), other, []byte(`{"version":1,"kind":"crash"}`))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "malformed.pcapng")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	got := tsharkJSON(t, tshark, path, append([]string{"_ws.col.Info", "_ws.col.Protocol", "frame.protocols", "_ws.expert.message"}, recordFields...)...)
	if len(got) != len(payloads)+1 {
		t.Fatalf("tshark printed %d packets of %d", len(got), len(payloads)+1)
	}
	for i, p := range payloads {
		num := int64(i + 1)
		row := got[num]
		experts := row["_ws.expert.message"]
		flagged := slices.ContainsFunc(experts, func(m string) bool { return strings.HasPrefix(m, "Malformed bullylab record") })
		if slices.ContainsFunc(experts, func(m string) bool { return strings.Contains(m, "Lua") || strings.Contains(m, "dissector error") }) {
			t.Errorf("packet %d (%.60q): %q", num, p, experts)
		}
		rec, err := DecodeRecord([]byte(p))
		if err != nil {
			if !flagged {
				t.Errorf("packet %d (%.60q): DecodeRecord: %v; tshark did not flag it: %q", num, p, err, experts)
			}
			if info := row["_ws.col.Info"]; len(info) != 1 || !strings.HasPrefix(info[0], "bullylab: ") {
				t.Errorf("packet %d (%.60q): Info column %q", num, p, info)
			}
			t.Logf("packet %d (%.40q): %v; tshark: %q", num, p, err, experts)
			continue
		}
		if flagged {
			t.Errorf("packet %d (%.60q): DecodeRecord takes it, tshark flagged it: %q", num, p, experts)
		}
		if hasTrailing := slices.ContainsFunc(experts, func(m string) bool { return strings.Contains(m, "after the record's JSON object") }); hasTrailing != trailing[i] {
			t.Errorf("packet %d (%.60q): expert infos %q", num, p, experts)
		}
		checkRecordRow(t, num, rec, row)
		if rec.Kind == "explode" && !slices.ContainsFunc(experts, func(m string) bool { return strings.Contains(m, "unknown to this dissector") }) {
			t.Errorf("packet %d: kind explode not noted as unknown: %q", num, experts)
		}
	}
	row := got[int64(len(payloads)+1)]
	if _, ok := row["bullylab.record.kind"]; ok || !slices.Contains(row["_ws.expert.message"], "User encapsulation not handled: DLT=147, check your Preferences->Protocols->DLT_USER") {
		t.Errorf("a USER0 packet of another interface: %v", row)
	}
}
