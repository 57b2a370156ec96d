package capture

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// MaxAuthFailures bounds AuthReport.Failures and AuthReport.Replays.
const MaxAuthFailures = 20

// minAuthFrame is the shortest authenticated frame: a control frame and
// its tag.
const minAuthFrame = wire.MinFrameLen + wire.TagLen

// maxAuthProbe bounds the positions tried for a frame after missing bytes;
// beyond it the stream's later frames are not verified.
const maxAuthProbe = 4096

// ClusterKeyFile is where the cluster key that verifies the capture at
// capturePath is kept: beside it, the extension replaced by .key
// (run-3.pcapng: run-3.key), as `bullylab bench` and `bullylab up
// --capture` keep it. The file holds the key as `bullylab keygen` writes
// it (wire.WriteKeyFile), mode 0600.
func ClusterKeyFile(capturePath string) string {
	return strings.TrimSuffix(capturePath, filepath.Ext(capturePath)) + ".key"
}

// AuthReport says which frames are authenticated and, given the cluster
// key (AnalyzeOptions.Key), whether they verify (wire/doc.go,
// Authentication).
//
// Each stream (one direction of one TCP connection, Stream.Conn) is
// checked on its own, frame by frame in stream order:
//
//   - Its first frame must be a HELLO whose tag verifies under the key
//     (wire.OpenHello), addressed to the node the stream goes to when that
//     node's ID is known, and, when signed, whose signature verifies and
//     whose member key is the one its sender's first signed HELLO in the
//     capture carried (helloSigners). A stream whose first frame in the capture is not
//     a HELLO began mid-connection if the capture lacks the connection's
//     start (no SYN, or bytes missing before that frame): its frames are
//     not verified. If the capture has the start, the connection did not
//     begin with a HELLO: its first frame fails, as a node would refuse
//     the connection there.
//   - Every later frame must carry a tag that verifies as the connection's
//     next frame, and the HELLO's From. One whose From is another's is
//     dropped by the receiver, which reads on: it fails, and the frames
//     after it are checked.
//   - A frame whose tag does not verify (the HELLO's included, and the
//     first frame of a connection that does not begin with a HELLO) makes
//     the receiver close the connection there: the frames after it on the
//     stream were never read, and are not accepted (AfterFailure), whatever
//     their tags.
//   - Bytes missing from the capture (a gap, or a corrupt frame skipped)
//     may have held frames: an authenticated frame is at least 52 bytes, so
//     n missing bytes held at most n/52 frames, and the next frame's tag is
//     tried at each position it can hold. One that verifies proves the
//     position; one that verifies at none fails, as it did at the
//     receiver. Beyond maxAuthProbe positions the stream's place is lost,
//     and its later frames are not verified.
//
// Freshness (the HELLO's Time) is the receiver's to check against its own
// clock and cannot be checked from a capture; but a HELLO whose nonce an
// earlier HELLO carried is a replay, and is reported as one.
type AuthReport struct {
	// Key says a cluster key was given; without one nothing is verified
	// and only Frames is counted.
	Key bool `json:"key"`
	// Frames counts frames with FlagAuth, HELLOs included.
	Frames int64 `json:"frames"`
	// With the key, every frame of the capture, authenticated or not, is
	// counted in exactly one of Verified, Failed, AfterFailure and
	// Unverified.
	Verified int64 `json:"verified"`
	Failed   int64 `json:"failed"`
	// AfterFailure counts the frames that came after a failed one on its
	// stream: the receiver had closed the connection, so it did not
	// accept them, though their tags may verify.
	AfterFailure int64 `json:"after_failure"`
	// Unverified counts the frames that could not be checked: those of
	// streams without a HELLO in the capture, and those after a frame whose
	// position was lost.
	Unverified int64 `json:"unverified"`
	// Streams counts the streams whose HELLO verified.
	Streams int64 `json:"streams"`
	// WithoutHello counts the streams that began mid-connection, whose
	// HELLO is not in the capture.
	WithoutHello int64 `json:"streams_without_hello"`
	// Lost counts the streams whose position was lost after missing bytes:
	// more frames could be missing than positions are tried.
	Lost int64 `json:"streams_lost"`
	// Replays lists the first MaxAuthFailures HELLOs (that verified) whose
	// nonce an earlier HELLO carried; ReplayCount counts them all.
	Replays     []HelloReplay `json:"replays"`
	ReplayCount int64         `json:"replay_count"`
	// Failures lists the first MaxAuthFailures failures.
	Failures []AuthFailure `json:"failures"`
}

// OK reports whether nothing failed and no HELLO was replayed; without the
// key, trivially.
func (r *AuthReport) OK() bool { return r == nil || r.Failed == 0 && r.ReplayCount == 0 }

