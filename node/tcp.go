package node

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// TCPConfig tunes a TCPTransport. Zero fields take the defaults given.
type TCPConfig struct {
	// MaxFrame bounds an inbound frame, header and trailer included; a peer
	// that announces a longer one is disconnected. Default wire.DefaultMaxFrame.
	MaxFrame int
	// QueueLen is the number of frames queued per peer before Send drops
	// (DropQueueFull). Default 1024.
	QueueLen int
	// InboundLen is the capacity of the Recv channel. Default 1024.
	InboundLen int
	// DialTimeout bounds one connection attempt. Default 500ms.
	DialTimeout time.Duration
	// MaxDialing bounds the connection attempts in flight at once: dials
	// that connect(2) did not settle, each holding a socket until the
	// peer answers or DialTimeout passes. Behind a silent partition every
	// peer on the far side is such a dial, and a node that elects may send
	// ELECTION to each of them within a few waves: the highest of the 501
	// survivors of a 1000-node cluster cut off from 499 starts 498 such
	// dials, each of the others, in the simulator, one (node/bully,
	// "Nearest member first"). A writer waits for a free slot only while
	// its frame may still be sent (FrameTTL); a frame that expires waiting
	// costs no dial. A freed slot
	// goes to the writer that has waited longest (dialSlots). Dials the
	// kernel settles within connect(2), a peer on this host up or down,
	// and dials to a peer heard from within DialTimeout, need no slot.
	// Default DefaultMaxDialing.
	MaxDialing int
	// WriteTimeout bounds one frame's write, so that a peer that stopped
	// reading (or a partition that drops packets silently) cannot stall its
	// queue forever. Default 1s.
	WriteTimeout time.Duration
	// FrameTTL is how long a frame may wait in its queue; older ones are
	// dropped (DropExpired) rather than written. Election messages are
	// meaningless after a few election timeouts, and a peer coming back must
	// not be handed a burst of stale ones. Default 1s.
	FrameTTL time.Duration
	// UserTimeout is how long written data may stay unacknowledged before
	// the kernel aborts the connection (TCP_USER_TIMEOUT, Linux only).
	// Default 2s.
	UserTimeout time.Duration
	// SendBuffer, when positive, sets SO_SNDBUF on each outbound
	// connection (Linux doubles it, up to net.core.wmem_max), which also
	// stops the kernel growing the buffer. It bounds how much a peer that
	// stopped reading takes before a write blocks; by default the kernel
	// grows the buffer up to net.ipv4.tcp_wmem's maximum, 4 MiB unless the
	// host raised it. Default 0: the kernel's buffer.
	SendBuffer int
	// BackoffMin and BackoffMax bound the pause after a failed dial, which
	// doubles with each consecutive failure. Defaults 50ms and 1s.
	BackoffMin, BackoffMax time.Duration

	// Key is the cluster key. With it every connection the transport dials
	// opens with a HELLO and carries authenticated frames, and every
	// connection it accepts must (wire/doc.go, "Authentication"). nil
	// runs without authentication: anyone who reaches the port can claim
	// any ID.
	Key *wire.Key
	// MemberKey is this node's member key: with it and Key, the HELLO of
	// every connection the transport dials is signed, proving which member
	// dialled (wire/doc.go, "Authentication").
	MemberKey ed25519.PrivateKey
	// PeerKeys are the members' public member keys, by ID, as the peers
	// file gives them. With any, every accepted HELLO must be signed by its
	// sender's key: the one given here or, for an ID not here (a member
	// that joined later), the one its first accepted HELLO carried (trust
	// on first use; see memberKeys). Others are refused (IssueSignature).
	// Without any, an unsigned HELLO is accepted on the cluster key alone,
	// and only a signed one's signature is checked. The transport reads
	// the map, shared, for as long as it runs: do not modify it.
	PeerKeys map[uuid.UUID]ed25519.PublicKey
	// Clock is the node's clock (Options.Clock): HELLOs are stamped with
	// its wall time, and received ones checked against it. nil reads the
	// host's.
	Clock *Clock
	// MaxClockSkew is how far a HELLO's time may be from this node's clock;
	// negative disables the check, leaving only the per-sender ordering
	// (see helloClock). Default 5m, Kerberos's long-standing choice.
	MaxClockSkew time.Duration
	// MaxInbound bounds the accepted connections open at once; more are
	// closed on arrival (IssueTooManyConnections). Default 1024; Serve
	// and Start raise it to four per member: a new leader of 1000 nodes
	// is dialled by every member at once with its HALT_ACK, and with 1024
	// it closed 145 of them and won only when its election timed out.
	MaxInbound int
	// ListenerClosesFirst has the listener close before the connections
	// when the process dies, where the kernel allows (pinListener): its
	// followers' probes are then refused at once, not accepted and reset
	// a few ms later. For a node that has its process to itself: each
	// transport holds one more descriptor for it.
	ListenerClosesFirst bool
	// HandshakeTimeout is how long an accepted connection may take to
	// deliver its first frame (its HELLO, with a Key). Default 5s.
	HandshakeTimeout time.Duration
	// FrameTimeout is how long a frame may take to arrive whole once its
	// first byte did. Default 5s: a 64 KiB frame at 13 KB/s.
	FrameTimeout time.Duration
	// Log receives peer_refused records (see PeerIssue); nil logs nothing.
	Log *EventLog
	// Socket, when not nil, creates every socket the transport listens or
	// dials on, in place of socket(2) in the calling thread's network
	// namespace: a process hosting nodes of many namespaces creates each
	// node's sockets in its own (Linux only). Addresses must then be IP
	// literals, and a dial waits on its own socket instead of net.Dialer's.
	Socket SocketFunc
}

