package capture

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// splitCapture writes the frames of each host's nodes (hosts[k] lists node
// indexes) to a capture of its own, on a clock ahead by ahead[k], with the
// host's copy of each record, as every host's lab writes them; it returns
// the captures and the records on the true clock.
func splitCapture(t *testing.T, data []byte, hosts [][]int, ahead []time.Duration) ([]*bytes.Buffer, []Record, TestbedInfo) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var tb TestbedInfo
	var recs []Record
	out := make([]*bytes.Buffer, len(hosts))
	ws := make([]*Writer, len(hosts))
	hostOf := map[int]int{}
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Record != nil {
			switch p.Record.Kind {
			case KindTestbed:
				tb = *p.Record.Testbed
				for k, idx := range hosts {
					share := tb
					share.Nodes = nil
					for _, n := range tb.Nodes {
						if slices.Contains(idx, n.Index) {
							share.Nodes = append(share.Nodes, n)
							hostOf[n.Index] = k
						}
					}
					out[k] = &bytes.Buffer{}
					if ws[k], err = NewWriter(out[k], WriterOptions{Testbed: share, Window: -1, Start: p.Record.Time.Add(ahead[k])}); err != nil {
						t.Fatal(err)
					}
				}
			case KindEnd:
			default:
				recs = append(recs, *p.Record)
				for k, w := range ws {
					rec := *p.Record
					rec.Time = rec.Time.Add(ahead[k])
					if err := w.WriteRecord(rec); err != nil {
						t.Fatal(err)
					}
				}
			}
			continue
		}
		k := hostOf[p.Iface.Node.Index]
		iface, _ := ws[k].NodeInterface(p.Iface.Node.Index)
		if err := ws[k].WriteFrame(iface, p.CI.Timestamp.Add(ahead[k]), p.Data, p.CI.Length); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out, recs, tb
}