// AuthFailure is a frame that failed verification.
type AuthFailure struct {
	Packet int64     `json:"packet"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"` // "src > dst"
	// Frame is the frame's number in its connection, 0 for the HELLO; after
	// missing bytes, the first position it was tried at.
	Frame  uint64 `json:"frame"`
	Type   string `json:"type"`
	From   string `json:"from"` // the sending node
	Reason string `json:"reason"`
}

// HelloReplay is a HELLO whose nonce an earlier HELLO carried.
type HelloReplay struct {
	Packet      int64     `json:"packet"`
	Time        time.Time `json:"time"`
	Stream      string    `json:"stream"`
	From        string    `json:"from"`
	FirstPacket int64     `json:"first_packet"`
	FirstStream string    `json:"first_stream"`
}

// Outcome of one frame's verification.
type authOutcome uint8

const (
	authNone         authOutcome = iota // no key
	authVerified                        // the tag verified at position authResult.Frame
	authFailed                          // see authResult.Reason
	authAfterFailure                    // after a failure that closed the connection
	authUnverified                      // could not be checked
)

// authResult is what authChecker.frame found about one frame.
type authResult struct {
	Outcome authOutcome
	Frame   uint64 // position in the connection, when verified or failed
}

// The state of one stream.
const (
	streamNew     = iota // no frame yet
	streamOpen           // HELLO verified: frames are checked
	streamRefused        // a frame failed and the receiver closed the connection there
	streamNoHello        // began mid-connection: frames not verified
	streamLost           // position lost: frames not verified
)

type authStream struct {
	conn   int64
	state  uint8
	v      *wire.Verifier
	from   uuid.UUID
	lo, hi uint64 // positions the next frame can hold
	next   uint64 // stream offset after the last frame
}

type helloSeen struct {
	pkt    int64
	stream string
}

// authChecker verifies the frames of a capture's streams (see above); the
// analyzer feeds it every frame.
type authChecker struct {
	key *wire.Key
	rep AuthReport
	// streams are the streams' states, by authFrame.slot: a map by
	// *Stream was a tenth of the verification's time, in its lookups.
	streams []*authStream
	// slots counts the slots frame gave streams.
	slots   int32
	nonces  map[[16]byte]helloSeen
	signers helloSigners // see hello.go
}

func newAuthChecker(key *wire.Key) *authChecker {
	c := &authChecker{key: key}
	if key != nil {
		c.rep.Key = true
		c.nonces = map[[16]byte]helloSeen{}
	}
	return c
}

// report returns the report, nil when there is nothing to say: no key and
// no authenticated frame.
func (c *authChecker) report() *AuthReport {
	if !c.rep.Key && c.rep.Frames == 0 {
		return nil
	}
	r := c.rep
	if r.Key {
		if r.Failures == nil {
			r.Failures = []AuthFailure{}
		}
		if r.Replays == nil {
			r.Replays = []HelloReplay{}
		}
	}
	return &r
}

// authFrame is what the verification needs of a Frame: its stream's
// identity and what the stream said when the frame came, its message, and
// its sender's and receiver's names and the receiver's ID (zero when
// unknown).
type authFrame struct {
	slot      int32 // the stream's identity: Stream.authSlot
	conn      int64
	midStream bool
	offset    uint64
	len       int
	packet    int64
	time      time.Time
	src, dst  netip.AddrPort
	msg       wire.Message
	from, to  string
	toID      uuid.UUID
}

// newAuthFrame is what the verification needs of f; a stream that has no
// slot yet takes the next after *slots.
func newAuthFrame(f *Frame, from, to string, toID uuid.UUID, slots *int32) authFrame {
	if f.Stream.authSlot == 0 {
		*slots++
		f.Stream.authSlot = *slots
	}
	return authFrame{slot: f.Stream.authSlot, conn: f.Stream.Conn, midStream: f.Stream.MidStream, offset: f.Offset, len: f.Len,
		packet: f.Packet, time: f.Time, src: f.Src, dst: f.Dst, msg: f.Msg, from: from, to: to, toID: toID}
}

func streamName(f *authFrame) string { return f.src.String() + " > " + f.dst.String() }

// frame checks f, sent by the node named from to the node named to, whose
// ID is toID (zero when unknown).
func (c *authChecker) frame(f *Frame, from, to string, toID uuid.UUID) authResult {
	af := newAuthFrame(f, from, to, toID, &c.slots)
	return c.check(&af)
}