// SocketFunc creates a socket as socket(2) does and returns its descriptor.
type SocketFunc func(domain, typ, proto int) (int, error)

// ReconnectDelay is the longest the transport can take, once the network
// between two nodes heals, to send again to a peer it could not reach: a
// dial begun just before the heal fails only at DialTimeout, and the
// backoff that failure starts lasts up to BackoffMax before the next dial.
// Until then frames for that peer are dropped (DropUnreachable), so a bound on
// what follows a heal must add it.
func (c TCPConfig) ReconnectDelay() time.Duration {
	c = c.withDefaults()
	return c.DialTimeout + c.BackoffMax
}

func (c TCPConfig) withDefaults() TCPConfig {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = wire.DefaultMaxFrame
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 1024
	}
	if c.InboundLen <= 0 {
		c.InboundLen = 1024
	}
	def(&c.DialTimeout, 500*time.Millisecond)
	if c.MaxDialing <= 0 {
		c.MaxDialing = DefaultMaxDialing
	}
	def(&c.WriteTimeout, time.Second)
	def(&c.FrameTTL, time.Second)
	def(&c.UserTimeout, 2*time.Second)
	def(&c.BackoffMin, 50*time.Millisecond)
	def(&c.BackoffMax, time.Second)
	c.BackoffMax = max(c.BackoffMax, c.BackoffMin)
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = 5 * time.Minute
	}
	if c.MaxInbound <= 0 {
		c.MaxInbound = DefaultMaxInbound
	}
	def(&c.HandshakeTimeout, 5*time.Second)
	def(&c.FrameTimeout, 5*time.Second)
	return c
}

// DefaultMaxInbound is TCPConfig.MaxInbound's default.
const DefaultMaxInbound = 1024

// DefaultMaxDialing is TCPConfig.MaxDialing's default: at 500 ms a dial,
// 128 peers found unreachable a second, while a node's sockets stay within
// any descriptor limit. libp2p's dial limiter bounds its file-descriptor
// dials likewise, at 160 a host.
const DefaultMaxDialing = 64

// TCPTransport is a Transport over TCP. Connections are one-way: a node
// dials each peer it sends to and only writes on that connection, and only
// reads on the connections it accepts, so a capture of one direction of a
// connection is the exact sequence of frames one node wrote to another.
//
// Authentication: with a cluster key (TCPConfig.Key) a dialled connection
// opens with a HELLO, written with the first frame, and every frame carries
// a tag (wire.Sealer); an accepted connection must open with a HELLO that
// verifies, is addressed to this node, is signed by its sender's member key
// when the peers give member keys (PeerKeys), and is newer than the last
// from its sender, and every later frame must verify and name that sender. Without
// a key the connection is bound to the sender of its first frame. Either
// way a frame from another sender is dropped (IssueWrongSender).
//
// Inbound limits: at most MaxInbound accepted connections, at most
// MaxUnauthenticatedPerHost per host before their first frame, which must
// come within HandshakeTimeout, and a quarter of MaxInbound before their
// first frame in all, the oldest closed to make room; a frame begun must be complete within
// FrameTimeout; connections idle between frames are fine. Whatever a peer
// does wrong is counted and logged, rate-limited (PeerIssue).
//
// Sending: each peer has a bounded queue drained by a writer goroutine,
// which holds at most one connection and writes one frame per Write with
// TCP_NODELAY, so that frames are not coalesced while they wait. The queue
// grows as frames arrive and the writer runs only while there are frames:
// a node of a large cluster sends to few of its peers, and a goroutine and a
// full-size queue for each cost more memory and start-up time than sending
// (250 nodes each allocated 10 MB of queues before their first election).
// A frame counts as sent only after Write accepted all of its bytes; a
// failed or short write counts it as dropped and closes the connection, and
// no frame is ever written again.
//
// Unreachable peers: a writer dials when it has a frame and no connection.
// If the dial fails, that frame and every frame then queued are dropped
// (DropUnreachable), and until a backoff expires (BackoffMin doubling to
// BackoffMax, with jitter) Send drops frames for that peer at once rather
// than queueing them. Frames older than FrameTTL when their turn comes are
// dropped (DropExpired). So a dead peer costs one dial per backoff period
// and is never replayed stale messages when it comes back. Receiving any
// frame from a peer ends its backoff: it is evidently up again.
//
// Sent is not delivered: a frame written just before the peer died, or into
// a silent partition, is counted as sent (a capture on the sender shows it
// too) but never as received. On Linux, TCP_USER_TIMEOUT (UserTimeout)
// aborts a connection whose data goes unacknowledged for that long, so
// that frames written into a partition are discarded rather than delivered
// minutes late, when it heals, by TCP's retransmissions.
type TCPTransport struct {
	id      uuid.UUID
	cfg     TCPConfig
	ln      net.Listener
	in      chan wire.Message
	refused chan Refusal
	// peerClosed carries the peers that ended a connection (CrashProber).
	peerClosed chan uuid.UUID
	counters   Counters
	start      time.Time
	dialer     net.Dialer
	// dialing bounds the connection attempts in flight (MaxDialing).
	dialing *dialSlots
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	issues  *issueReporter
	hellos  helloClock
	keys    *memberKeys
	warmer  tcpWarmer
	// unpin closes the listener's pinned duplicate (pinListener).
	unpin func()

	// electionRound counts RetractElections calls: an ELECTION queued in
	// an earlier round is dropped, not written.
	electionRound atomic.Uint64

	mu     sync.RWMutex
	closed bool
	// addrs is every member this transport may send to, with its address;
	// peers holds the send state of those it has sent to, made on the first
	// Send. A follower of 1000 sends to a few: state for all 999, made at
	// start, was a tenth of 1000 nodes' boot in one host process.
	addrs map[uuid.UUID]string
	peers map[uuid.UUID]*tcpPeer

	// inMu guards the accepted connections' bookkeeping apart from the
	// peers: a node that a whole cluster dials at once (a new leader's
	// HALT_ACKs, an all-detect election's ELECTIONs) binds and forgets
	// them while its own Sends go on. Under one lock with Send, 1000 nodes
	// electing in one process parked 19,000 readers in a convoy on it,
	// 8,000 of them holding a connection with its frame unread.
	inMu     sync.Mutex
	inClosed bool
	inbound  map[*inboundConn]struct{}
	unbound  map[string]int // by remote host: connections without a first frame yet
	// unboundConns are those connections; at most MaxInbound/unboundShare.
	unboundConns map[*inboundConn]struct{}
	byPeer       map[uuid.UUID][]*inboundConn // bound connections by sender, oldest first
}

