//go:build linux

package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
)

// The beliefs of event logs name leaders by node name, begin each process
// with none, drop the leader when the status leaves normal or the
// process stops, and take the last one back when the status returns to
// normal with no leader_changed.
func TestLogBeliefs(t *testing.T) {
	const idN5 = "50000000-0000-4000-8000-000000000000"
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	ms := func(v int64) int64 { return v * int64(time.Millisecond) }
	parse := func(data []byte) []logEntry {
		es, err := parseEventLog(data)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	n3 := parse(append(logLines(t, t0, 0,
		node.LogRecord{Event: "node_started", Node: idN3},
		node.LogRecord{Event: "leader_changed", MonoNS: ms(10), Node: idN3, Leader: idN5, Epoch: 1},
		node.LogRecord{Event: "status", MonoNS: ms(20), Node: idN3, From: "normal", To: "electing"},
		node.LogRecord{Event: "election_won", MonoNS: ms(30), Node: idN3, Leader: idN3, Epoch: 2},
		node.LogRecord{Event: "status", MonoNS: ms(31), Node: idN3, From: "halting", To: "normal"},
		// An election that ends with the leader it had: no leader_changed.
		node.LogRecord{Event: "status", MonoNS: ms(40), Node: idN3, From: "normal", To: "waiting"},
		node.LogRecord{Event: "status", MonoNS: ms(45), Node: idN3, From: "waiting", To: "normal"}),
		// A second process, restarted at 100ms.
		logLines(t, t0.Add(100*time.Millisecond), 0,
			node.LogRecord{Event: "node_started", Node: idN3},
			node.LogRecord{Event: "leader_changed", MonoNS: ms(5), Node: idN3, Leader: idN5, Epoch: 3},
			node.LogRecord{Event: "node_stopped", MonoNS: ms(9), Node: idN3})...))
	n5 := parse(logLines(t, t0, 0,
		node.LogRecord{Event: "node_started", Node: idN5},
		node.LogRecord{Event: "election_won", MonoNS: ms(1), Node: idN5, Leader: idN5, Epoch: 1}))
	bs, ok := logBeliefs([]nodeLog{{node: "n3", entries: n3}, {node: "n5", entries: n5}})
	if !ok {
		t.Fatal("logs refused")
	}
	want := []belief{
		{at: t0}, {at: t0.Add(10 * time.Millisecond), leader: "n5", epoch: 1}, {at: t0.Add(20 * time.Millisecond)},
		{at: t0.Add(30 * time.Millisecond), leader: "n3", epoch: 2},
		{at: t0.Add(40 * time.Millisecond)}, {at: t0.Add(45 * time.Millisecond), leader: "n3", epoch: 2},
		{at: t0.Add(100 * time.Millisecond)}, {at: t0.Add(105 * time.Millisecond), leader: "n5", epoch: 3},
		{at: t0.Add(109 * time.Millisecond)},
	}
	if got := bs["n3"]; len(got) != len(want) {
		t.Fatalf("n3's beliefs %+v, want %+v", got, want)
	}
	for i, b := range bs["n3"] {
		if !b.at.Equal(want[i].at) || b.leader != want[i].leader || b.epoch != want[i].epoch {
			t.Errorf("n3's belief %d: %+v, want %+v", i, b, want[i])
		}
	}
	if got := bs["n5"]; len(got) != 2 || got[1].leader != "n5" {
		t.Errorf("n5's beliefs %+v", got)
	}
	if _, ok := logBeliefs([]nodeLog{{node: "n3", err: errors.New("unexpected end of JSON input")}}); ok {
		t.Error("a log that could not be read gave beliefs")
	}
}
