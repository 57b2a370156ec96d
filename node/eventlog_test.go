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
