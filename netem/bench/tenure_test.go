//go:build linux

package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// logLines writes records as a node's JSON event log does, each written
// lag after the event it records.
func logLines(t testing.TB, origin time.Time, lag time.Duration, recs ...node.LogRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		r.Time = origin.Add(time.Duration(r.MonoNS) + lag).UTC().Format(time.RFC3339Nano)
		line, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

const idN3 = "30000000-0000-4000-8000-000000000000"

func TestParseEventLog(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	data := logLines(t, t0, 0,
		node.LogRecord{Event: "node_started", Node: idN3},
		node.LogRecord{Event: "election_won", MonoNS: 5, Node: idN3, Leader: idN3, Epoch: 2})
	data = append([]byte("runtime: note from the Go runtime\n\n"), data...)
	data = append(data, `{"time":"2026-03-14T09:00:01Z","mono_ns":7,"ev`...) // being written
	es, err := parseEventLog(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Event != "node_started" || es[0].line != 3 || !es[0].wall.Equal(t0) ||
		es[1].Event != "election_won" || es[1].Epoch != 2 || es[1].line != 4 {
		t.Fatalf("entries %+v", es)
	}
	for _, c := range []struct{ in, err string }{
		{`{"time":"2026-03-14T09:00:00Z","mono_ns":1}` + "\n", "line 1:  record: no event"},
		{"x\n" + `{"time":"yesterday","mono_ns":1,"event":"status"}` + "\n", `line 2: status record: time "yesterday" is not RFC 3339`},
		{`{"time":"2026-03-14T09:00:00Z","mono_ns":-1,"event":"status"}` + "\n", "line 1: status record: mono_ns -1 is negative"},
		{`{"time":` + "\n", "line 1: unexpected end of JSON input"},
	} {
		if _, err := parseEventLog([]byte(c.in)); err == nil || err.Error() != c.err {
			t.Errorf("%q: %v, want %s", c.in, err, c.err)
		}
	}
}

// FuzzParseEventLog: any input parses into records with an event and a
// time, or fails with one line naming the line.
func FuzzParseEventLog(f *testing.F) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	f.Add(logLines(f, t0, time.Microsecond,
		node.LogRecord{Event: "node_started", Node: idN3},
		node.LogRecord{Event: "status", MonoNS: 3, Node: idN3, From: "halting", To: "normal"},
		node.LogRecord{Event: "election_won", MonoNS: 3, Node: idN3, Leader: idN3, Epoch: 2}))
	f.Add([]byte("panic: oops\n{\"time\":\"2026-03-14T09:00:00Z\",\"mono_ns\":1,\"event\":\"x\"}\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := parseEventLog(data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "line ") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error %q", msg)
			}
			return
		}
		last := 0
		for _, e := range es {
			if w, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || !w.Equal(e.wall) || e.Event == "" || e.MonoNS < 0 || e.line <= last {
				t.Fatalf("entry %+v", e)
			}
			last = e.line
		}
		// Whatever parses gives spans that end no earlier than they start.
		for _, sp := range logSpans("n", es, time.Time{}) {
			if sp.end.Before(sp.start) {
				t.Fatalf("span %+v", sp)
			}
		}
	})
}

