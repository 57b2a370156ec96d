package node

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// The event log has one record per Machine event, plus node_started,
// node_stopped and node_counters from the runtime. In the JSON format (LogJSON) each record is
// one JSON object on its own line. These field names are stable; tools parse
// them:
//
//	time       string  wall clock when the record was written, RFC 3339 with
//	                   nanoseconds, UTC
//	mono_ns    int     the node's monotonic clock (ns since the process
//	                   started its node): the Machine's time of the event.
//	                   A record is written at or after its event, so time
//	                   less mono_ns is at or after the wall-clock time at
//	                   which mono_ns was 0; the least of these over a
//	                   process's records (node_started's, written as the
//	                   clock starts, is within microseconds) puts its
//	                   events on the wall clock
//	node       string  the ID of the node writing the log
//	event      string  one of the kinds below
//
// and, by kind (absent fields are omitted):
//
//	status            from, to: "electing" | "halting" | "waiting" | "normal"
//	                  (from is absent at boot; the ring is only ever
//	                  "electing", taking part in a run, or "normal")
//	election_started  reason: "boot" | "leader-failed" | "bullied" |
//	                  "lower-leader" | "wait-timeout" | "leader-left" |
//	                  "outvoted" | "manual" | "leader-crashed"
//	election_won      leader (this node), epoch
//	leader_changed    leader, epoch
//	member_joined     peer, peer_addr; by: the member whose message
//	                  announced it (the joiner itself, or the seed whose
//	                  MEMBERS listed it)
//	member_left       peer, peer_addr
//	peer_refused      reason: a PeerIssue name ("bad_frame", "auth_failed",
//	                  "replayed_hello", "wrong_sender", "handshake_timeout",
//	                  "frame_timeout", "too_many_connections",
//	                  "epoch_window", "membership", "malformed_payload",
//	                  "bad_signature", "wrong_algorithm");
//	                  peer_addr: the remote address (the member's address
//	                  for the Machine's refusals); peer when known; error:
//	                  what was wrong; suppressed: records of the same reason
//	                  and host left out since the last (at most one a
//	                  second each)
//	node_started      algorithm: the election algorithm, "bully" | "ring";
//	                  addr, pid, restored (true when state was loaded from
//	                  disk), epoch (the highest epoch restored; absent when 0),
//	                  metrics (the Prometheus address, when served),
//	                  identity: what proves a peer's ID here, "member_keys"
//	                  (signed HELLOs), "cluster_key" (the key alone: any
//	                  member can claim any ID) or "none" (insecure)
//	node_stopped      reason: "shutdown" | "left" | "error"; error when
//	                  reason is "error"
//	node_counters     sent: the frames the process wrote to its sockets over
//	                  its life, by wire type name (types it never sent are
//	                  absent); written by Serve after node_stopped, once the
//	                  transport has closed, so that the counts are final: a
//	                  capture of the process's whole life holds exactly these
//
// The text format (LogText) is for people and may change: one line per
// record, "TIME NODE8 EVENT key=value ...", with IDs cut to 8 hex digits.

// LogFormat selects how an EventLog writes records.
type LogFormat int

const (
	// LogJSON writes JSON lines with the documented schema.
	LogJSON LogFormat = iota
	// LogText writes one human-readable line per record.
	LogText
)

// ParseLogFormat maps "json" or "text" to a LogFormat.
func ParseLogFormat(s string) (LogFormat, error) {
	switch s {
	case "json":
		return LogJSON, nil
	case "text":
		return LogText, nil
	}
	return 0, fmt.Errorf("unknown log format %q (want json or text)", s)
}

// LogRecord is one event log entry; its JSON encoding is the documented
// schema.
type LogRecord struct {
	Time     string `json:"time"`
	MonoNS   int64  `json:"mono_ns"`
	Node     string `json:"node"`
	Event    string `json:"event"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Leader   string `json:"leader,omitempty"`
	Epoch    uint64 `json:"epoch,omitempty"`
	Peer     string `json:"peer,omitempty"`
	PeerAddr string `json:"peer_addr,omitempty"`
	By       string `json:"by,omitempty"`
	Addr     string `json:"addr,omitempty"`
	// Metrics is node_started's Prometheus endpoint address, when it
	// serves one: the port bound for a --metrics of port 0.
	Metrics string `json:"metrics,omitempty"`
	// Identity is node_started's account of what proves a peer's ID here.
	Identity string `json:"identity,omitempty"`
	// Algorithm is node_started's election algorithm (AlgorithmBully,
	// AlgorithmRing).
	Algorithm string `json:"algorithm,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Restored  bool   `json:"restored,omitempty"`
	Error     string `json:"error,omitempty"`
	// Sent is node_counters' counts by wire type name.
	Sent map[string]uint64 `json:"sent,omitempty"`
	// Suppressed is how many records like this one were not written since
	// the last (peer_refused's rate limit).
	Suppressed uint64 `json:"suppressed,omitempty"`
}

