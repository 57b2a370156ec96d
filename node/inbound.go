package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// MaxUnauthenticatedPerHost bounds the connections one remote host may hold
// open before their first frame (HELLO) arrived: a peer's own dials pass
// that stage in one round trip, so a host holding more is stalling, and the
// rest of TCPConfig.MaxInbound stays for the other members.
const MaxUnauthenticatedPerHost = 16

// unboundShare is the share of TCPConfig.MaxInbound that connections
// without their first frame may take together. Past it the oldest of them
// is closed to make room, so that a flood of connections from many hosts
// that never authenticate can neither fill the inbound limit, which
// members' connections need, nor keep a member's new connection out: it
// would have to open connections faster than a member completes its HELLO,
// one round trip after connecting.
const unboundShare = 4

// maxConnsPerPeer bounds the inbound connections one authenticated ID may
// hold: a peer dials one at a time, but a connection it gave up on (a
// write timeout, a restart) may linger until its FIN or keepalive arrives.
// Past it the oldest is closed.
const maxConnsPerPeer = 4

// inboundConn is an accepted connection and what it proved.
type inboundConn struct {
	net.Conn
	host     string
	accepted time.Time
	bound    bool      // its first frame (HELLO with a key) was accepted
	from     uuid.UUID // the sender it authenticated as, once bound
}

// payloadReader returns the reader of ic's frames: newConnReader of the
// accepted connection itself, not of ic, whose embedded net.Conn interface
// hides the TCP connection's SyscallConn; through ic every read was an
// ordinary syscall, which wakes the runtime's sysmon (rawio_linux.go): an
// idle follower of 100 on loopback spent 3.6 to 4.2 ms of CPU a second
// with them, 2.4 without (BenchmarkBootToLeader, procs=2).
func (ic *inboundConn) payloadReader() io.Reader { return newConnReader(ic.Conn) }

func (t *TCPTransport) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: pause rather than spin,
			// as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-t.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		ic := &inboundConn{Conn: c, host: remoteHost(c), accepted: time.Now()}
		t.inMu.Lock()
		if t.inClosed {
			t.inMu.Unlock()
			c.Close()
			return
		}
		if why := t.admit(ic); why != "" {
			t.inMu.Unlock()
			c.Close()
			t.issues.report(IssueTooManyConnections, c.RemoteAddr().String(), uuid.Nil, why)
			continue
		}
		evicted := t.makeUnboundRoom()
		t.inbound[ic] = struct{}{}
		t.unbound[ic.host]++
		t.unboundConns[ic] = struct{}{}
		t.wg.Add(1) // under inMu: Close cannot be waiting for t.wg yet
		t.inMu.Unlock()
		go t.readLoop(ic)
		if evicted != nil {
			t.issues.report(IssueTooManyConnections, evicted.RemoteAddr().String(), uuid.Nil,
				fmt.Sprintf("closed: the oldest of %d connections without a first frame, to make room", t.cfg.MaxInbound/unboundShare))
		}
	}
}

// makeUnboundRoom closes the oldest connection without a first frame when
// they hold their whole share of MaxInbound, and returns it; t.inMu is held.
func (t *TCPTransport) makeUnboundRoom() *inboundConn {
	if len(t.unboundConns) < max(t.cfg.MaxInbound/unboundShare, 1) {
		return nil
	}
	var oldest *inboundConn
	for ic := range t.unboundConns {
		if oldest == nil || ic.accepted.Before(oldest.accepted) {
			oldest = ic
		}
	}
	oldest.Close() // its readLoop forgets it
	t.unboundDone(oldest)
	return oldest
}

// admit says why ic may not stay open, or "" when it may; t.inMu is held.
func (t *TCPTransport) admit(ic *inboundConn) string {
	if len(t.inbound) >= t.cfg.MaxInbound {
		return fmt.Sprintf("%d inbound connections open, the limit", len(t.inbound))
	}
	if t.unbound[ic.host] >= MaxUnauthenticatedPerHost {
		return fmt.Sprintf("%d connections from %s sent no first frame yet", t.unbound[ic.host], ic.host)
	}
	return ""
}

// bind records that ic authenticated as from, and closes the oldest of
// from's connections past maxConnsPerPeer. It reports false when ic was
// closed to make room meanwhile.
func (t *TCPTransport) bind(ic *inboundConn, from uuid.UUID) bool {
	t.inMu.Lock()
	defer t.inMu.Unlock()
	if _, ok := t.unboundConns[ic]; !ok {
		return false // evicted meanwhile
	}
	ic.bound, ic.from = true, from
	t.unboundDone(ic)
	conns := append(t.byPeer[from], ic)
	if len(conns) > maxConnsPerPeer {
		conns[0].Close()
		conns = slices.Delete(conns, 0, 1)
	}
	t.byPeer[from] = conns
	return true
}

