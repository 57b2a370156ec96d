//go:build linux

package bench

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// TestCheckCutExcusesTwoLeaders: a node cut from the leader alone (the
// network still connected through the others) may elect itself, and the
// two leaders until the heal, and the bound after it, are a cut's to
// excuse as a partition's are; without the cut they break safety.
func TestCheckCutExcusesTwoLeaders(t *testing.T) {
	topo, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rep := &capture.Report{Start: t0, Claims: []capture.LeaderClaim{
		{Node: "n3", Epoch: 1, Time: t0.Add(100 * time.Millisecond), Packet: 7},
		{Node: "n2", Epoch: 2, Time: at(2), Packet: 9},
	}}
	const bound = 5 * time.Second
	for _, mode := range []fault.CutMode{"", fault.ModeReset} {
		faults := []fault.Fault{
			{Time: at(1), Kind: fault.Cut, Links: [][2]string{{"n2", "n3"}}, Mode: mode},
			{Time: at(4), Kind: fault.Heal},
		}
		in := checkInput(rep, topo, faults, at(4), nil, at(1), at(8), bound)
		want := []Disruption{{Start: 0, End: 3 * time.Second, What: "cut"}}
		if !reflect.DeepEqual(in.Disruptions, want) {
			t.Errorf("mode %q: disruptions %+v, want %+v", mode, in.Disruptions, want)
		}
		if c := Check(in); slices.ContainsFunc(c.Violations, safety) {
			t.Errorf("mode %q: two leaders under a cut: %+v", mode, c.Violations)
		}
	}
	in := checkInput(rep, topo, []fault.Fault{{Time: at(1), Kind: fault.Crash, Nodes: []string{"n1"}}}, at(1), nil, at(1), at(8), bound)
	if c := Check(in); !slices.ContainsFunc(c.Violations, safety) {
		t.Errorf("two leaders with the network connected: no safety violation: %+v", c.Violations)
	}
}

func safety(v results.Violation) bool { return v.Property == "safety" }

// TestClockDisruptions: an offset may cut a node off while it lasts, and a
// clock set back has its reconnections refused for as long as the jump;
// a rate alone severs nothing.
func TestClockDisruptions(t *testing.T) {
	topo, err := topologies.Star(4)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	skew := func(off time.Duration, rate float64) *fault.ClockSkew {
		return &fault.ClockSkew{Offset: off, RatePPM: rate}
	}
	faults := []fault.Fault{
		{Time: at(1), Kind: fault.Clock, Nodes: []string{"n1"}, Clock: skew(-90*time.Second, 0)},
		{Time: at(2), Kind: fault.Clock, Nodes: []string{"n2", "n3"}, Clock: skew(10*time.Second, 0)},
		{Time: at(3), Kind: fault.Clock, Nodes: []string{"n1"}, Clock: skew(0, 0)},
		{Time: at(4), Kind: fault.Clock, Nodes: []string{"n4"}, Clock: skew(0, 500)},
		{Time: at(5), Kind: fault.Clock, Nodes: []string{"n2"}, Clock: skew(0, 0)},
		{Time: at(6), Kind: fault.Clock, Nodes: []string{"n4"}, Clock: skew(0, 0)},
	}
	rep := &capture.Report{Start: t0}
	in := checkInput(rep, topo, faults, at(6), nil, at(1), at(200), time.Second)
	want := []Disruption{
		// Set back 90 s at 1 s: refused until 91 s, though reset at 3 s.
		{Start: 0, End: 90 * time.Second, What: "clock n1"},
		// 10 s ahead until 5 s, then back by 10 s: until 15 s.
		{Start: time.Second, End: 14 * time.Second, What: "clock n2"},
		// Never put back: to the end.
		{Start: time.Second, End: 199 * time.Second, What: "clock n3"},
	}
	if !reflect.DeepEqual(in.Disruptions, want) {
		t.Errorf("disruptions\n%+v, want\n%+v", in.Disruptions, want)
	}
}

// TestClockStretched: a slow clock stretches the node's timeouts on the
// host's clock, and with them the SLE2 bound; a fast one or an offset
// does not.
func TestClockStretched(t *testing.T) {
	clock := func(rate float64) fault.Fault {
		return fault.Fault{Kind: fault.Clock, Nodes: []string{"n1"}, Clock: &fault.ClockSkew{Offset: time.Minute, RatePPM: rate}}
	}
	for _, c := range []struct {
		faults []fault.Fault
		want   time.Duration
	}{
		{nil, 9 * time.Second},
		{[]fault.Fault{clock(50_000), clock(0)}, 9 * time.Second},
		{[]fault.Fault{clock(-50_000), clock(-100_000), clock(2000)}, 10 * time.Second},
	} {
		if got := clockStretched(9*time.Second, c.faults); got != c.want {
			t.Errorf("%+v: %v, want %v", c.faults, got, c.want)
		}
	}
}