var (
	_ Transport       = (*TCPTransport)(nil)
	_ RefusalReporter = (*TCPTransport)(nil)
	_ CrashProber     = (*TCPTransport)(nil)
)

// peerClosedQueueLen bounds the ends of connections waiting for the Node;
// it only looks for its leader's, so losing others costs nothing.
const peerClosedQueueLen = 64

// ListenTCP listens on addr and returns a transport for node id. A bind
// failure reads "listen ADDR: address already in use".
func ListenTCP(addr string, id uuid.UUID, cfg TCPConfig) (*TCPTransport, error) {
	var ln net.Listener
	var err error
	if cfg.Socket != nil {
		ln, err = listenVia(cfg.Socket, addr)
	} else {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, listenError(addr, err)
	}
	return NewTCPTransport(ln, id, cfg), nil
}

func listenError(addr string, err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return fmt.Errorf("listen %s: %w", addr, se.Err)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return fmt.Errorf("listen %s: %w", addr, oe.Err)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}

// NewTCPTransport returns a transport that accepts on ln, which it owns.
func NewTCPTransport(ln net.Listener, id uuid.UUID, cfg TCPConfig) *TCPTransport {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCPTransport{
		id:         id,
		cfg:        cfg,
		ln:         ln,
		in:         make(chan wire.Message, cfg.InboundLen),
		refused:    make(chan Refusal, refusalQueueLen),
		peerClosed: make(chan uuid.UUID, peerClosedQueueLen),
		start:      time.Now(),
		dialer: net.Dialer{
			Timeout: cfg.DialTimeout,
			Control: func(_, _ string, c syscall.RawConn) error { return setUserTimeout(c, cfg.UserTimeout) },
		},
		dialing:      newDialSlots(cfg.MaxDialing),
		ctx:          ctx,
		cancel:       cancel,
		hellos:       helloClock{skew: cfg.MaxClockSkew, max: 4 * cfg.MaxInbound, last: make(map[uuid.UUID]int64)},
		keys:         newMemberKeys(cfg.PeerKeys, 4*cfg.MaxInbound),
		peers:        make(map[uuid.UUID]*tcpPeer),
		inbound:      make(map[*inboundConn]struct{}),
		unbound:      make(map[string]int),
		unboundConns: make(map[*inboundConn]struct{}),
		byPeer:       make(map[uuid.UUID][]*inboundConn),
	}
	t.issues = newIssueReporter(&t.counters, cfg.Log)
	if cfg.ListenerClosesFirst {
		t.unpin = pinListener(ln)
	}
	t.wg.Add(1)
	go t.acceptLoop()
	return t
}

func (t *TCPTransport) mono() int64 { return int64(time.Since(t.start)) }

// Counters implements Transport.
func (t *TCPTransport) Counters() *Counters { return &t.counters }

// LocalAddr implements Transport.
func (t *TCPTransport) LocalAddr() string { return t.ln.Addr().String() }

// Recv implements Transport.
func (t *TCPTransport) Recv() <-chan wire.Message { return t.in }

// Refusals implements RefusalReporter: frames whose connection attempt the
// peer's host answered with a reset (ECONNREFUSED).
func (t *TCPTransport) Refusals() <-chan Refusal { return t.refused }

// PeerClosed implements CrashProber.
func (t *TCPTransport) PeerClosed() <-chan uuid.UUID { return t.peerClosed }

// endedByPeer reports whether err, from reading a connection, says the
// peer closed or reset it; this node closing it reads as net.ErrClosed.
func (t *TCPTransport) endedByPeer(err error) bool {
	return t.ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET))
}

// reportPeerClosed offers peer to PeerClosed unless the queue is full.
func (t *TCPTransport) reportPeerClosed(peer uuid.UUID) {
	select {
	case t.peerClosed <- peer:
	default:
	}
}

