package node

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// ServeOptions configure Serve. Zero timeouts take election.DefaultConfig's.
type ServeOptions struct {
	// ID is the node's ID; uuid.Nil takes the one stored in DataDir, or
	// creates and stores a new one.
	ID uuid.UUID
	// Listen is the TCP host:port to accept peers on.
	Listen string
	// Listener, when not nil, is where the node accepts peers instead: a
	// socket already bound and listening, which Listen then need not name
	// (its address replaces it). A caller that must know every node's
	// address before any starts, to list them as peers, binds them first
	// and hands them over; port 0 then picks free ports with no race. The
	// node closes it when it stops, or when Start fails.
	Listener net.Listener
	// Advertise is the address peers dial; "" means the address bound for
	// Listen, which must then name a host.
	Advertise string
	// Peers are the members at start. When there are any, the node's own
	// entry must be among them at its address (Advertise, or else Listen or
	// the address bound for it), unless it joins: a joining node's ID is
	// not listed yet.
	Peers []wire.Member
	// PeersFrom, if not nil, says where each of Peers was given, for
	// errors: PeersFrom[i] is "peers.txt:3" for Peers[i] (see
	// ParsePeersFileFrom); PeersSource names the file or list as a whole.
	PeersFrom   []string
	PeersSource string
	DataDir     string
	// Control is the control socket's path; "" means DataDir/control.sock.
	Control string
	// Metrics is the host:port of the Prometheus endpoint (ListenMetrics);
	// "" serves none. Port 0 picks a free port: Running.MetricsAddr and
	// the node_started record say which.
	Metrics string
	// Join announces the node with JOIN, for a node the peers do not list.
	Join bool
	// HoldBoot starts the node without its boot election until its
	// control socket's /release (election.Config.HoldBoot).
	HoldBoot bool
	// MaxMembers bounds the membership list (election.Config.MaxMembers);
	// 0 is election.DefaultMaxMembers, which Peers must stay under.
	MaxMembers int
	// Algorithm names the election algorithm (NewElection, Algorithms);
	// "" is Bully. Every node of a cluster must run the same one.
	Algorithm string
	// ClusterKey authenticates the node's connections: it is TCP.Key. A
	// node needs either a key or Insecure, never both.
	ClusterKey *wire.Key
	// Insecure runs the node without a cluster key: it accepts frames from
	// anyone who can reach Listen. Serve refuses to start with neither.
	Insecure bool
	// MemberKey is the node's own member key, TCP.MemberKey: it signs the
	// node's HELLOs. Required when PeerKeys gives any key, since peers
	// then refuse unsigned HELLOs; when PeerKeys lists the node, the key
	// must be the one listed.
	MemberKey ed25519.PrivateKey
	// PeerKeys are the member keys the peers file gives (Peers.Keys), TCP.PeerKeys:
	// with any, the node accepts only HELLOs its senders signed.
	PeerKeys map[uuid.UUID]ed25519.PublicKey
	// ResetState starts a node whose data dir has its ID but lost its state
	// file afresh, at epoch 0 (FileStore.ResetState); without it such a
	// data dir is an error wrapping ErrStateMissing.
	ResetState bool
	// Clock is the skew the node's clock starts with (Node.SetClock): a
	// clock fault a lab keeps across the node's restarts, or a real host's
	// error reproduced (`--clock-offset`, `--clock-rate`). Zero reads the
	// host's clock.
	Clock fault.ClockSkew

	HeartbeatInterval, FailureTimeout, ElectionTimeout time.Duration
	// DetectionStagger is election.Config.DetectionStagger; nil takes
	// election.DefaultConfig's, since zero disables the stagger.
	DetectionStagger *time.Duration

	// Log receives the event log in LogFormat; nil logs nothing.
	Log       io.Writer
	LogFormat LogFormat
	TCP       TCPConfig
}

// ClusterKeyFileName is the name launchers give the cluster key file
// (`--cluster-key`) in the directory they keep a cluster's files in: a local
// cluster's Dir, a lab's state directory.
const ClusterKeyFileName = "cluster.key"

// ErrNoClusterKey is what Serve returns for options with neither a
// ClusterKey nor Insecure: nodes are secure by default.
var ErrNoClusterKey = errors.New("no cluster key: give --cluster-key FILE (make one with `bullylab keygen --out FILE`), or --insecure to accept unauthenticated peers")