// unboundDone takes ic out of the connections without a first frame, if it
// is there; t.inMu is held.
func (t *TCPTransport) unboundDone(ic *inboundConn) {
	if _, ok := t.unboundConns[ic]; !ok {
		return
	}
	delete(t.unboundConns, ic)
	if t.unbound[ic.host]--; t.unbound[ic.host] <= 0 {
		delete(t.unbound, ic.host)
	}
}

func (t *TCPTransport) forget(ic *inboundConn) {
	t.inMu.Lock()
	defer t.inMu.Unlock()
	delete(t.inbound, ic)
	if !ic.bound {
		t.unboundDone(ic)
		return
	}
	conns := slices.DeleteFunc(t.byPeer[ic.from], func(c *inboundConn) bool { return c == ic })
	if len(conns) == 0 {
		delete(t.byPeer, ic.from)
	} else {
		t.byPeer[ic.from] = conns
	}
}

func remoteHost(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// readLoop reads ic's frames until it ends or breaks a rule: its first
// frame within HandshakeTimeout (with a key: a HELLO that verifies and is
// fresh), every later one complete within FrameTimeout of its first byte,
// with a valid tag and the sender the connection began with.
func (t *TCPTransport) readLoop(ic *inboundConn) {
	defer func() {
		ic.Close()
		t.forget(ic)
		t.wg.Done()
	}()
	remote := ic.RemoteAddr().String()
	dr := &deadlineReader{c: ic, rd: ic.payloadReader(), frameTimeout: t.cfg.FrameTimeout}
	r := wire.NewReader(dr, t.cfg.MaxFrame)
	dr.r = r
	dr.setIdleDeadline(ic.accepted.Add(t.cfg.HandshakeTimeout))
	var (
		m        wire.Message
		verifier *wire.Verifier
	)
	for {
		err := r.Read(&m)
		unknown := errors.Is(err, wire.ErrUnknownType)
		if err != nil && !unknown {
			if ic.bound && t.endedByPeer(err) {
				t.reportPeerClosed(ic.from)
			}
			t.readFailed(ic, remote, dr, err)
			return
		}
		if !ic.bound {
			v, ok := t.openConn(ic, remote, &m)
			if !ok {
				return
			}
			verifier = v
			dr.setIdleDeadline(time.Time{})
			if verifier != nil {
				continue // the HELLO was the whole first frame
			}
		} else if verifier != nil {
			if err := verifier.Verify(&m); err != nil {
				t.issues.report(IssueAuth, remote, ic.from, err.Error())
				return
			}
		}
		t.counters.countReceived(m.Type)
		if m.From != ic.from || m.Type == wire.TypeHello {
			t.issues.report(IssueWrongSender, remote, ic.from,
				fmt.Sprintf("%s frame from %s on a connection of %s", m.Type, m.From, ic.from))
			continue
		}
		if unknown {
			// Intact, from a newer peer: counted so the capture still
			// matches, but there is nothing the Machine could do with it.
			continue
		}
		t.markAlive(m.From)
		msg := m
		msg.Payload = slices.Clone(m.Payload)
		// Authentication is the transport's business: the Machine gets the
		// frame as it was before sealing.
		msg.Flags &^= wire.FlagAuth
		msg.Tag = nil
		select {
		case t.in <- msg:
		case <-t.ctx.Done():
			return
		}
	}
}

// openConn checks m, the first frame of ic: with a key, a HELLO that
// verifies, is for this node, is its sender's own (memberKeys) and is
// fresh, whose Verifier it returns;
// without one, any frame but a HELLO, whose sender the connection is then
// bound to. It reports whether ic may go on.
func (t *TCPTransport) openConn(ic *inboundConn, remote string, m *wire.Message) (*wire.Verifier, bool) {
	if t.cfg.Key == nil {
		if m.Type == wire.TypeHello {
			t.issues.report(IssueAuth, remote, m.From,
				fmt.Sprintf("peer %s authenticates with a cluster key, and this node has none (--insecure)", m.From))
			return nil, false
		}
		return nil, t.bind(ic, m.From)
	}
	v, h, err := wire.OpenHello(t.cfg.Key, t.id, m)
	if errors.Is(err, wire.ErrSignature) {
		t.issues.report(IssueSignature, remote, uuid.Nil, err.Error())
		return nil, false
	}
	if err != nil {
		t.issues.report(IssueAuth, remote, uuid.Nil, err.Error())
		return nil, false
	}
	// Whose HELLO it is comes before its Time: the per-sender ordering
	// below is sound only for HELLOs their sender made. A member forging
	// one in the leader's name, stamped minutes ahead, would otherwise have
	// the leader's own HELLOs refused as replays until that time passed.
	pin, err := t.keys.check(m.From, &h)
	if err != nil {
		t.issues.report(IssueSignature, remote, m.From, err.Error())
		return nil, false
	}
	if err := t.hellos.accept(m.From, h.Time, t.cfg.Clock.Now()); err != nil {
		t.issues.report(IssueReplay, remote, m.From, err.Error())
		return nil, false
	}
	if pin {
		if err := t.keys.pin(m.From, &h, t.isPeer); err != nil {
			t.issues.report(IssueSignature, remote, m.From, err.Error())
			return nil, false
		}
	}
	t.counters.countReceived(wire.TypeHello)
	return v, t.bind(ic, m.From)
}

// isPeer reports whether id is a member the transport sends to.
func (t *TCPTransport) isPeer(id uuid.UUID) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.addrs[id]
	return ok
}

