package node

import (
	"net"
	"sync"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/google/uuid"
)

// PeerIssue says what a peer, or whoever connected to the node, did wrong.
// The transport and the Node count every one (CounterSnapshot.PeerIssues)
// and log them as peer_refused records, at most one a second for each
// issue and remote host, so that a hostile or broken peer cannot flood the
// log.
type PeerIssue uint8

const (
	// IssueBadFrame: a framing error (start byte, version, checksum, a frame
	// over MaxFrame); the connection is closed.
	IssueBadFrame PeerIssue = iota
	// IssueAuth: a HELLO or a frame whose tag did not verify, a HELLO for
	// another node, a frame without a tag, or a HELLO to a node without a
	// cluster key; the connection is closed.
	IssueAuth
	// IssueReplay: a HELLO not newer than the last accepted from its
	// sender, or too far from this node's clock (TCPConfig.MaxClockSkew);
	// the connection is closed.
	IssueReplay
	// IssueWrongSender: a frame whose From is not the ID its connection
	// authenticated as (or, without a key, began with); the frame is
	// dropped.
	IssueWrongSender
	// IssueHandshakeTimeout: a connection sent no complete first frame
	// within TCPConfig.HandshakeTimeout; it is closed.
	IssueHandshakeTimeout
	// IssueFrameTimeout: a frame begun was not completed within
	// TCPConfig.FrameTimeout (a peer dripping bytes, or stuck); the
	// connection is closed.
	IssueFrameTimeout
	// IssueTooManyConnections: a connection over TCPConfig.MaxInbound, or
	// over MaxUnauthenticatedPerHost from one host; it is closed at once.
	IssueTooManyConnections
	// IssueEpochWindow: a message whose epoch is more than
	// election.EpochWindow ahead of the node's, or beyond election.MaxEpoch;
	// the Machine ignores it (election.CauseEpochWindow).
	IssueEpochWindow
	// IssueMembership: a JOIN, LEAVE or MEMBERS the Machine refused
	// (election.CauseMembership): an unsolicited MEMBERS, a list over
	// election.Config.MaxMembers, a JOIN from an unknown ID without
	// authentication.
	IssueMembership
	// IssueMalformed: a payload that does not decode; the frame is dropped.
	IssueMalformed
	// IssueSignature: a HELLO whose member key signature does not verify,
	// that is signed by a key other than its sender's, or that is not
	// signed where member keys are required (TCPConfig.PeerKeys); the
	// connection is closed.
	IssueSignature
	// IssueAlgorithm: a frame of another election algorithm than the one
	// the node runs (election.CauseAlgorithm); the Machine ignores it.
	IssueAlgorithm
	numPeerIssues
)

var peerIssueNames = [numPeerIssues]string{
	IssueBadFrame:           "bad_frame",
	IssueAuth:               "auth_failed",
	IssueReplay:             "replayed_hello",
	IssueWrongSender:        "wrong_sender",
	IssueHandshakeTimeout:   "handshake_timeout",
	IssueFrameTimeout:       "frame_timeout",
	IssueTooManyConnections: "too_many_connections",
	IssueEpochWindow:        "epoch_window",
	IssueMembership:         "membership",
	IssueMalformed:          "malformed_payload",
	IssueSignature:          "bad_signature",
	IssueAlgorithm:          "wrong_algorithm",
}

// issueOfRefusal is the PeerIssue under which a Machine's refusal is
// counted and logged. A cause added to election needs its issue here.
func issueOfRefusal(c election.RefusalCause) PeerIssue {
	switch c {
	case election.CauseEpochWindow:
		return IssueEpochWindow
	case election.CauseMembership:
		return IssueMembership
	case election.CauseAlgorithm:
		return IssueAlgorithm
	}
	return IssueMalformed // a cause without its own issue: still counted
}

func (i PeerIssue) String() string {
	if i < numPeerIssues {
		return peerIssueNames[i]
	}
	return "unknown"
}

// issueLogInterval is how often one kind of issue from one remote host is
// logged at most; the ones in between are counted in the next record.
const issueLogInterval = time.Second

// maxIssueKeys bounds the rate limiter's memory: past it, it starts over,
// which at worst logs a few more lines.
const maxIssueKeys = 4096

type issueKey struct {
	issue PeerIssue
	host  string
}

type issueState struct {
	last       time.Time
	suppressed uint64
}

// issueReporter counts and logs PeerIssues, rate-limited.
type issueReporter struct {
	counters *Counters
	log      *EventLog
	now      func() time.Time

	mu   sync.Mutex
	seen map[issueKey]*issueState
}

func newIssueReporter(c *Counters, log *EventLog) *issueReporter {
	return &issueReporter{counters: c, log: log, now: time.Now, seen: make(map[issueKey]*issueState)}
}

// report counts issue and logs it unless one like it from the same host was
// logged within issueLogInterval. remote is the connection's remote address
// or, for the Machine's refusals, the member's address; peer is uuid.Nil
// when the sender is not known.
func (r *issueReporter) report(issue PeerIssue, remote string, peer uuid.UUID, detail string) {
	r.counters.peerIssues[issue].Add(1)
	if r.log == nil {
		return
	}
	host := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		host = h
	}
	now := r.now()
	r.mu.Lock()
	st := r.seen[issueKey{issue, host}]
	if st == nil {
		if len(r.seen) >= maxIssueKeys {
			clear(r.seen)
		}
		st = &issueState{}
		r.seen[issueKey{issue, host}] = st
	} else if now.Sub(st.last) < issueLogInterval {
		st.suppressed++
		r.mu.Unlock()
		return
	}
	suppressed := st.suppressed
	st.last, st.suppressed = now, 0
	r.mu.Unlock()
	rec := LogRecord{Event: "peer_refused", Reason: issue.String(), PeerAddr: remote, Error: bounded.Clip(detail, 200), Suppressed: suppressed}
	if peer != uuid.Nil {
		rec.Peer = peer.String()
	}
	r.log.Write(rec)
}