// TestLogSpansUnderClockRate: once a clock fault runs a node's monotonic
// clock at a rate, mono_ns no longer counts host time; the records' own
// times, on the host's clock, place its leads from then on, and the
// records before it alone estimate the origin.
func TestLogSpansUnderClockRate(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	s := time.Second
	// From 1 s on the clock runs 10% fast: host 2 s reads mono 2.1 s,
	// host 4 s reads 4.3 s. Each record is written as its event happens.
	recs := []node.LogRecord{
		{Event: "node_started", Node: idN3},
		{Event: "election_won", MonoNS: int64(2100 * time.Millisecond), Node: idN3, Leader: idN3, Epoch: 2},
		{Event: "status", MonoNS: int64(4300 * time.Millisecond), Node: idN3, From: "normal", To: "halting"},
	}
	host := []time.Duration{0, 2 * s, 4 * s}
	var data []byte
	for i, r := range recs {
		data = append(data, logLines(t, t0.Add(host[i]-time.Duration(r.MonoNS)), 0, r)...)
	}
	es, err := parseEventLog(data)
	if err != nil {
		t.Fatal(err)
	}
	got := logSpans("n3", es, t0.Add(s))
	want := []span{{"n3", 2, t0.Add(2 * s), t0.Add(4 * s)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with the rate: spans %+v, want %+v", got, want)
	}
	// Without knowing of the rate, the fast clock pulls the origin back
	// and the lead out of place.
	if blind := logSpans("n3", es, time.Time{}); reflect.DeepEqual(blind, want) {
		t.Errorf("the rate changed nothing: %+v", blind)
	}
	rated := rateStart([]fault.Fault{
		{Time: t0, Kind: fault.Clock, Nodes: []string{"n1"}, Clock: &fault.ClockSkew{Offset: s}},
		{Time: t0.Add(s), Kind: fault.Clock, Nodes: []string{"n3"}, Clock: &fault.ClockSkew{RatePPM: 100_000}},
		{Time: t0.Add(2 * s), Kind: fault.Clock, Nodes: []string{"n3"}, Clock: &fault.ClockSkew{RatePPM: 5}},
	})
	if !reflect.DeepEqual(rated, map[string]time.Time{"n3": t0.Add(s)}) {
		t.Errorf("rateStart %v", rated)
	}
}

// TestCutFaultText: a cut is labelled with its pairs (one-way with ↛,
// many shortened), a clock with its skew, a reset with its mode; a cut
// makes every node's counters an upper bound, as a partition does.
func TestCutFaultText(t *testing.T) {
	names := []string{"n1", "n2", "n3", "n4"}
	for _, c := range []struct {
		f    fault.Fault
		want string
	}{
		{fault.Fault{Kind: fault.Cut, Links: [][2]string{{"n3", "n4"}}}, "cut n3-n4"},
		{fault.Fault{Kind: fault.Cut, Links: [][2]string{{"n4", "n3"}, {"n4", "n2"}}, OneWay: true, Mode: fault.ModeReset}, "cut n4↛n3,n4↛n2 (reset)"},
		{fault.Fault{Kind: fault.Cut, Links: [][2]string{{"n1", "n2"}, {"n1", "n3"}, {"n2", "n3"}, {"n1", "n4"}, {"n2", "n4"}}}, "cut n1-n2,n1-n3,… (5 pairs)"},
		{fault.Fault{Kind: fault.Partition, Groups: [][]string{{"n4"}, {"n1", "n2", "n3"}}, Mode: fault.ModeReset}, "partition n4 | n1,n2,n3 (reset)"},
		{fault.Fault{Kind: fault.Isolate, Nodes: []string{"n4"}, Mode: fault.ModeDrop}, "isolate n4"},
		{fault.Fault{Kind: fault.Clock, Nodes: []string{"n1"}, Clock: &fault.ClockSkew{}}, "clock n1 (back on the host's clock)"},
	} {
		if got := faultText(c.f, names); got != c.want {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
	clock := fault.Fault{Kind: fault.Clock, Nodes: []string{"n1"}, Clock: &fault.ClockSkew{Offset: time.Second, RatePPM: 5}}
	if got, want := faultText(clock, names), "clock n1 ("+clock.Clock.String()+")"; got != want {
		t.Errorf("clock: %q, want %q", got, want)
	}
	topo, err := topologies.Star(4)
	if err != nil {
		t.Fatal(err)
	}
	d := dropping(topo, []fault.Fault{{Kind: fault.Cut, Links: [][2]string{{"n3", "n4"}}}}, names)
	if len(d) != len(names) {
		t.Errorf("dropping under a cut: %v, want every node", d)
	}
	if d := dropping(topo, []fault.Fault{{Kind: fault.Clock, Nodes: names, Clock: &fault.ClockSkew{Offset: time.Second}}}, names); len(d) != 0 {
		t.Errorf("dropping under a clock fault: %v, want none", d)
	}
}

// After a heal the bound allows for the transport's reconnection: a dial
// that failed across the cut and the backoff after it. No other last
// fault stretches it.
func TestHealStretched(t *testing.T) {
	const b = time.Second
	reconnect := node.TCPConfig{}.ReconnectDelay()
	if reconnect != 1500*time.Millisecond {
		t.Errorf("ReconnectDelay() = %v, want the default 500ms dial timeout and 1s backoff", reconnect)
	}
	for _, tc := range []struct {
		kinds []fault.Kind
		want  time.Duration
	}{
		{nil, b},
		{[]fault.Kind{fault.Cut, fault.Heal}, b + reconnect},
		{[]fault.Kind{fault.Isolate, fault.Unisolate}, b + reconnect},
		{[]fault.Kind{fault.Partition, fault.Heal, fault.Crash}, b},
		{[]fault.Kind{fault.Crash}, b},
	} {
		var fs []fault.Fault
		for _, k := range tc.kinds {
			fs = append(fs, fault.Fault{Kind: k})
		}
		if got := healStretched(b, fs); got != tc.want {
			t.Errorf("healStretched(%v, %v) = %v, want %v", b, tc.kinds, got, tc.want)
		}
	}
}