// Serve runs one node process until ctx is done or the node leaves: it locks
// the data dir, loads the ID and State, listens for peers and on the control
// socket, and runs the Node. Errors are one line and name what failed (the
// data dir, the listen address, a peer, the control socket).
func Serve(ctx context.Context, o ServeOptions) error {
	r, err := StartServing(o)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		r.Stop()
	case <-r.Done():
	}
	<-r.Done()
	return r.Err()
}

// Running is a node StartServing started: what Serve runs, as a handle,
// for a process that hosts many nodes and stops, kills and pauses each on
// its own as signals would its process.
type Running struct {
	n       *Node
	tr      *TCPTransport
	metrics string // the metrics endpoint's bound address; "" if none
	ctl     *ControlServer
	log     *EventLog
	cancel  context.CancelFunc
	stopped <-chan struct{} // the Run context's Done
	done    chan struct{}
	err     error // set before done is closed
	killed  atomic.Bool

	mu      sync.Mutex
	release chan struct{} // non-nil while paused
}

// StartServing starts a node as Serve does and returns once it listens for
// peers and on its control socket.
func StartServing(o ServeOptions) (r *Running, err error) {
	var cleanup []func()
	defer func() {
		if err != nil {
			for _, f := range slices.Backward(cleanup) {
				f()
			}
		}
	}()
	if o.Listener != nil {
		cleanup = append(cleanup, func() { o.Listener.Close() })
		o.Listen = o.Listener.Addr().String()
	}
	if err := checkServeOptions(o); err != nil {
		return nil, err
	}
	var metrics *MetricsServer
	if o.Metrics != "" {
		// Before the data dir: a busy port leaves nothing behind.
		if metrics, err = ListenMetrics(o.Metrics); err != nil {
			return nil, err
		}
		cleanup = append(cleanup, func() { closeMetrics(metrics) })
	}
	store, err := OpenFileStore(o.DataDir)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { store.Close() })
	cfg, err := serveConfig(o, store)
	if err != nil {
		return nil, err
	}
	clock := NewClock()
	if err := clock.Set(o.Clock); err != nil {
		return nil, err
	}
	o.TCP.Clock = clock
	var log *EventLog
	if o.Log != nil {
		log = NewEventLog(o.Log, o.LogFormat, cfg.ID)
	}
	tr, err := listenPeers(o, &cfg, log)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { tr.Close() })
	var metricsAddr string
	if metrics != nil {
		metricsAddr = metrics.Addr()
	}
	n, err := New(Options{Config: cfg, Algorithm: o.Algorithm, Transport: tr, Store: store, Log: log, Metrics: metricsAddr, Identity: o.identity(), Clock: clock})
	if err != nil {
		return nil, err
	}
	ctlPath := o.Control
	if ctlPath == "" {
		ctlPath = filepath.Join(o.DataDir, ControlSocketName)
	}
	ctl, err := ListenControl(ctlPath, n)
	if err != nil {
		return nil, err
	}
	if metrics != nil {
		metrics.Serve(n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r = &Running{n: n, tr: tr, metrics: metricsAddr, ctl: ctl, log: log, cancel: cancel, stopped: ctx.Done(), done: make(chan struct{})}
	go func() {
		r.err = r.run(ctx)
		store.Close()
		if metrics != nil {
			closeMetrics(metrics)
		}
		close(r.done)
	}()
	return r, nil
}

// run runs the node and, unless it was killed, shuts it down as a process
// that exits does: the control socket answers what is in progress, the
// transport closes, and the messages it sent are logged.
func (r *Running) run(ctx context.Context) error {
	runErr := r.n.Run(ctx)
	if r.killed.Load() {
		return nil
	}
	// A /leave request is still waiting for its answer; give it a moment.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.ctl.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		runErr = errors.Join(runErr, err)
	}
	// Once the transport is closed every frame is sent or dropped: the
	// counts are final.
	r.tr.Close()
	r.log.Write(LogRecord{Event: "node_counters", MonoNS: int64(r.n.now()), Sent: sentCounts(r.tr.Counters())})
	return runErr
}

// Done is closed once the node has stopped and released its data dir.
func (r *Running) Done() <-chan struct{} { return r.done }

// Err is why the node stopped, once Done is closed: nil after Stop, Kill
// or a LEAVE.
func (r *Running) Err() error {
	<-r.done
	return r.err
}

// Node returns the running Node.
func (r *Running) Node() *Node { return r.n }

// Addr returns the address the node accepts peers at: the port bound for
// a Listen of port 0.
func (r *Running) Addr() string { return r.tr.LocalAddr() }