// ProbePeer implements CrashProber. The probe's socket is made as the
// dials' are (TCPConfig.Socket), in the node's network namespace.
func (t *TCPTransport) ProbePeer(ctx context.Context, peer uuid.UUID, timeout time.Duration) ProbeResult {
	t.mu.RLock()
	addr, ok := t.addrs[peer]
	t.mu.RUnlock()
	if !ok {
		return ProbeNoAnswer
	}
	if timeout <= 0 {
		timeout = t.cfg.DialTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(t.ctx, cancel)
	defer stop()
	nc, err := t.probeDial(ctx, addr, timeout)
	switch {
	case err == nil:
		// A dying process's kernel closes its sockets one by one, and
		// its listener, the oldest, was seen closing after the
		// connections (Linux 6.18: 2.6 ms after the first FIN, star16),
		// so it may accept this probe. Its close resets the probe within
		// moments; a live peer waits HandshakeTimeout for a first frame.
		// So the probe is held a moment: a reset says the listener closed
		// with the probe in its queue, as good as a refusal and a round
		// trip sooner; any other end (a live peer that closed it) is
		// probed again. A pinned listener (ListenerClosesFirst) spares
		// the wait.
		nc.SetReadDeadline(time.Now().Add(crashProbeHold))
		var b [1]byte
		_, rerr := nc.Read(b[:])
		nc.Close()
		switch {
		case rerr == nil, errors.Is(rerr, os.ErrDeadlineExceeded), ctx.Err() != nil:
			return ProbeConnected
		case errors.Is(rerr, syscall.ECONNRESET):
			return t.probeRefused(peer)
		}
		return t.probeAgain(ctx, peer, addr, timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return t.probeRefused(peer)
	case errors.Is(err, syscall.ECONNRESET):
		return t.probeAgain(ctx, peer, addr, timeout) // reset as it connected: the same
	}
	return ProbeNoAnswer
}

// probeRefused starts peer's backoff, as a refused dial does, and returns
// ProbeRefused. A connection this node has to it belongs to the process
// that died, whose kernel closes its sockets one by one: its FIN may not
// have arrived, and a frame written on it would reach the wire and be
// reset (a new leader's COORDINATOR to the crashed one, seen in a span).
// Until the backoff ends, or a frame from the peer says it is back, what
// is sent to it is dropped as unreachable, before any write.
func (t *TCPTransport) probeRefused(peer uuid.UUID) ProbeResult {
	t.mu.RLock()
	p := t.peers[peer]
	t.mu.RUnlock()
	if p != nil {
		heard := p.heard.Load()
		p.retryAt.Store(max(p.retryAt.Load(), t.mono()+int64(t.cfg.BackoffMin)))
		if p.heard.Load() != heard {
			p.retryAt.Store(0)
		}
	}
	return ProbeRefused
}

// probeDial connects to addr as the transport's dials do (through
// TCPConfig.Socket when set: in the node's namespace).
func (t *TCPTransport) probeDial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	if t.cfg.Socket != nil {
		return dialVia(ctx, t.cfg.Socket, addr, timeout, t.cfg.UserTimeout)
	}
	return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
}

// crashProbeHold is how long a probe that connected waits for the peer to
// end it (see ProbePeer) before it closes it, no byte sent either way.
const crashProbeHold = 50 * time.Millisecond

// probeAgain is a probe's second and last connect, after the peer ended
// the first: refused when its listener is gone.
func (t *TCPTransport) probeAgain(ctx context.Context, peer uuid.UUID, addr string, timeout time.Duration) ProbeResult {
	nc, err := t.probeDial(ctx, addr, timeout)
	switch {
	case err == nil:
		nc.Close()
		return ProbeConnected
	case errors.Is(err, syscall.ECONNREFUSED):
		return t.probeRefused(peer)
	}
	return ProbeNoAnswer
}

// Send implements Transport.
func (t *TCPTransport) Send(to uuid.UUID, msg *wire.Message) {
	// The read lock orders Send against peer removal and Close, so that a
	// frame is either queued before a writer's final drain or counted here.
	t.mu.RLock()
	p := t.peers[to]
	if p == nil {
		t.mu.RUnlock()
		t.addPeer(to)
		t.mu.RLock()
		p = t.peers[to] // SetPeers may have removed it again
	}
	defer t.mu.RUnlock()
	if t.closed {
		t.counters.countDropped(msg.Type, DropClosed)
		return
	}
	if p == nil {
		t.counters.countDropped(msg.Type, DropUnknownPeer)
		return
	}
	now := t.mono()
	if now < p.retryAt.Load() {
		t.counters.countDropped(msg.Type, DropUnreachable)
		offerUnreachable(t.refused, to, msg.Type, msg.Epoch)
		return
	}
	p.mu.Lock()
	if len(p.queue)-p.head >= t.cfg.QueueLen {
		p.mu.Unlock()
		t.counters.countDropped(msg.Type, DropQueueFull)
		return
	}
	p.queue = append(p.queue, tcpFrame{typ: msg.Type, round: t.electionRound.Load(), epoch: msg.Epoch, at: now, buf: wire.Append(nil, msg)})
	p.pending.Add(1)
	start := !p.writing
	p.writing = true
	p.mu.Unlock()
	if start {
		// This Send is the peer's writer now, and owns its connection.
		if p.conn == nil && p.dialQuick() {
			return
		}
		if p.conn != nil && p.writeQuick() {
			return
		}
		// Under t.mu's read lock: Close cannot be waiting for t.wg yet.
		t.wg.Add(1)
		go p.run()
	}
}

// RetractElections implements ElectionRetractor: the ELECTIONs queued so
// far and not yet written, most of them waiting for a dial, are dropped
// (DropElectionEnded) instead of written.
func (t *TCPTransport) RetractElections() { t.electionRound.Add(1) }

// SetPeers implements Transport. Members without an address cannot be
// dialled and are treated as absent.
func (t *TCPTransport) SetPeers(members []wire.Member) {
	want := make(map[uuid.UUID]string, len(members))
	for _, m := range members {
		if m.ID != t.id && m.Addr != "" {
			want[m.ID] = m.Addr
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.addrs = want
	for id, p := range t.peers {
		if addr, ok := want[id]; ok {
			p.setAddr(addr)
			continue
		}
		delete(t.peers, id)
		p.stop()
	}
}

// addPeer makes the send state of member id, unless it has one or is no
// member.
func (t *TCPTransport) addPeer(id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if addr, ok := t.addrs[id]; ok && !t.closed && t.peers[id] == nil {
		t.peers[id] = &tcpPeer{t: t, id: id, addr: addr}
	}
}

// Flush implements Transport.
func (t *TCPTransport) Flush(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		var pending int64
		t.mu.RLock()
		for _, p := range t.peers {
			pending += p.pending.Load()
		}
		t.mu.RUnlock()
		if pending == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
}

// Close implements Transport. It waits for every goroutine of the transport
// to end; a write in progress is cut short and counted as dropped.
func (t *TCPTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrTransportClosed
	}
	t.closed = true
	t.cancel()
	t.Warm(nil, 0)
	err := t.ln.Close()
	if t.unpin != nil {
		t.unpin()
	}
	t.inMu.Lock()
	t.inClosed = true
	for c := range t.inbound {
		c.Close()
	}
	t.inMu.Unlock()
	for id, p := range t.peers {
		delete(t.peers, id)
		p.stop()
		if c := p.cur.Load(); c != nil {
			c.Close() // unblocks a Write stuck on a peer that stopped reading
		}
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// markAlive ends the backoff of the peer a frame just came from.
func (t *TCPTransport) markAlive(id uuid.UUID) {
	t.mu.RLock()
	if p := t.peers[id]; p != nil {
		p.heard.Add(1)
		p.heardAt.Store(t.mono())
		if p.retryAt.Load() != 0 {
			p.retryAt.Store(0)
		}
		if cancel := p.abandonDial.Load(); cancel != nil {
			// The writer then dials again at once (heardSince).
			(*cancel)()
		}
	}
	t.mu.RUnlock()
}

type tcpFrame struct {
	typ   wire.Type
	round uint64 // an ELECTION's: TCPTransport.electionRound when it was sent
	epoch uint64
	at    int64 // transport clock when queued
	buf   []byte
	// warm: no frame, only the connection and its HELLO (Warm).
	warm bool
}

// tcpConn is an outbound connection. dead is set by the goroutine that
// watches for the peer closing it, so that the writer dials a fresh one
// instead of writing into a socket the peer already closed.
type tcpConn struct {
	net.Conn
	w    io.Writer // writes to Conn
	gen  uint64    // the peer's address generation it was dialled for
	dead atomic.Bool
	// With a cluster key: whether the HELLO is still to be written
	// before the first frame, the connection's Sealer (made with the
	// HELLO), and the buffer frames are sealed in.
	needHello bool
	sealer    *wire.Sealer
	sealed    []byte
}

// stale reports whether the writer must dial afresh instead of writing on
// c: its peer ended it, or it was dialled for an older address gen.
func (c *tcpConn) stale(gen uint64) bool {
	return c.dead.Load() || c.gen != gen || connEnded(c.Conn)
}

// seal returns frame as c carries it: sealed with a cluster key (in c's
// buffer, valid until the next seal), else as it is.
func (c *tcpConn) seal(frame []byte) []byte {
	if c.sealer == nil {
		return frame
	}
	c.sealed = c.sealer.Seal(c.sealed[:0], frame)
	return c.sealed
}

type tcpPeer struct {
	t  *TCPTransport
	id uuid.UUID

	// retryAt is the transport clock reading before which the peer is
	// considered unreachable; 0 when it is not backing off.
	retryAt atomic.Int64
	// heard counts the frames received from the peer; a dial that fails
	// while it grows failed against a peer that has just come up.
	heard atomic.Uint64
	// heardAt is the transport clock reading of the last frame received
	// from the peer, 0 before the first.
	heardAt atomic.Int64
	// pending counts frames queued or being written, for Flush.
	pending atomic.Int64
	// abandonDial cancels the writer's dial in progress, if any: a dial
	// whose SYN went out before the peer's host could answer it waits for
	// DialTimeout, and once the peer is heard from it is evidently up.
	abandonDial atomic.Pointer[context.CancelFunc]
	// cur is the writer's connection, published for Close to interrupt.
	cur atomic.Pointer[tcpConn]

	mu      sync.Mutex
	addr    string
	addrGen uint64
	queue   []tcpFrame // frames to write are queue[head:]
	head    int
	writing bool // a writer goroutine is running; it owns the fields below
	stopped bool // the peer was removed or the transport closed

	// Owned by the running writer, or by stop when none runs.
	conn     *tcpConn
	failures int
	// lastHello is the time of the last HELLO to the peer (Unix ns).
	lastHello int64
	// dialQuick found the connect in progress, so the writer dials with
	// net.Dialer at once rather than try quickDial, and send a SYN, again.
	slowDial bool
	// rest is what writeQuick could not write of restFrame's sealed
	// bytes, for the writer to write before anything else.
	rest      []byte
	restFrame tcpFrame
}

func (p *tcpPeer) setAddr(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if addr != p.addr {
		p.addr = addr
		p.addrGen++
		p.retryAt.Store(0)
	}
}

func (p *tcpPeer) target() (string, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr, p.addrGen
}

// run writes the queued frames in order and returns once the queue is
// empty, keeping the connection for the next writer; Send starts one when
// it queues a frame and none runs.
func (p *tcpPeer) run() {
	defer p.t.wg.Done()
	p.finishQuick()
	for {
		p.mu.Lock()
		if p.stopped {
			p.writing = false
			p.mu.Unlock()
			p.closeConn()
			p.dropQueued(DropClosed)
			return
		}
		if p.head == len(p.queue) {
			p.queue, p.head = p.queue[:0], 0
			p.writing = false
			p.mu.Unlock()
			return
		}
		f := p.queue[p.head]
		p.queue[p.head] = tcpFrame{}
		p.head++
		p.mu.Unlock()
		p.write(f)
		p.pending.Add(-1)
	}
}

// stop marks the peer removed; t.mu must be held, so that no Send queues
// to it any more. A running writer drops what is queued and closes the
// connection; when none runs, the queue is empty and stop closes it.
func (p *tcpPeer) stop() {
	p.mu.Lock()
	p.stopped = true
	idle := !p.writing
	p.mu.Unlock()
	if idle {
		p.closeConn()
	}
}

// drop counts f as dropped for r; an unreachable one is reported too
// (RefusalUnreachable), unless its dial was refused (dialFailed reports
// that).
func (p *tcpPeer) drop(f tcpFrame, r DropReason) {
	p.t.counters.countDropped(f.typ, r)
	if r == DropUnreachable {
		offerUnreachable(p.t.refused, p.id, f.typ, f.epoch)
	}
}

// dropQueued drops what is in the queue now. Frames queued concurrently are
// handled normally afterwards.
func (p *tcpPeer) dropQueued(r DropReason) {
	p.mu.Lock()
	frames := p.queue[p.head:]
	p.queue, p.head = nil, 0
	p.mu.Unlock()
	for _, f := range frames {
		p.drop(f, r)
		p.pending.Add(-1)
	}
}

func (p *tcpPeer) write(f tcpFrame) {
	t := p.t
	now := t.mono()
	if now-f.at > int64(t.cfg.FrameTTL) {
		p.drop(f, DropExpired)
		return
	}
	if t.retracted(f) {
		p.drop(f, DropElectionEnded)
		return
	}
	addr, gen := p.target()
	if c := p.conn; c != nil && c.stale(gen) {
		p.closeConn()
	}
	if f.warm {
		p.warmUp(addr, gen)
		return
	}
	if p.conn == nil {
		if now < p.retryAt.Load() {
			p.drop(f, DropUnreachable)
			return
		}
		heard := p.heard.Load()
		expires := f.at + int64(t.cfg.FrameTTL)
		err := p.dial(addr, gen, true, expires, &f)
		if _, skipped := undialled(err); err != nil && !skipped && p.heardSince(heard) {
			// The peer's frames arrived while this dial failed or hung:
			// its process was not yet listening, or its host not yet
			// reachable, when the dial began (a booting node, whose
			// ELECTION's ANSWER is queued behind this frame). Dial again
			// rather than drop the queue and back off; this dial is not
			// abandoned, so that a peer heard from but not reachable (a
			// one-way partition) costs one more SYN, not one per frame.
			heard = p.heard.Load()
			err = p.dial(addr, gen, false, expires, &f)
		}
		if r, skipped := undialled(err); skipped {
			// Nothing was dialled, so nothing is known of the peer: no
			// backoff, and the next frame waits for a slot in its turn.
			p.slowDial = true
			p.drop(f, r)
			return
		}
		if err != nil {
			p.dialFailed(f, err, heard)
			p.dropQueued(DropUnreachable)
			return
		}
	}
	c := p.conn
	if !p.writeHello(c) {
		p.drop(f, DropWriteError)
		return
	}
	if !p.writeFrame(c, c.seal(f.buf)) {
		p.drop(f, DropWriteError)
		return
	}
	t.counters.countSent(f.typ)
}

// writeHello sets c's write deadline and writes its HELLO if it is still
// to be written; false when the connection failed and is closed.
func (p *tcpPeer) writeHello(c *tcpConn) bool {
	if err := c.SetWriteDeadline(time.Now().Add(p.t.cfg.WriteTimeout)); err != nil {
		p.closeConn()
		return false
	}
	if c.needHello {
		if !p.writeFrame(c, p.hello(c)) {
			return false
		}
		p.t.counters.countSent(wire.TypeHello)
		c.needHello = false
	}
	return true
}

// hello makes c's HELLO and Sealer, stamped now: as it is written, so that
// its time is its send time as a capture sees it (capture's clock check
// allows 100 ms between them), however long the connection waited for
// its first frame.
func (p *tcpPeer) hello(c *tcpConn) []byte {
	t := p.t
	// Strictly later than the last HELLO to this peer, even if the clock
	// stepped back: the peer refuses one that is not.
	now := max(t.cfg.Clock.Now().UnixNano(), p.lastHello+1)
	p.lastHello = now
	h := wire.Hello{To: p.id, Time: now}
	rand.Read(h.Nonce[:]) // never fails: see crypto/rand.Read
	if t.cfg.MemberKey != nil {
		h.Sign(t.id, t.cfg.MemberKey)
	}
	var hello []byte
	c.sealer, hello = wire.NewSealer(nil, t.cfg.Key, t.id, h)
	return hello
}

// warmUp connects the writer to p at addr and writes the HELLO, unless it
// is connected. A failure is forgotten: no backoff and no refusal, since
// no frame was lost, and the next frame's dial tells what it has to.
func (p *tcpPeer) warmUp(addr string, gen uint64) {
	if p.conn == nil {
		if err := p.dial(addr, gen, true, p.t.mono()+int64(p.t.cfg.FrameTTL), nil); err != nil {
			return
		}
	}
	p.writeHello(p.conn)
}

// writeFrame writes one whole frame to c in one Write, and closes the
// connection when it could not.
func (p *tcpPeer) writeFrame(c *tcpConn, b []byte) bool {
	n, err := c.w.Write(b)
	if err != nil || n != len(b) {
		p.closeConn()
		return false
	}
	return true
}

// testHookDialFailed, when set by a test, runs after a dial failed and
// before the transport looks at what it heard from the peer meanwhile.
var testHookDialFailed atomic.Pointer[func()]

// heardWithin reports whether a frame from p arrived within the last d.
// Such a peer is up and reaches this node: a dial to it settles in a
// round trip, and needs no slot (TCPConfig.MaxDialing), which bounds the
// dials that may wait out DialTimeout on a peer that does not answer.
// Without the exception, the ANSWERs of a node that many ELECTIONs
// reached at once waited for slots behind its own dials across a
// partition, 500 ms each, until they expired: the nodes it should have
// answered, hearing nothing, led.
func (p *tcpPeer) heardWithin(d time.Duration) bool {
	at := p.heardAt.Load()
	return at != 0 && p.t.mono()-at < int64(d)
}

// heardSince reports whether a frame from p arrived since heard was read
// from p.heard: after a failed dial, that the peer has just come up.
func (p *tcpPeer) heardSince(heard uint64) bool {
	if hook := testHookDialFailed.Load(); hook != nil {
		(*hook)()
	}
	return p.heard.Load() != heard
}

// testHookBackoff, when set by a test, runs after a failed dial was found
// not to have heard from the peer and before its backoff starts.
var testHookBackoff atomic.Pointer[func()]

// dialFailed starts a backoff after a failed dial for frame f, which it
// drops; the writer owns p. heard is p.heard read before the dial: a frame
// from the peer that arrived after heardSince looked ends the backoff all
// the same, although markAlive may have cleared retryAt before this stores
// it. Otherwise a peer that came up just then, and already sent its first
// frame, would have everything sent to it dropped until the backoff ran out,
// up to BackoffMax, while it hears nothing from this node.
func (p *tcpPeer) dialFailed(f tcpFrame, err error, heard uint64) {
	p.failures++
	if hook := testHookBackoff.Load(); hook != nil {
		(*hook)()
	}
	p.retryAt.Store(p.t.mono() + int64(p.backoff()))
	if p.heard.Load() != heard {
		p.retryAt.Store(0)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		p.t.counters.countDropped(f.typ, DropUnreachable)
		offerRefusal(p.t.refused, Refusal{Peer: p.id, Type: f.typ, Epoch: f.epoch})
		return
	}
	p.drop(f, DropUnreachable)
}

// dialQuick connects p in the goroutine of the Send that found it without
// a writer or a connection, when quickDial settles the dial: a booting
// node's ELECTIONs to members not up yet are then refused without a
// writer goroutine, whose start and stack growth cost more than the dial
// (BenchmarkTCPSendRefused). It reports whether it also settled the queue,
// the one frame that Send queued, by dropping it after a failed dial;
// otherwise a writer must take the queue over, on the new connection if
// there is one. A peer whose last connect(2) did not settle (slowDial) is
// left to the writer, which dials it without trying that again.
func (p *tcpPeer) dialQuick() bool {
	if p.slowDial {
		return false
	}
	addr, gen := p.target()
	heard := p.heard.Load()
	nc, done, err := quickDial(addr, p.t.cfg.UserTimeout, p.t.cfg.Socket)
	switch {
	case !done:
		p.slowDial = true
		return false
	case err == nil:
		p.adopt(nc, gen)
		return false
	case p.heardSince(heard):
		return false // the peer came up meanwhile: the writer dials again
	}
	p.mu.Lock()
	f := p.queue[p.head]
	p.mu.Unlock()
	p.dialFailed(f, err, heard)
	return p.popSettled(false)
}

// popSettled takes off the queue the frame that Send's goroutine settled
// (dialQuick, writeQuick), and its pending count unless it is still in
// flight, and gives up the writer's role if nothing was queued meanwhile:
// it reports whether it did. Otherwise a writer takes the queue over.
func (p *tcpPeer) popSettled(inFlight bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queue[p.head] = tcpFrame{}
	p.head++
	if inFlight {
		return false // pending still counts it, until finishQuick
	}
	p.pending.Add(-1)
	if p.head < len(p.queue) {
		return false // a concurrent Send queued more
	}
	p.queue, p.head = p.queue[:0], 0
	p.writing = false
	return true
}

// writeQuick writes the one frame Send just queued, in Send's goroutine,
// when p's connection is up and idle: a new leader's HALTs and
// COORDINATORs then leave in one run of its event loop, not each when
// the scheduler gets to its writer goroutine (on star16, with the one P a
// node runs on, the last 9 HALTs went 3 ms after the first 5). The write
// never waits: what the socket does not take at once (a peer that stopped
// reading) is left to a writer, after the bytes it took. It reports
// whether it settled the queue; otherwise a writer must take it over.
func (p *tcpPeer) writeQuick() bool {
	c := p.conn
	if _, gen := p.target(); c.needHello || c.stale(gen) {
		return false
	}
	p.mu.Lock()
	f := p.queue[p.head]
	alone := p.head+1 == len(p.queue)
	p.mu.Unlock()
	if !alone || f.warm {
		return false
	}
	buf := c.seal(f.buf)
	n, err := writeOnce(c.Conn, buf)
	switch {
	case err != nil:
		p.closeConn()
		p.drop(f, DropWriteError)
	case n == len(buf):
		p.t.counters.countSent(f.typ)
	default:
		// Sealed, so these bytes and no others: a frame sealed again
		// would not verify.
		p.rest, p.restFrame = append([]byte(nil), buf[n:]...), f
	}
	return p.popSettled(p.rest != nil)
}

// finishQuick writes what writeQuick left of its frame, before the
// writer's first frame, or drops it if the peer was removed.
func (p *tcpPeer) finishQuick() {
	if p.rest == nil {
		return
	}
	f := p.restFrame
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	switch {
	case stopped:
		p.drop(f, DropClosed)
	case !p.writeHello(p.conn), !p.writeFrame(p.conn, p.rest):
		p.drop(f, DropWriteError)
	default:
		p.t.counters.countSent(f.typ)
	}
	p.rest, p.restFrame = nil, tcpFrame{}
	p.pending.Add(-1)
}

// errDialSlotExpired: every slot for a connection attempt stayed taken
// until the frame to send expired (TCPConfig.MaxDialing).
var errDialSlotExpired = errors.New("no free slot to dial before the frame expired")

// errElectionEnded: the ELECTION a dial was for was retracted while the
// dial waited for a slot (RetractElections).
var errElectionEnded = errors.New("the election ended while its ELECTION waited to dial")

// undialled reports whether err is a dial's that never began, and why
// its frame is dropped.
func undialled(err error) (DropReason, bool) {
	switch {
	case errors.Is(err, errDialSlotExpired):
		return DropExpired, true
	case errors.Is(err, errElectionEnded):
		return DropElectionEnded, true
	}
	return 0, false
}

// retracted reports whether f is an ELECTION that RetractElections took
// back.
func (t *TCPTransport) retracted(f tcpFrame) bool {
	return f.typ == wire.TypeElection && f.round != t.electionRound.Load()
}

// dial connects the writer to p at addr, for address generation gen.
// When abandonable, a frame from the peer cancels a dial in progress. A
// dial connect(2) does not settle waits for a slot until expires, the
// transport clock reading at which the frame to send expires, unless the
// peer was heard from within DialTimeout (heardWithin); frame is the frame
// to send, if any, looked at again once the slot is taken (retracted).
func (p *tcpPeer) dial(addr string, gen uint64, abandonable bool, expires int64, frame *tcpFrame) error {
	t := p.t
	var (
		nc   net.Conn
		done bool
		err  error
	)
	if !p.slowDial {
		nc, done, err = quickDial(addr, t.cfg.UserTimeout, t.cfg.Socket)
	}
	p.slowDial = false
	if !done {
		ctx := t.ctx
		if abandonable {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(t.ctx)
			p.abandonDial.Store(&cancel)
			defer func() {
				p.abandonDial.Store(nil)
				cancel()
			}()
		}
		if !p.heardWithin(t.cfg.DialTimeout) {
			if err := t.acquireDialSlot(ctx, expires); err != nil {
				return err
			}
			defer t.dialing.release()
			if frame != nil && t.retracted(*frame) {
				return errElectionEnded
			}
		}
		if t.cfg.Socket != nil {
			// net.Dialer would make its socket in this thread's namespace.
			nc, err = dialVia(ctx, t.cfg.Socket, addr, t.cfg.DialTimeout, t.cfg.UserTimeout)
		} else {
			nc, err = t.dialer.DialContext(ctx, "tcp", addr)
		}
	}
	if err != nil {
		return err
	}
	p.adopt(nc, gen)
	return nil
}

// acquireDialSlot takes a slot for a connection attempt, waiting until
// expires (a transport clock reading) at most.
func (t *TCPTransport) acquireDialSlot(ctx context.Context, expires int64) error {
	got, err := t.dialing.acquire(ctx, time.Duration(expires-t.mono()))
	switch {
	case got:
		return nil
	case err != nil:
		return err
	}
	return errDialSlotExpired
}

// adopt makes nc the writer's connection to p, dialled for address
// generation gen.
func (p *tcpPeer) adopt(nc net.Conn, gen uint64) {
	t := p.t
	if tc, ok := nc.(*net.TCPConn); ok {
		// Go sets it by default; set it anyway, since the frame-per-segment
		// property is what makes captures line up with the counters.
		tc.SetNoDelay(true)
		if t.cfg.SendBuffer > 0 {
			// Cannot fail on a TCP socket: the kernel clamps the size.
			tc.SetWriteBuffer(t.cfg.SendBuffer)
		}
	}
	c := &tcpConn{Conn: nc, w: newConnWriter(nc), gen: gen, needHello: t.cfg.Key != nil}
	p.conn = c
	p.cur.Store(c)
	p.failures = 0
	p.retryAt.Store(0)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		// Peers never write on a connection they accepted, so any return
		// from Read means the peer closed it or the connection failed.
		var b [64]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				c.dead.Store(true)
				c.Close()
				if t.endedByPeer(err) {
					t.reportPeerClosed(p.id)
				}
				return
			}
		}
	}()
}

func (p *tcpPeer) closeConn() {
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
		p.cur.Store(nil)
	}
}

// backoff returns the pause after p.failures consecutive failed dials:
// BackoffMin doubling up to BackoffMax, of which a random half is jitter,
// so that the nodes of a cluster do not redial a restarted peer in step.
func (p *tcpPeer) backoff() time.Duration {
	cfg := p.t.cfg
	d := cfg.BackoffMin
	for i := 1; i < p.failures && d < cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, cfg.BackoffMax)
	return d/2 + mrand.N(d/2+1)
}