// EventLog writes event records to an io.Writer. It is safe for
// concurrent use; write errors are ignored, as a full disk must not stop an
// election.
type EventLog struct {
	mu     sync.Mutex
	w      io.Writer // nil once silenced
	format LogFormat
	node   uuid.UUID
	buf    []byte
	// held is set between hold and release, when records wait in buf.
	held bool
	now  func() time.Time // for tests
}

// NewEventLog returns a log writing records of node id to w.
func NewEventLog(w io.Writer, format LogFormat, id uuid.UUID) *EventLog {
	return &EventLog{w: w, format: format, node: id, now: time.Now}
}

// RecordOf converts a Machine event into a Record, leaving Time and Node to
// the writer.
func RecordOf(e election.Event) LogRecord {
	r := LogRecord{MonoNS: int64(e.At), Event: string(e.Kind)}
	switch e.Kind {
	case election.EventStatus:
		if e.From != 0 {
			r.From = e.From.String()
		}
		r.To = e.To.String()
	case election.EventElectionStarted:
		r.Reason = e.Reason.String()
	case election.EventElectionWon, election.EventLeaderChanged:
		r.Leader = e.Leader.String()
		r.Epoch = e.Epoch
	case election.EventMemberJoined, election.EventMemberLeft:
		r.Peer = e.Peer.ID.String()
		r.PeerAddr = e.Peer.Addr
		if e.By != uuid.Nil {
			r.By = e.By.String()
		}
	case election.EventRefused:
		r.Event = "peer_refused"
		r.Reason = issueOfRefusal(e.Cause).String()
		r.Peer = e.Peer.ID.String()
		r.PeerAddr = e.Peer.Addr
		r.Error = e.Detail
	}
	return r
}

// silence drops every record from now on: a node killed as SIGKILL would
// kill its process writes nothing more.
func (l *EventLog) silence() {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.w, l.buf = nil, l.buf[:0]
	l.mu.Unlock()
}

// Event writes one Machine event.
func (l *EventLog) Event(e election.Event) { l.Write(RecordOf(e)) }

// Write fills in r's Time and Node and writes it, or keeps it for release.
func (l *EventLog) Write(r LogRecord) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return
	}
	r.Time = l.now().UTC().Format(time.RFC3339Nano)
	r.Node = l.node.String()
	if !l.held {
		l.buf = l.buf[:0]
	}
	switch l.format {
	case LogText:
		l.buf = appendText(l.buf, &r)
	default:
		b, err := json.Marshal(&r)
		if err != nil {
			return
		}
		l.buf = append(append(l.buf, b...), '\n')
	}
	if !l.held {
		l.w.Write(l.buf)
	}
}

// hold keeps the records written from now on until release writes them
// all in one call: a node logs a flush's events on the path of its
// election messages, where each write(2) costs about 2 µs on a VM.
func (l *EventLog) hold() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		l.held, l.buf = true, l.buf[:0]
	}
}

// release writes the records held since hold.
func (l *EventLog) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && l.w != nil && len(l.buf) > 0 {
		l.w.Write(l.buf)
	}
	l.held, l.buf = false, l.buf[:0]
}

const textTimeLayout = "2006-01-02T15:04:05.000000000Z"

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func appendText(b []byte, r *LogRecord) []byte {
	start := len(b)
	b = append(b, r.Time...)
	for len(b)-start < len(textTimeLayout) {
		b = append(b, ' ') // RFC3339Nano drops trailing zeros; keep columns
	}
	b = append(b, ' ')
	b = append(b, short(r.Node)...)
	b = append(b, ' ')
	b = append(b, r.Event...)
	kv := func(k, v string) {
		if v != "" {
			b = append(b, ' ')
			b = append(b, k...)
			b = append(b, '=')
			if strings.ContainsAny(v, " \"=") {
				b = strconv.AppendQuote(b, v)
			} else {
				b = append(b, v...)
			}
		}
	}
	if r.Event == string(election.EventStatus) {
		from := r.From
		if from == "" {
			from = "none"
		}
		b = append(b, ' ')
		b = append(b, from...)
		b = append(b, "->"...)
		b = append(b, r.To...)
	}
	kv("reason", r.Reason)
	kv("leader", short(r.Leader))
	if r.Epoch != 0 || r.Event == string(election.EventElectionWon) || r.Event == string(election.EventLeaderChanged) {
		kv("epoch", strconv.FormatUint(r.Epoch, 10))
	}
	kv("peer", short(r.Peer))
	kv("peer_addr", r.PeerAddr)
	kv("by", short(r.By))
	kv("algorithm", r.Algorithm)
	kv("addr", r.Addr)
	kv("metrics", r.Metrics)
	if r.PID != 0 {
		kv("pid", strconv.Itoa(r.PID))
	}
	if r.Restored {
		kv("restored", "true")
	}
	kv("error", r.Error)
	if r.Suppressed > 0 {
		kv("suppressed", strconv.FormatUint(r.Suppressed, 10))
	}
	if len(r.Sent) > 0 {
		var sent []string
		for _, t := range wire.Types {
			if n := r.Sent[t.String()]; n > 0 {
				sent = append(sent, t.String()+":"+strconv.FormatUint(n, 10))
			}
		}
		kv("sent", strings.Join(sent, ","))
	}
	return append(b, '\n')
}