// TestLogSpans: a node's leads by its log, on the wall clock: the first
// process wins epoch 1 and is killed (no record says so: its lead ends
// where the next process begins, and the crash cuts it), the next wins
// epoch 3, follows a higher node, then wins epoch 5 and leaves Normal.
func TestLogSpans(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	t1 := t0.Add(10 * time.Second)
	other := "50000000-0000-4000-8000-000000000000"
	s := time.Second
	data := append(logLines(t, t0, 3*time.Millisecond, // written late: the origin takes the least lag
		node.LogRecord{Event: "node_started", Node: idN3},
		node.LogRecord{Event: "election_won", MonoNS: int64(s), Node: idN3, Leader: idN3, Epoch: 1},
		node.LogRecord{Event: "leader_changed", MonoNS: int64(s), Node: idN3, Leader: idN3, Epoch: 1}),
		logLines(t, t1, 0,
			node.LogRecord{Event: "node_started", Node: idN3, Restored: true, Epoch: 1},
			node.LogRecord{Event: "election_won", MonoNS: int64(2 * s), Node: idN3, Leader: idN3, Epoch: 3},
			node.LogRecord{Event: "leader_changed", MonoNS: int64(3 * s), Node: idN3, Leader: other, Epoch: 4},
			node.LogRecord{Event: "election_won", MonoNS: int64(4 * s), Node: idN3, Leader: idN3, Epoch: 5},
			node.LogRecord{Event: "status", MonoNS: int64(5 * s), Node: idN3, From: "normal", To: "halting"},
			node.LogRecord{Event: "node_stopped", MonoNS: int64(6 * s), Node: idN3, Reason: "shutdown"})...)
	es, err := parseEventLog(data)
	if err != nil {
		t.Fatal(err)
	}
	got := logSpans("n3", es, time.Time{})
	lag := 3 * time.Millisecond
	want := []span{
		{"n3", 1, t0.Add(s + lag), t1},
		{"n3", 3, t1.Add(2 * s), t1.Add(3 * s)},
		{"n3", 5, t1.Add(4 * s), t1.Add(5 * s)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("spans\n%+v, want\n%+v", got, want)
	}
	// The crash at t0+5s cuts the first; the second process's leads
	// began after it and stay.
	tenures := spanTenures(cutSpans(got, []fault.Fault{{Time: t0.Add(5 * s), Kind: fault.Crash, Nodes: []string{"n3"}}}), t0, t1.Add(time.Minute), t1)
	wantT := []Tenure{{"n3", 1, -9*s + lag, -5 * s}, {"n3", 3, 2 * s, 3 * s}, {"n3", 5, 4 * s, 5 * s}}
	if !reflect.DeepEqual(tenures, wantT) {
		t.Errorf("tenures %+v, want %+v", tenures, wantT)
	}
}

// TestCutSpans: a crash or a leave ends a lead begun before it, a pause
// suspends one until the resume, or for good without one, and faults of
// other nodes leave it be.
func TestCutSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f := func(s int, k fault.Kind, nodes ...string) fault.Fault {
		return fault.Fault{Time: at(s), Kind: k, Nodes: nodes}
	}
	sp := span{"n5", 1, at(0), at(10)}
	for _, c := range []struct {
		name   string
		faults []fault.Fault
		want   []span
	}{
		{"none", nil, []span{sp}},
		{"crash", []fault.Fault{f(4, fault.Crash, "n5")}, []span{{"n5", 1, at(0), at(4)}}},
		{"crash before", []fault.Fault{f(-1, fault.Crash, "n5")}, []span{sp}},
		// A claim sent before the kill, on the switch after the lab began
		// the crash but before the process was gone: the dead process's.
		{"crash under way", []fault.Fault{{Time: at(-1), InForce: at(1), Kind: fault.Crash, Nodes: []string{"n5"}}}, nil},
		{"crash before, in force before", []fault.Fault{{Time: at(-2), InForce: at(-1), Kind: fault.Crash, Nodes: []string{"n5"}}}, []span{sp}},
		{"leave", []fault.Fault{f(4, fault.Leave, "n4", "n5")}, []span{{"n5", 1, at(0), at(4)}}},
		{"other node", []fault.Fault{f(4, fault.Crash, "n4"), f(5, fault.Pause, "n3")}, []span{sp}},
		{"pause", []fault.Fault{f(2, fault.Pause, "n5"), f(6, fault.Resume, "n1", "n5")},
			[]span{{"n5", 1, at(0), at(2)}, {"n5", 1, at(6), at(10)}}},
		{"pause for good", []fault.Fault{f(2, fault.Pause, "n5")}, []span{{"n5", 1, at(0), at(2)}}},
		{"paused then killed", []fault.Fault{f(2, fault.Pause, "n5"), f(3, fault.Crash, "n5"), f(4, fault.Resume, "n5")},
			[]span{{"n5", 1, at(0), at(2)}}},
		{"isolated", []fault.Fault{f(2, fault.Isolate, "n5")}, []span{sp}},
	} {
		if got := cutSpans([]span{sp}, c.faults); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestTenureRecordsNext: each tenure names the leader of the next epoch
// led, the first to start among several.
func TestTenureRecordsNext(t *testing.T) {
	s := time.Second
	got := tenureRecords([]Tenure{
		{"n5", 1, -4 * s, 0},
		{"n3", 2, 2 * s, 5 * s}, // a partition's majority
		{"n5", 1, 1 * s, 4 * s}, // the minority's, resumed
		{"n2", 3, 3 * s, 4 * s}, // a shared epoch: n5's came first
		{"n5", 3, 4 * s, 8 * s},
		{"n5", 4, 4 * s, 8 * s},
	})
	next := func(i int) string { return got[i].NextLeader + "/" + string(rune('0'+got[i].NextEpoch)) }
	for i, want := range []string{"n3/2", "n2/3", "n3/2", "n5/4", "n5/4", "/0"} {
		if next(i) != want {
			t.Errorf("tenure %d (%+v): next %s, want %s", i, got[i], next(i), want)
		}
	}
	if got[0].StartNS != int64(-4*s) || got[0].EndNS != 0 || got[0].Node != "n5" || got[0].Epoch != 1 {
		t.Errorf("record %+v", got[0])
	}
	if tenureRecords(nil) != nil {
		t.Error("records of no tenures")
	}
}

// TestTenureDisagreements holds the two sources to each other.
func TestTenureDisagreements(t *testing.T) {
	ms := time.Millisecond
	s := time.Second
	wire := []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 1600 * ms, 5 * s}}
	never := func(a, b time.Duration) bool { return false }
	slack := 100 * ms
	for _, c := range []struct {
		name    string
		log     []Tenure
		excused func(a, b time.Duration) bool
		want    []string
	}{
		{"agree", []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 1597 * ms, 5 * s}}, never, nil},
		{"epoch", []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 1, 1597 * ms, 5 * s}}, never,
			[]string{"n4 led epoch 1 by its log but epoch 2 by its frames from +1.597s to +5s"}},
		{"log only", []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 1597 * ms, 5 * s}, {"n3", 3, 2 * s, 3 * s}}, never,
			[]string{"n3 led epoch 3 by its log from +2s to +3s, but its frames claim no lead then"}},
		{"short", []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 1597 * ms, 5 * s}, {"n3", 3, 2 * s, 2050 * ms}}, never, nil},
		{"wire only", []Tenure{{"n5", 1, -4 * s, 0}}, never,
			[]string{"n4 led epoch 2 by its frames from +1.6s to +5s, but its log has it lead no epoch then"}},
		{"late", []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 1300 * ms, 5 * s}}, never,
			[]string{"n4's lead of epoch 2 began at +1.3s by its log but at +1.6s by its frames"}},
		{"late in a disruption", []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 1300 * ms, 5 * s}},
			func(a, b time.Duration) bool { return a >= s && b <= 2*s }, nil},
	} {
		got := tenureDisagreements(wire, c.log, slack, c.excused)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCheckTenureSources: the checks take both sources' tenures, list
// them with their successors, and fail a run whose sources disagree, or
// whose logs could not be read, on tenures, after safety.
func TestCheckTenureSources(t *testing.T) {
	s := time.Second
	wire := []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 2 * s, 5 * s}}
	in := CheckInput{Tenures: wire, LogTenures: []Tenure{{"n5", 1, -4 * s, 0}, {"n4", 2, 2 * s, 5 * s}},
		CompareLogs: true, TenureSlack: 100 * time.Millisecond, Convergence: dur(2 * s), Bound: 5 * s}
	c := Check(in)
	if kind, reason := c.Failure(); kind != "" {
		t.Fatalf("agreeing sources fail: %s %s", kind, reason)
	}
	if len(c.Tenures) != 2 || len(c.LogTenures) != 2 || c.LogTenures[0].NextLeader != "n4" || c.LogTenures[0].NextEpoch != 2 {
		t.Errorf("tenures %+v, log tenures %+v", c.Tenures, c.LogTenures)
	}
	// The log's epoch 0 for the first leader: a failure naming node,
	// epochs and times; LeadersPerEpoch lists both.
	in.LogTenures = []Tenure{{"n5", 0, -4 * s, 0}, {"n4", 2, 2 * s, 5 * s}}
	c = Check(in)
	kind, reason := c.Failure()
	if kind != results.FailTenures || reason != "n5 led epoch 0 by its log but epoch 1 by its frames from -4s to +0s" {
		t.Errorf("failure %s %q", kind, reason)
	}
	if len(c.LeadersPerEpoch) != 3 || c.LeadersPerEpoch[0].Epoch != 0 {
		t.Errorf("leaders per epoch %+v", c.LeadersPerEpoch)
	}
	// A log's overlap with another node's lead is a split brain like the
	// capture's.
	in.LogTenures = []Tenure{{"n5", 1, -4 * s, 2500 * time.Millisecond}, {"n4", 2, 2 * s, 5 * s}}
	if kind, _ := Check(in).Failure(); kind != results.FailSafety {
		t.Errorf("split brain by the log: %q, want safety", kind)
	}
	in.LogTenures, in.LogProblems = nil, []string{"n3's event log: line 4: status record: no event"}
	if kind, reason := Check(in).Failure(); kind != results.FailTenures || reason != in.LogProblems[0] {
		t.Errorf("unreadable log: %s %q", kind, reason)
	}
	// Without logs to compare, none are shown or held.
	c = Check(CheckInput{Tenures: wire, Convergence: dur(2 * s), Bound: 5 * s})
	if kind, _ := c.Failure(); kind != "" || c.LogTenures != nil {
		t.Errorf("no logs: %q, log tenures %+v", kind, c.LogTenures)
	}
}