// check checks f as frame does.
func (c *authChecker) check(f *authFrame) authResult {
	m := &f.msg
	from := f.from
	if m.Flags&wire.FlagAuth != 0 {
		c.rep.Frames++
	}
	if c.key == nil {
		return authResult{}
	}
	if n := int(f.slot) - len(c.streams); n > 0 {
		c.streams = append(c.streams, make([]*authStream, n)...)
	}
	as := c.streams[f.slot-1]
	if as == nil || as.conn != f.conn {
		as = &authStream{conn: f.conn}
		c.streams[f.slot-1] = as
	}
	var lost uint64 // bytes missing before f
	if f.offset > as.next {
		lost = f.offset - as.next
	}
	as.next = f.offset + uint64(f.len)

	switch as.state {
	case streamNew:
		if m.Type == wire.TypeHello {
			return c.hello(f, as)
		}
		if f.midStream || f.offset > 0 {
			as.state = streamNoHello
			c.rep.WithoutHello++
			c.rep.Unverified++
			return authResult{Outcome: authUnverified}
		}
		as.state = streamRefused
		return c.fail(f, from, 0, fmt.Sprintf("the connection begins with %s, not a HELLO", m.Type))
	case streamRefused:
		c.rep.AfterFailure++
		return authResult{Outcome: authAfterFailure}
	case streamNoHello, streamLost:
		c.rep.Unverified++
		return authResult{Outcome: authUnverified}
	}

	// streamOpen
	as.hi += lost / minAuthFrame
	if as.hi-as.lo >= maxAuthProbe {
		as.state = streamLost
		c.rep.Lost++
		c.rep.Unverified++
		return authResult{Outcome: authUnverified}
	}
	lo, hi := as.lo, as.hi
	for i := lo; i <= hi; i++ {
		as.v.Seek(i)
		if as.v.Verify(m) != nil {
			continue
		}
		as.lo, as.hi = i+1, i+1
		if m.From != as.from {
			return c.fail(f, from, i, fmt.Sprintf("From %s is not the connection's, %s (its HELLO's)", shortID(m.From), shortID(as.from)))
		}
		c.rep.Verified++
		return authResult{Outcome: authVerified, Frame: i}
	}
	var reason string
	switch {
	case m.Flags&wire.FlagAuth == 0:
		reason = "no tag on an authenticated connection"
	case lo == hi:
		reason = "tag mismatch"
	default:
		reason = fmt.Sprintf("tag matches no position from %d to %d (%d bytes missing before it)", lo, hi, lost)
	}
	as.state = streamRefused
	return c.fail(f, from, lo, reason)
}

// hello opens stream as with its first frame f, a HELLO.
func (c *authChecker) hello(f *authFrame, as *authStream) authResult {
	m := &f.msg
	from, to, toID := f.from, f.to, f.toID
	h, _ := wire.DecodeHello(m.Payload) // on error, OpenHello fails below
	v, _, err := wire.OpenHello(c.key, h.To, m)
	if err != nil {
		as.state = streamRefused
		return c.fail(f, from, 0, helloFailure(m, err))
	}
	if toID != (uuid.UUID{}) && h.To != toID {
		as.state = streamRefused
		return c.fail(f, from, 0, fmt.Sprintf("HELLO is for node %s, sent to %s (%s)", shortID(h.To), to, shortID(toID)))
	}
	if reason := c.signers.check(m.From, &h, f.packet); reason != "" {
		as.state = streamRefused
		return c.fail(f, from, 0, reason)
	}
	as.state, as.v, as.from, as.lo, as.hi = streamOpen, v, m.From, 1, 1
	c.rep.Streams++
	c.rep.Verified++
	stream := streamName(f)
	if first, ok := c.nonces[h.Nonce]; ok {
		c.rep.ReplayCount++
		if len(c.rep.Replays) < MaxAuthFailures {
			c.rep.Replays = append(c.rep.Replays, HelloReplay{Packet: f.packet, Time: f.time.UTC(), Stream: stream, From: from,
				FirstPacket: first.pkt, FirstStream: first.stream})
		}
	} else {
		c.nonces[h.Nonce] = helloSeen{f.packet, stream}
	}
	return authResult{Outcome: authVerified}
}

// fail counts f as failed, and lists it while the list has room.
func (c *authChecker) fail(f *authFrame, from string, pos uint64, reason string) authResult {
	c.rep.Failed++
	if len(c.rep.Failures) < MaxAuthFailures {
		c.rep.Failures = append(c.rep.Failures, AuthFailure{Packet: f.packet, Time: f.time.UTC(), Stream: streamName(f),
			Frame: pos, Type: f.msg.Type.String(), From: from, Reason: reason})
	}
	return authResult{Outcome: authFailed, Frame: pos}
}

func shortID(id uuid.UUID) string { return id.String()[:8] }