// MetricsAddr returns the address of the node's Prometheus endpoint: the
// port bound for a Metrics of port 0; "" when it serves none.
func (r *Running) MetricsAddr() string { return r.metrics }

// Stop shuts the node down as Serve does when its context ends (SIGTERM to
// a node process), and returns at once: Done says when it is over.
func (r *Running) Stop() { r.cancel() }

// Kill stops the node as SIGKILL stops a node process: its connections and
// listeners close now, it logs, saves and sends nothing more, and what its
// transport still queued is lost. It returns once the node is gone.
func (r *Running) Kill() {
	if r.killed.CompareAndSwap(false, true) {
		r.log.silence()
		r.cancel()
		r.tr.Close()
		closed, cancel := context.WithCancel(context.Background())
		cancel()
		r.ctl.Shutdown(closed) // closes at once; the socket file goes too
	}
	<-r.done
}

// Pause parks the node's event loop as SIGSTOP parks a node process: no
// timer fires and no frame is stepped, saved or sent until Resume. Its
// transport still reads what arrives until its receive queue is full; the
// kernel's socket buffers then fill as they would for a stopped process.
// It returns once the loop is parked.
func (r *Running) Pause() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.release != nil {
		return errors.New("node is paused already")
	}
	release := make(chan struct{})
	if err := r.n.hold(release, r.stopped); err != nil {
		return err
	}
	r.release = release
	return nil
}

// Resume lets a paused node's event loop run again.
func (r *Running) Resume() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.release == nil {
		return errors.New("node is not paused")
	}
	close(r.release)
	r.release = nil
	return nil
}

// checkServeOptions checks what o says before anything is opened: a
// cluster key or insecure mode, an address peers can dial, the peers.
func checkServeOptions(o ServeOptions) error {
	switch {
	case !slices.Contains(Algorithms(), AlgorithmName(o.Algorithm)):
		return fmt.Errorf("unknown election algorithm %q (known: %v)", o.Algorithm, Algorithms())
	case o.ClusterKey == nil && !o.Insecure:
		return ErrNoClusterKey
	case o.ClusterKey != nil && o.Insecure:
		return errors.New("a cluster key and insecure mode exclude each other: give one")
	case o.MemberKey != nil && o.Insecure:
		return errors.New("a member key signs HELLOs, which insecure mode does not send: give a cluster key too, or no member key")
	case len(o.PeerKeys) > 0 && o.MemberKey == nil && !o.Insecure:
		return fmt.Errorf("%s: the peers have member keys, so every node must sign its HELLOs, and this one has none: give it its own (make one with `bullylab keygen --member --out FILE`, and list the public key it prints)", peersSource(o))
	}
	if o.Advertise == "" {
		host, _, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return fmt.Errorf("listen address %s: %v", o.Listen, err)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			return fmt.Errorf("listen address %s has no specific host: give an advertise address peers can dial", o.Listen)
		}
	} else if _, err := CanonicalAddr(o.Advertise); err != nil {
		return fmt.Errorf("advertise address: %v", err)
	} else if err := wire.CheckAddr(o.Advertise); err != nil {
		return fmt.Errorf("advertise address: %v", err)
	}
	if err := wire.CheckMembers(o.Peers); err != nil {
		return fmt.Errorf("peers: %v", err)
	}
	return nil
}

// serveConfig resets the state in store if o asks to, loads or creates
// the node's ID there, and returns the node's Config, checked, without its
// Addr: that one is known once the node listens.
func serveConfig(o ServeOptions, store *FileStore) (election.Config, error) {
	if o.ResetState {
		if err := store.ResetState(); err != nil {
			return election.Config{}, err
		}
	}
	id, err := store.LoadOrCreateID(o.ID)
	if err != nil {
		return election.Config{}, err
	}
	cfg := election.DefaultConfig()
	if o.HeartbeatInterval != 0 {
		cfg.HeartbeatInterval = o.HeartbeatInterval
	}
	if o.FailureTimeout != 0 {
		cfg.FailureTimeout = o.FailureTimeout
	}
	if o.ElectionTimeout != 0 {
		cfg.ElectionTimeout = o.ElectionTimeout
	}
	if o.DetectionStagger != nil {
		cfg.DetectionStagger = *o.DetectionStagger
	}
	cfg.ID = id
	cfg.Peers = o.Peers
	cfg.Join = o.Join
	cfg.HoldBoot = o.HoldBoot
	cfg.MaxMembers = o.MaxMembers
	cfg.Insecure = o.Insecure
	if err := cfg.Validate(); err != nil {
		return election.Config{}, err
	}
	return cfg, nil
}