// Merging the captures of two hosts whose clocks are 3 ms ahead and 7 ms
// behind, measured within 50 us, gives back the capture of one clock: the
// same frames, messages and elections, each time to leader within the
// merged file's error bound. The acknowledgements across the hosts bound
// each offset more tightly than the measurement did, and the truth stays
// within it.
func TestMergeHosts(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 7)
	s.benchScenario(2000)
	s.close(t)
	want := analyzeBytes(t, buf.Bytes())

	hosts := [][]int{{1, 3, 5}, {2, 4}}
	ahead := []time.Duration{3 * time.Millisecond, -7 * time.Millisecond}
	caps, recs, tb := splitCapture(t, buf.Bytes(), hosts, ahead)
	const bound = 50 * time.Microsecond
	measured := []time.Duration{ahead[0] + 20*time.Microsecond, ahead[1] - 15*time.Microsecond}
	inputs := []MergeInput{
		{Host: "h1", Nodes: []string{"n1", "n3", "n5"}, R: caps[0], Offset: measured[0], Bound: bound},
		{Host: "h2", Nodes: []string{"n2", "n4"}, R: caps[1], Offset: measured[1], Bound: bound},
	}
	var merged bytes.Buffer
	res, err := Merge(&merged, inputs, MergeOptions{Testbed: tb, Records: recs, RecordBound: bound})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inconsistent {
		t.Fatalf("the captures contradict offsets that hold: %+v", res.Hosts)
	}
	for k, h := range res.Hosts {
		off, b := time.Duration(h.OffsetNS), time.Duration(h.BoundNS)
		if off-b > ahead[k] || off+b < ahead[k] {
			t.Errorf("%s: offset %v ± %v does not hold the true %v", h.Name, off, b, ahead[k])
		}
		if b >= bound || h.Acks == 0 {
			t.Errorf("%s: bound %v from %d acknowledgements: want tighter than the measured %v", h.Name, b, h.Acks, bound)
		}
		t.Logf("%s: measured %v ± %v, tightened to %v ± %v by %d acknowledgements", h.Name, measured[k], bound, off, b, h.Acks)
	}
	// Each node's interface says which host captured it, and by how much
	// its timestamps were shifted.
	rd, err := NewReader(bytes.NewReader(merged.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	if ifaces := rd.ng.ifaces; len(ifaces) < 2 || !strings.HasPrefix(ifaces[1].comment, "captured on host h2, whose clock was -") { // n2
		t.Errorf("n2's interface comment: %+v", ifaces)
	}
	got := analyzeBytes(t, merged.Bytes())
	if got.Frames != want.Frames || got.Messages != want.Messages || len(got.Elections) != len(want.Elections) {
		t.Fatalf("merged: %d frames %+v, %d elections; one clock: %d frames %+v, %d elections",
			got.Frames, got.Messages, len(got.Elections), want.Frames, want.Messages, len(want.Elections))
	}
	if got.ClockErrorNS != int64(res.ErrorBound) || res.ErrorBound <= 0 {
		t.Errorf("report's clock error %d ns, merge's %v", got.ClockErrorNS, res.ErrorBound)
	}
	for i, e := range got.Elections {
		w := want.Elections[i]
		if e.Leader != w.Leader || e.Epoch != w.Epoch || e.Messages != w.Messages || (e.TimeToLeaderNS == nil) != (w.TimeToLeaderNS == nil) {
			t.Fatalf("election %d: %s epoch %d %+v; one clock: %s epoch %d %+v", e.N, e.Leader, e.Epoch, e.Messages, w.Leader, w.Epoch, w.Messages)
		}
		if e.TimeToLeaderNS != nil {
			if d := time.Duration(*e.TimeToLeaderNS - *w.TimeToLeaderNS).Abs(); d > res.ErrorBound {
				t.Errorf("election %d: time to leader %v, %v on one clock: off by more than the bound %v", e.N,
					time.Duration(*e.TimeToLeaderNS), time.Duration(*w.TimeToLeaderNS), res.ErrorBound)
			}
		}
	}
	if got.Capture == nil {
		t.Error("merged capture has no end record's counters")
	}
}

// Offsets that the captures contradict (a host measured 1 ms off its true
// offset, within a bound of 50 us) are kept as measured, and the result
// says so.
func TestMergeInconsistent(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 3, 3)
	s.benchScenario(200)
	s.close(t)
	caps, recs, tb := splitCapture(t, buf.Bytes(), [][]int{{1, 2}, {3}}, []time.Duration{0, 0})
	inputs := []MergeInput{
		{Host: "h1", R: caps[0], Offset: 0, Bound: 50 * time.Microsecond},
		{Host: "h2", R: caps[1], Offset: time.Millisecond, Bound: 50 * time.Microsecond},
	}
	res, err := Merge(io.Discard, inputs, MergeOptions{Testbed: tb, Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Inconsistent || res.Hosts[1].OffsetNS != int64(time.Millisecond) {
		t.Errorf("contradicted offsets: %+v, inconsistent %v", res.Hosts, res.Inconsistent)
	}
}

// A host's capture that is not pcapng is named in the error.
func TestMergeBadInput(t *testing.T) {
	_, err := Merge(io.Discard, []MergeInput{{Host: "h2", R: bytes.NewReader([]byte("nope"))}}, MergeOptions{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("capture of host h2: ")) {
		t.Errorf("bad input: %v", err)
	}
}

// Whatever a host's capture holds, Merge returns an error or a file, and
// never panics.
func FuzzMerge(f *testing.F) {
	var buf bytes.Buffer
	s := newSynth(f, &buf, 3, 5)
	s.benchScenario(100)
	s.close(f)
	f.Add(buf.Bytes(), int64(0))
	f.Add([]byte("\x0a\x0d\x0d\x0a"), int64(1000))
	f.Fuzz(func(t *testing.T, data []byte, offset int64) {
		in := []MergeInput{{Host: "h1", R: bytes.NewReader(data), Offset: time.Duration(offset), Bound: time.Microsecond}}
		nodes := synthNodes(3, 7946)
		Merge(io.Discard, in, MergeOptions{Testbed: TestbedInfo{Nodes: nodes}})
	})
}

// Hosts' captures whose frames are out of order (a live capture writes a
// frame older than the last one written at once, counted late), merged
// with a start the clocks' error puts after the first frame and a record
// before it, give one file strictly in timestamp order that starts with
// its testbed record, before every packet, and holds every frame.
func TestMergeOrdersInterleavedInputs(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 11)
	s.benchScenario(300)
	s.close(t)
	want := analyzeBytes(t, buf.Bytes())
	hosts := [][]int{{1, 3, 5}, {2, 4}}
	caps, recs, tb := splitCapture(t, buf.Bytes(), hosts, []time.Duration{0, 0})
	late := 0
	for k := range caps {
		var n int
		caps[k], n = swapNeighbours(t, caps[k].Bytes())
		late += n
	}
	if late == 0 {
		t.Fatal("no host capture out of order: the test proves nothing")
	}
	first := firstFrameTime(t, buf.Bytes())
	early := Record{Time: first.Add(-time.Millisecond), Kind: "crash", Nodes: []string{"n5"}}
	recs = append([]Record{early}, recs...)
	inputs := []MergeInput{
		{Host: "h1", Nodes: []string{"n1", "n3", "n5"}, R: caps[0], Bound: time.Microsecond},
		{Host: "h2", Nodes: []string{"n2", "n4"}, R: caps[1], Bound: time.Microsecond},
	}
	var merged bytes.Buffer
	res, err := Merge(&merged, inputs, MergeOptions{Testbed: tb, Records: recs, Start: first.Add(5 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.Late != 0 {
		t.Errorf("merge wrote %d packets late", res.Stats.Late)
	}
	r, err := NewReader(bytes.NewReader(merged.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var start, last time.Time
	frames, disorder := 0, 0
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ts := p.CI.Timestamp
		if p.Num == 1 {
			if p.Record == nil || p.Record.Kind != KindTestbed {
				t.Fatalf("packet 1 is not the testbed record: %+v", p.Record)
			}
			start = ts
		}
		if ts.Before(start) || ts.Before(last) {
			disorder++
			t.Errorf("packet %d at %v: before the start %v or the packet ahead of it, %v", p.Num, ts, start, last)
		}
		last = ts
		if p.Record == nil {
			frames++
		}
	}
	if !start.Equal(early.Time) {
		t.Errorf("merged start %v: want the earliest item's, the record at %v", start, early.Time)
	}
	got := analyzeBytes(t, merged.Bytes())
	if frames != countFrames(t, buf.Bytes()) || got.Frames != want.Frames || got.Messages != want.Messages {
		t.Errorf("merged: %d packets, %d frames %+v; one capture: %d packets, %d frames %+v",
			frames, got.Frames, got.Messages, countFrames(t, buf.Bytes()), want.Frames, want.Messages)
	}
	t.Logf("host captures with %d packets out of order merged with %d out of order", late, disorder)
}

// swapNeighbours rewrites a capture with every two neighbouring frames
// swapped, as a live capture writes frames that come late; it returns
// the capture and how many of its packets are out of order.
func swapNeighbours(t *testing.T, data []byte) (*bytes.Buffer, int) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	type frame struct {
		node int
		ts   time.Time
		data []byte
		olen int
	}
	var frames []frame
	var recs []Record
	var tb *TestbedInfo
	var start time.Time
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Record != nil && p.Record.Kind == KindTestbed:
			tb, start = p.Record.Testbed, p.Record.Time
		case p.Record != nil:
			recs = append(recs, *p.Record)
		default:
			frames = append(frames, frame{p.Iface.Node.Index, p.CI.Timestamp, slices.Clone(p.Data), p.CI.Length})
		}
	}
	for i := 0; i+1 < len(frames); i += 2 {
		frames[i], frames[i+1] = frames[i+1], frames[i]
	}
	out := &bytes.Buffer{}
	w, err := NewWriter(out, WriterOptions{Testbed: *tb, Start: start, Window: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		iface, _ := w.NodeInterface(f.node)
		if err := w.WriteFrame(iface, f.ts, f.data, f.olen); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range recs {
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out, int(w.Stats().Late)
}

// countFrames counts a capture's packets that are not records.
func countFrames(t *testing.T, data []byte) int {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Record == nil {
			n++
		}
	}
}

// firstFrameTime is the time of a capture's first frame.
func firstFrameTime(t *testing.T, data []byte) time.Time {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for {
		p, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p.Record == nil {
			return p.CI.Timestamp
		}
	}
}
