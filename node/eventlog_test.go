package node

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

func TestEventLogJSONSchema(t *testing.T) {
	id, leader, peer := uuid.New(), uuid.New(), uuid.New()
	var buf bytes.Buffer
	l := NewEventLog(&buf, LogJSON, id)
	l.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC) }
	l.Event(election.Event{At: 5, Kind: election.EventStatus, From: election.StatusElecting, To: election.StatusNormal})
	l.Event(election.Event{At: 6, Kind: election.EventElectionStarted, Reason: wire.ReasonLeaderFailed})
	l.Event(election.Event{At: 7, Kind: election.EventElectionWon, Leader: leader, Epoch: 3})
	l.Event(election.Event{At: 8, Kind: election.EventLeaderChanged, Leader: leader, Epoch: 3})
	l.Event(election.Event{At: 9, Kind: election.EventMemberJoined, Peer: wire.Member{ID: peer, Addr: "h:1"}})
	l.Event(election.Event{At: 10, Kind: election.EventMemberLeft, Peer: wire.Member{ID: peer, Addr: "h:1"}})

	want := []map[string]any{
		{"event": "status", "from": "electing", "to": "normal"},
		{"event": "election_started", "reason": "leader-failed"},
		{"event": "election_won", "leader": leader.String(), "epoch": 3.0},
		{"event": "leader_changed", "leader": leader.String(), "epoch": 3.0},
		{"event": "member_joined", "peer": peer.String(), "peer_addr": "h:1"},
		{"event": "member_left", "peer": peer.String(), "peer_addr": "h:1"},
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, line)
		}
		w := want[i]
		w["time"] = "2026-01-02T03:04:05.000000006Z"
		w["mono_ns"] = float64(5 + i)
		w["node"] = id.String()
		if len(got) != len(w) {
			t.Errorf("line %d: got %v, want %v", i, got, w)
		}
		for k, v := range w {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, got[k], v)
			}
		}
	}
}

func TestEventLogText(t *testing.T) {
	id, leader := uuid.New(), uuid.New()
	var buf bytes.Buffer
	l := NewEventLog(&buf, LogText, id)
	l.Event(election.Event{Kind: election.EventLeaderChanged, Leader: leader, Epoch: 4})
	l.Event(election.Event{Kind: election.EventStatus, To: election.StatusElecting})
	l.Write(LogRecord{Event: "node_counters", Sent: map[string]uint64{"HEARTBEAT": 5, "ELECTION": 2}})
	l.Write(LogRecord{Event: "node_started", Algorithm: AlgorithmRing, Addr: "h:1", PID: 7})
	out := buf.String()
	for _, want := range []string{id.String()[:8] + " leader_changed leader=" + leader.String()[:8] + " epoch=4\n", " status none->electing\n",
		" node_counters sent=ELECTION:2,HEARTBEAT:5\n", " node_started algorithm=ring addr=h:1 pid=7\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("text log lacks %q:\n%s", want, out)
		}
	}
	if _, err := ParseLogFormat("xml"); err == nil {
		t.Error("xml accepted")
	}
}

// writeCounter records each Write it is given.
type writeCounter struct{ writes []string }

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// A flush's records, held, reach the writer in one write, byte for byte
// what writing them one by one gives; a silenced log drops what it held.
func TestEventLogHold(t *testing.T) {
	id, leader := uuid.New(), uuid.New()
	at := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	events := []election.Event{
		{Kind: election.EventLeaderChanged, Leader: leader, Epoch: 4},
		{Kind: election.EventStatus, From: election.StatusElecting, To: election.StatusNormal},
		{Kind: election.EventElectionWon, Leader: leader, Epoch: 4},
	}
	for _, format := range []LogFormat{LogJSON, LogText} {
		var one, held writeCounter
		l1, l2 := NewEventLog(&one, format, id), NewEventLog(&held, format, id)
		l1.now, l2.now = func() time.Time { return at }, func() time.Time { return at }
		l2.hold()
		for _, e := range events {
			l1.Event(e)
			l2.Event(e)
		}
		if len(held.writes) != 0 {
			t.Fatalf("%v: %d writes before release", format, len(held.writes))
		}
		l2.release()
		if len(one.writes) != len(events) || len(held.writes) != 1 || held.writes[0] != strings.Join(one.writes, "") {
			t.Errorf("%v: held %q, one by one %q", format, held.writes, one.writes)
		}
		l2.Event(events[0]) // released: written at once
		if len(held.writes) != 2 {
			t.Errorf("%v: %d writes after release and one record, want 2", format, len(held.writes))
		}
		l2.hold()
		l2.Event(events[0])
		l2.silence()
		l2.release()
		if len(held.writes) != 2 {
			t.Errorf("%v: a silenced log wrote what it held", format)
		}
	}
}