func dur(d time.Duration) *time.Duration { return &d }

// TestTenuresOfCaptureAndLogs derives both sources' tenures of a capture
// in which n4 leads epoch 1 and crashes, and n3 takes epoch 2, with the
// logs the nodes would write: they agree. A log that has the first leader
// lead epoch 0 while its frames carry epoch 1 (a bug the nodes had) is a
// failure naming it; one that has n3 win n4's epoch is a shared epoch
// too.
func TestTenuresOfCaptureAndLogs(t *testing.T) {
	data, crash, halt, _ := haltFirstCapture(t)
	rep, err := capture.Analyze(bytes.NewReader(data), capture.AnalyzeOptions{Name: "halt-first.pcapng"})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topologies.Star(4)
	if err != nil {
		t.Fatal(err)
	}
	faults := []fault.Fault{{Time: crash, Kind: fault.Crash, Nodes: []string{"n4"}}}
	end := rep.End.Add(time.Second)
	agreed := &lab.Leader{Node: "n3", Nodes: []string{"n1", "n2", "n3"}, At: rep.End}
	in := checkInput(rep, topo, faults, crash, agreed, crash, end, 2*time.Second)
	won := halt.Add(390 * time.Microsecond) // n3 answered n1 after the last HALT_ACK; its COORDINATOR is 100us later
	wantWire := []Tenure{
		{Node: "n4", Epoch: 1, Start: rep.Start.Sub(crash), End: 0},
		{Node: "n3", Epoch: 2, Start: won.Add(100 * time.Microsecond).Sub(crash), End: end.Sub(crash)},
	}
	if !reflect.DeepEqual(in.Tenures, wantWire) {
		t.Fatalf("capture's tenures %+v, want %+v", in.Tenures, wantWire)
	}
	id := func(i int) string { return rep.Nodes[i-1].ID.String() }
	boot := rep.Start.Add(-time.Minute)
	logs := func(n4epoch, n3epoch uint64) []nodeLog {
		var out []nodeLog
		for _, c := range []struct {
			name string
			data []byte
		}{
			{"n4", logLines(t, boot, 0,
				node.LogRecord{Event: "node_started", Node: id(4)},
				node.LogRecord{Event: "election_won", MonoNS: int64(time.Second), Node: id(4), Leader: id(4), Epoch: n4epoch})},
			{"n3", logLines(t, boot, 0,
				node.LogRecord{Event: "node_started", Node: id(3)},
				node.LogRecord{Event: "leader_changed", MonoNS: int64(time.Second), Node: id(3), Leader: id(4), Epoch: n4epoch},
				node.LogRecord{Event: "status", MonoNS: int64(halt.Sub(boot) - 10*time.Microsecond), Node: id(3), From: "normal", To: "halting"},
				node.LogRecord{Event: "election_won", MonoNS: int64(won.Sub(boot)), Node: id(3), Leader: id(3), Epoch: n3epoch})},
		} {
			es, err := parseEventLog(c.data)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, nodeLog{node: c.name, entries: es})
		}
		return out
	}
	in.LogTenures, in.LogProblems = logTenures(logs(1, 2), faults, rep.Start, end, crash)
	in.CompareLogs, in.TenureSlack = true, 100*time.Millisecond
	c := Check(in)
	if len(c.Violations) != 0 {
		t.Errorf("violations %+v; log tenures %+v", c.Violations, in.LogTenures)
	}
	if len(c.LogTenures) != 2 || c.LogTenures[0].NextLeader != "n3" || c.LogTenures[0].NextEpoch != 2 {
		t.Errorf("log tenures %+v", c.LogTenures)
	}
	in.LogTenures, _ = logTenures(logs(0, 2), faults, rep.Start, end, crash)
	want := "n4 led epoch 0 by its log but epoch 1 by its frames from " + fmtOffset(rep.Start.Sub(crash)) + " to +0s"
	if kind, reason := Check(in).Failure(); kind != results.FailTenures || reason != want {
		t.Errorf("failure %s %q, want %q", kind, reason, want)
	}
	in.LogTenures, _ = logTenures(logs(1, 1), faults, rep.Start, end, crash)
	c = Check(in)
	want = "n3 led epoch 1 by its log but epoch 2 by its frames from " + fmtOffset(won.Sub(crash)) + " to " + fmtOffset(end.Sub(crash))
	if kind, _ := c.Failure(); kind != results.FailSafety || !slices.Contains(c.Violations, results.Violation{Property: "tenures", Detail: want}) {
		t.Errorf("violations %+v, want safety (epoch 1 shared) and %q", c.Violations, want)
	}
}