// inboundPerMember is how many accepted connections per member a node
// allows at once (TCPConfig.MaxInbound): every member dialling in, with
// room for the connections of restarted members not yet closed.
const inboundPerMember = 4

// listenPeers listens for peers at o.Listen, or on o.Listener, sets
// cfg.Addr to the address they dial, and checks the node's own entry in
// o.Peers against it.
func listenPeers(o ServeOptions, cfg *election.Config, log *EventLog) (*TCPTransport, error) {
	tcp := o.TCP
	tcp.Key = o.ClusterKey
	tcp.MemberKey = o.MemberKey
	tcp.PeerKeys = o.PeerKeys
	tcp.Log = log
	if tcp.MaxInbound <= 0 {
		tcp.MaxInbound = max(DefaultMaxInbound, inboundPerMember*len(o.Peers))
	}
	var tr *TCPTransport
	if o.Listener != nil {
		tr = NewTCPTransport(o.Listener, cfg.ID, tcp)
	} else {
		var err error
		if tr, err = ListenTCP(o.Listen, cfg.ID, tcp); err != nil {
			return nil, err
		}
	}
	cfg.Addr = o.Advertise
	if cfg.Addr == "" {
		cfg.Addr = tr.LocalAddr()
	}
	if err := checkOwnEntry(o, cfg.ID, tr.LocalAddr()); err != nil {
		tr.Close()
		return nil, err
	}
	return tr, nil
}

// sentCounts returns c's sent counts by type name, without the zeros.
func sentCounts(c *Counters) map[string]uint64 {
	out := map[string]uint64{}
	for i := range c.sent {
		if v := c.sent[i].Load(); v > 0 {
			out[wire.Type(i).String()] = v
		}
	}
	return out
}

// peersSource names where o's peers came from, for errors.
func peersSource(o ServeOptions) string {
	if o.PeersSource == "" {
		return "peers"
	}
	return o.PeersSource
}

// checkOwnEntry checks the node's own entry in o.Peers: present unless the
// node joins, at the address peers dial it at, and with the node's member
// key if the entry gives one. A node listed at
// another address would tell joiners and followers one address while
// others dial the listed one. Addresses compare in canonical form
// (CanonicalAddr); names are not resolved.
func checkOwnEntry(o ServeOptions, id uuid.UUID, bound string) error {
	if len(o.Peers) == 0 {
		return nil
	}
	source := peersSource(o)
	i := slices.IndexFunc(o.Peers, func(m wire.Member) bool { return m.ID == id })
	if i < 0 {
		if o.Join {
			return nil
		}
		return fmt.Errorf("%s: no entry for this node's ID %s: list every node, itself included, at the address peers dial, or start a node the list does not name yet with --join", source, id)
	}
	at := fmt.Sprintf("%s entry %d", source, i+1)
	if i < len(o.PeersFrom) && o.PeersFrom[i] != "" {
		at = o.PeersFrom[i]
	}
	if want, ok := o.PeerKeys[id]; ok && o.MemberKey != nil && !want.Equal(o.MemberKey.Public()) {
		// Its peers would refuse every HELLO it signs.
		return fmt.Errorf("%s: this node's ID %s is listed with member key %s, but its own member key's public key is %s", at, id,
			wire.EncodePublicKey(want), wire.EncodePublicKey(o.MemberKey.Public().(ed25519.PublicKey)))
	}
	listed, err := CanonicalAddr(o.Peers[i].Addr)
	if err != nil {
		return fmt.Errorf("%s: this node's entry: %v", at, err)
	}
	var mine []string
	what := "advertise address (--advertise) is " + o.Advertise
	if o.Advertise != "" {
		mine = append(mine, o.Advertise)
	} else {
		mine = append(mine, o.Listen, bound)
		what = "listen address (--listen) is " + o.Listen
		if bound != o.Listen {
			what += ", bound at " + bound
		}
	}
	for _, a := range mine {
		if c, err := CanonicalAddr(a); err == nil && c == listed {
			return nil
		}
	}
	return fmt.Errorf("%s: this node's ID %s is listed at %s, but its %s; list the node where peers dial it, and give that address as --advertise if it is not the listen address", at, id, o.Peers[i].Addr, what)
}

// identity is what proves a peer's ID at a node started with o.
func (o ServeOptions) identity() string {
	switch {
	case o.ClusterKey == nil:
		return IdentityNone
	case len(o.PeerKeys) > 0:
		return IdentityMemberKeys
	}
	return IdentityClusterKey
}
