package capture

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
)

func TestWriterReorderAndRead(t *testing.T) {
	nodes := synthNodes(2, 7946)
	var buf bytes.Buffer
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	w, err := NewWriter(&buf, WriterOptions{Testbed: TestbedInfo{Topology: "star2", Run: "bl1234", Nodes: nodes}, Window: 100 * time.Millisecond, Start: t0})
	if err != nil {
		t.Fatal(err)
	}
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	frame := func(b byte) []byte { return bytes.Repeat([]byte{b}, 60) }
	// A record stamped before frames the capture delivers later, as with
	// TPACKET_V3 blocks; frames slightly out of order.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteRecord(Record{Time: at(15), Kind: fault.Crash, Nodes: []string{"n2"}, Detail: "SIGKILL pid 4242"}))
	must(w.WriteFrame(0, at(10), frame(1), 0))
	must(w.WriteFrame(1, at(20), frame(3), 0))
	must(w.WriteFrame(0, at(12), frame(2), 0))
	must(w.WriteFrame(0, at(500), frame(4), 0)) // releases everything up to 400
	if w.Stats().Written != 5 {
		t.Errorf("written before flush: %d, want testbed record, 3 frames and the crash", w.Stats().Written)
	}
	must(w.Advance(at(1000)))
	must(w.WriteRecord(Record{Time: at(5), Kind: fault.Heal})) // too late: written at once
	must(w.WriteFrame(1, at(1200), frame(5), 0))               // still buffered at Close
	must(w.Close())
	if st := w.Stats(); st.Late != 1 {
		t.Errorf("late: %d", st.Late)
	}

	rd, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var comments []string
	var end *Record
	for p := range packetsOf(t, rd) {
		switch {
		case p.Record != nil:
			kinds = append(kinds, string(p.Record.Kind))
			comments = append(comments, p.Comments...)
			if p.Record.Kind == KindEnd {
				end = p.Record
			}
			if p.Record.Kind == KindTestbed && (p.Record.Testbed == nil || len(p.Record.Testbed.Nodes) != 2 || p.Record.Testbed.Nodes[1].Addr != netip.MustParseAddr("10.77.0.3")) {
				t.Errorf("testbed record: %+v", p.Record.Testbed)
			}
		default:
			kinds = append(kinds, p.Iface.Name+":"+string('0'+rune(p.Data[0])))
			if p.Iface.Node == nil || p.Iface.Node.Name != p.Iface.Name || p.Iface.Node.ID != nodes[p.CI.InterfaceIndex].ID {
				t.Errorf("interface %+v", p.Iface)
			}
		}
	}
	want := []string{"testbed", "n1:1", "n1:2", "crash", "n2:3", "n1:4", "heal", "n2:5", "end"}
	if end == nil || end.Capture == nil || end.Capture.Written != uint64(len(kinds)) || end.Capture.Late != 1 {
		t.Errorf("end record %+v, want %d packets written, 1 late", end, len(kinds))
	}
	if len(kinds) != len(want) {
		t.Fatalf("order %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("order %v, want %v", kinds, want)
		}
	}
	if comments[1] != "bullylab: crash n2 (SIGKILL pid 4242)" || comments[0] != "bullylab: testbed star2 run bl1234, 2 nodes" {
		t.Errorf("comments %q", comments)
	}
	ifaces := rd.Interfaces()
	if len(ifaces) != 3 || !ifaces[2].Events || ifaces[2].LinkType != LinkTypeEvents {
		t.Errorf("interfaces %+v", ifaces)
	}
}

func TestRecordComment(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want string
	}{
		{Record{Kind: fault.Partition, Groups: [][]string{{"n1", "n2"}, {"n3"}}}, "bullylab: partition n1,n2 | n3"},
		{Record{Kind: fault.Partition, Groups: [][]string{{"n1"}, {"n2", "n3"}}, OneWay: true}, "bullylab: partition n1 -> n2,n3"},
		{Record{Kind: fault.Delay, Nodes: []string{"n3"}, Detail: "50ms jitter 5ms"}, "bullylab: delay n3 (50ms jitter 5ms)"},
		{Record{Kind: fault.Heal}, "bullylab: heal"},
	} {
		if got := tc.r.Comment(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

// FuzzReader reads arbitrary bytes as a capture: errors, never panics, and
// Analyze says which packet was bad.
func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	s := newSynth(f, &buf, 3, 11)
	for i := range s.live {
		s.live[i] = true
	}
	s.elect(0, 0, 1)
	s.close(f)
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:200])
	f.Add(buf.Bytes()[:len(buf.Bytes())-50])
	f.Fuzz(func(t *testing.T, data []byte) {
		oneLine := func(err error) {
			if err != nil && err != io.EOF && (strings.ContainsAny(err.Error(), "\r\n") || len(err.Error()) > 1024) {
				t.Fatalf("error is not one short line: %.2000q", err)
			}
		}
		rd, err := NewReader(bytes.NewReader(data))
		oneLine(err)
		if err == nil {
			for range 10000 {
				_, err := rd.Next()
				oneLine(err)
				if err != nil {
					break
				}
			}
		}
		rep, err := Analyze(bytes.NewReader(data), AnalyzeOptions{Name: "fuzz.pcapng"})
		oneLine(err)
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz.pcapng: ") {
			t.Fatalf("error does not name the file: %q", err)
		}
		if err == nil {
			for _, w := range rep.Warnings() {
				oneLine(errors.New(w))
			}
			if tr := rep.Truncated; tr != nil && (tr.Packets != rep.Packets || tr.Packets < 1 || tr.WholeBytes > tr.SizeBytes || tr.SizeBytes != int64(len(data))) {
				t.Fatalf("truncation %+v of %d bytes, %d packets analyzed", *tr, len(data), rep.Packets)
			}
		}
		_, err = DecodeRecord(data)
		oneLine(err)
		_, _ = parseNodeDescription(string(data))
	})
}