// readFailed reports why reading ic stopped, unless it just ended.
func (t *TCPTransport) readFailed(ic *inboundConn, remote string, dr *deadlineReader, err error) {
	if t.ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && !ic.bound:
		t.issues.report(IssueHandshakeTimeout, remote, uuid.Nil,
			fmt.Sprintf("no complete first frame within %v of the connection", t.cfg.HandshakeTimeout))
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.issues.report(IssueFrameTimeout, remote, ic.from,
			fmt.Sprintf("frame incomplete %v after its first byte (%d bytes of it arrived)", t.cfg.FrameTimeout, dr.r.Buffered()))
	case isFramingError(err):
		t.counters.rxErrors.Add(1)
		t.issues.report(IssueBadFrame, remote, ic.from, err.Error())
	}
}

func isFramingError(err error) bool {
	for _, e := range []error{wire.ErrBadStart, wire.ErrVersion, wire.ErrTooLarge, wire.ErrTruncated, wire.ErrChecksum} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// deadlineReader reads a connection for a wire.Reader, with a read deadline
// FrameTimeout after the first bytes of a frame arrived, so that a peer
// dripping a frame byte by byte, or stopping halfway, is cut off; between
// frames the idle deadline holds (none once the connection is bound: a
// follower's connection to its leader is idle for as long as all is well).
type deadlineReader struct {
	c            net.Conn
	rd           io.Reader
	r            *wire.Reader
	frameTimeout time.Duration
	idle         time.Time // deadline between frames; zero for none
	inFrame      bool      // the deadline set is the frame's
}

func (d *deadlineReader) setIdleDeadline(at time.Time) {
	d.idle = at
	if !d.inFrame {
		d.c.SetReadDeadline(at)
	}
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	switch partial := d.r.Buffered() > 0; {
	case partial && !d.inFrame:
		d.inFrame = true
		at := time.Now().Add(d.frameTimeout)
		if !d.idle.IsZero() && d.idle.Before(at) {
			at = d.idle
		}
		d.c.SetReadDeadline(at)
	case !partial && d.inFrame:
		d.inFrame = false
		d.c.SetReadDeadline(d.idle)
	}
	return d.rd.Read(p)
}

// helloClock refuses replayed HELLOs: it keeps the newest HELLO time
// accepted from each sender, and wants every HELLO newer than that, and
// within MaxClockSkew of this node's clock. The second rule also bounds the
// table: entries older than the skew can go, since a HELLO that old is
// refused anyway.
type helloClock struct {
	skew time.Duration // <= 0: not checked
	max  int

	mu   sync.Mutex
	last map[uuid.UUID]int64
}

func (h *helloClock) accept(from uuid.UUID, at int64, now time.Time) error {
	if h.skew > 0 {
		if d := time.Duration(at - now.UnixNano()); d > h.skew || d < -h.skew {
			side := "ahead of"
			if d < 0 {
				side, d = "behind", -d
			}
			return fmt.Errorf("HELLO from %s is stamped %v, %v %s this node's clock: more than the %v allowed (are both clocks synchronised?)",
				from, time.Unix(0, at).UTC().Format(time.RFC3339), d.Round(time.Millisecond), side, h.skew)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if last, ok := h.last[from]; ok && at <= last {
		return fmt.Errorf("HELLO from %s is not newer than the last one accepted from it (%d <= %d): a replay", from, at, last)
	}
	if len(h.last) >= h.max {
		h.prune(now)
	}
	h.last[from] = at
	return nil
}

// prune makes room in the table: entries past the skew first, all of them
// when the skew is not checked (a replay then gets past only this one).
func (h *helloClock) prune(now time.Time) {
	if h.skew > 0 {
		for id, at := range h.last {
			if time.Duration(now.UnixNano()-at) > h.skew {
				delete(h.last, id)
			}
		}
	}
	if len(h.last) >= h.max {
		clear(h.last)
	}
}
