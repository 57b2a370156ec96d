package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Store persists a node's State; FileStore is the real one.
type Store interface {
	// Load returns the saved State, or nil, nil for a fresh node.
	Load() (*election.State, error)
	// Save puts st on stable storage before it returns nil.
	Save(st *election.State) error
}

// Options assemble a Node. Transport and Store are required and stay the
// caller's to close, after Run returns.
type Options struct {
	Config election.Config
	// Algorithm names the election algorithm (NewElection); "" is Bully.
	Algorithm string
	Transport Transport
	Store     Store
	// Log receives one record per Machine event; nil logs nothing.
	Log *EventLog
	// Metrics is the address the node's Prometheus endpoint is bound at,
	// for its node_started record; "" when it serves none.
	Metrics string
	// Identity says, in the node_started record, what proves a peer's ID
	// at this node (IdentityMemberKeys, IdentityClusterKey, IdentityNone).
	Identity string
	// Clock is the node's clock, which SetClock skews; the transport
	// should read the same one (TCPConfig.Clock). nil makes one reading
	// the host's.
	Clock *Clock
}

// What proves a peer's ID at a node (node_started's identity).
const (
	// IdentityMemberKeys: HELLOs signed by the member keys the peers
	// file lists; no member can speak in another listed member's name.
	IdentityMemberKeys = "member_keys"
	// IdentityClusterKey: the cluster key alone; any member can claim any
	// ID (see "Hostile and broken peers").
	IdentityClusterKey = "cluster_key"
	// IdentityNone: an insecure node; anyone who reaches it can.
	IdentityNone = "none"
)

// ErrNotRunning is returned by requests to a Node whose Run has returned.
var ErrNotRunning = errors.New("node is not running")

// leaveFlushTimeout bounds how long a leaving node waits for its LEAVE
// frames to be written before it exits anyway.
const leaveFlushTimeout = time.Second

// maxBatch bounds how many queued inbound messages are stepped before one
// Drain, so that a burst costs one fsync, not one per message, while timers
// still get their turn.
const maxBatch = 64

// Node runs an election.Machine: one goroutine (Run) owns it and feeds it
// received messages, timer ticks and control requests; after each it
// persists the new State, then hands the messages to the Transport, which
// never blocks, so the Machine never waits on a slow or dead peer.
type Node struct {
	cfg       election.Config
	tr        Transport
	store     Store
	log       *EventLog
	issues    *issueReporter
	created   time.Time // for uptime
	clock     *Clock
	start     time.Duration // clock.mono() at the origin of the Machine's clock; set by Run
	m         election.Machine
	restored  *election.State
	metrics   string // Options.Metrics
	identity  string // Options.Identity
	algorithm string // Options.Algorithm, "" made AlgorithmBully

	ctrl    chan func()
	done    chan struct{}
	running atomic.Bool
	status  atomic.Pointer[NodeStatus]

	// Owned by the Run goroutine.
	left                  bool
	started, won, changes uint64
	// memberInfos is the last status's Members, built from the Machine's
	// member list infosOf: rebuilt only when the Machine replaced it.
	memberInfos []MemberInfo
	infosOf     []wire.Member
	// standby is what warmStandby last gave the transport to warm.
	standby []uuid.UUID
}

// MemberInfo is one member in a NodeStatus.
type MemberInfo struct {
	ID   uuid.UUID `json:"id"`
	Addr string    `json:"addr"`
}

// NodeStatus is a node's view, as served at the control socket's GET
// /status. Field names are stable.
type NodeStatus struct {
	ID   uuid.UUID `json:"id"`
	Addr string    `json:"addr"`
	// Algorithm is the election algorithm the node runs: "bully" or "ring".
	Algorithm string `json:"algorithm"`
	// Status is "electing", "halting", "waiting" or "normal" (the ring
	// only "electing", taking part in a run, and "normal"), or "held" for
	// a node started with HoldBoot that no election has reached and that
	// was not released yet.
	Status string `json:"status"`
	// Leader is the last leader accepted (the nil UUID before any); it is
	// significant only while Status is "normal".
	Leader   uuid.UUID `json:"leader"`
	IsLeader bool      `json:"is_leader"`
	// Epoch is the leader's epoch; MaxEpoch the highest epoch seen.
	Epoch    uint64       `json:"epoch"`
	MaxEpoch uint64       `json:"max_epoch"`
	Members  []MemberInfo `json:"members"`
	// Left is true once the node announced LEAVE.
	Left             bool            `json:"left"`
	ElectionsStarted uint64          `json:"elections_started"`
	ElectionsWon     uint64          `json:"elections_won"`
	LeaderChanges    uint64          `json:"leader_changes"`
	Counters         CounterSnapshot `json:"counters"`
	PID              int             `json:"pid"`
	Uptime           string          `json:"uptime"`
	UptimeNS         int64           `json:"uptime_ns"`
	// Clock is the skew of the node's clock in force (SetClock): the
	// offset of its wall clock from the host's now, and its rate; absent
	// while it reads the host's.
	Clock *fault.ClockSkew `json:"clock,omitempty"`
}

// Agrees reports whether s is a Normal node following leader at epoch.
func (s *NodeStatus) Agrees(leader uuid.UUID, epoch uint64) bool {
	return s.Status == election.StatusNormal.String() && !s.Left && s.Leader == leader && s.Epoch == epoch
}

// New loads the node's State from the store and builds its Machine, which
// starts with an election (Reason boot) once Run runs, unless
// Config.HoldBoot holds it until Release.
func New(opts Options) (*Node, error) {
	if opts.Transport == nil {
		return nil, errors.New("node: no transport")
	}
	if opts.Store == nil {
		return nil, errors.New("node: no store")
	}
	restored, err := opts.Store.Load()
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = NewClock()
	}
	m, err := NewElection(opts.Algorithm, opts.Config, restored, 0)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:       opts.Config,
		tr:        opts.Transport,
		store:     opts.Store,
		log:       opts.Log,
		issues:    newIssueReporter(opts.Transport.Counters(), opts.Log),
		created:   time.Now(),
		clock:     clock,
		start:     clock.mono(),
		m:         m,
		restored:  restored,
		metrics:   opts.Metrics,
		identity:  opts.Identity,
		algorithm: AlgorithmName(opts.Algorithm),
		ctrl:      make(chan func()),
		done:      make(chan struct{}),
	}
	n.publish()
	return n, nil
}

// ID returns the node's ID.
func (n *Node) ID() uuid.UUID { return n.cfg.ID }

// now is the Machine's clock: the node's monotonic clock since Run (since
// New before it), at the rate of its skew.
func (n *Node) now() time.Duration { return n.clock.mono() - n.start }

// Done is closed when Run has returned.
func (n *Node) Done() <-chan struct{} { return n.done }

// Run runs the node until ctx is done, Leave completes, or saving the state
// fails. It returns nil on the first two: a node that cannot persist its
// promises must stop rather than make them, so the third is an error.
func (n *Node) Run(ctx context.Context) (err error) {
	if !n.running.CompareAndSwap(false, true) {
		return errors.New("node: Run called twice")
	}
	defer close(n.done)
	// The Machine has not been called since New, so moving its clock's
	// origin here is invisible to it, and makes mono_ns count from Run.
	n.start = n.clock.mono()
	rec := LogRecord{Event: "node_started", MonoNS: 0, Algorithm: n.algorithm, Addr: n.cfg.Addr, Metrics: n.metrics, Identity: n.identity, PID: os.Getpid()}
	if n.restored != nil {
		rec.Restored, rec.Epoch = true, n.restored.Epoch
	}
	n.log.Write(rec)
	defer func() {
		rec := LogRecord{Event: "node_stopped", MonoNS: int64(n.now()), Reason: "shutdown"}
		switch {
		case err != nil:
			rec.Reason, rec.Error = "error", err.Error()
		case n.left:
			rec.Reason = "left"
		}
		n.log.Write(rec)
	}()

	n.tr.SetPeers(n.m.Members())
	if err := n.flush(); err != nil {
		return err
	}
	timer := time.NewTimer(n.untilDeadline())
	defer timer.Stop()
	in := n.tr.Recv()
	var refused <-chan Refusal // nil, never ready, for transports that cannot tell
	if rr, ok := n.tr.(RefusalReporter); ok {
		refused = rr.Refusals()
	}
	var (
		closed  <-chan uuid.UUID // likewise
		crashed <-chan uuid.UUID
		probes  *crashProbes
	)
	if cp, ok := n.tr.(CrashProber); ok {
		probeCtx, stopProbes := context.WithCancel(ctx)
		probes = newCrashProbes(probeCtx, cp, n.watches)
		closed, crashed = cp.PeerClosed(), probes.refused
		defer func() {
			stopProbes()
			probes.wg.Wait()
		}()
	}
	for !n.left {
		timer.Reset(n.untilDeadline())
		select {
		case <-ctx.Done():
			return nil
		case msg := <-in:
			n.step(&msg)
		batch:
			for range maxBatch - 1 {
				select {
				case msg = <-in:
					n.step(&msg)
				default:
					break batch
				}
			}
		case <-timer.C:
			// Messages already received go first: an ANSWER waiting in
			// the queue when the election timeout fires (a node that was
			// not scheduled in time on a loaded host) must stop the node
			// from declaring itself the highest.
		drain:
			for range maxBatch {
				select {
				case msg := <-in:
					n.step(&msg)
				default:
					break drain
				}
			}
			n.m.Tick(n.now())
		case peer := <-closed:
			if n.watches(peer) {
				probes.request(peer, n.m.ProbeDelay(peer))
			}
		case peer := <-crashed:
			n.m.PeerCrashed(n.now(), peer)
		case r := <-refused:
			if r.Cause == RefusalRefused {
				n.m.Refused(n.now(), r.Peer, r.Type, r.Epoch)
				// The connect refused is the evidence a probe would find.
				n.m.PeerCrashed(n.now(), r.Peer)
			} else if ur, ok := n.m.(UnreachableReporter); ok {
				ur.Unreachable(n.now(), r.Peer, r.Type, r.Epoch)
			}
		case f := <-n.ctrl:
			f()
		}
		if err := n.flush(); err != nil {
			return err
		}
	}
	n.tr.Flush(leaveFlushTimeout)
	return nil
}

// watches reports whether the Machine would act on peer's crash
// (Machine.PeerCrashed): peer is the leader of this Normal follower. Only
// then is an end of a connection worth a probe. It reads the status the
// last flush published, which every change of status or leader does, so
// that the probes' goroutines can ask too.
func (n *Node) watches(peer uuid.UUID) bool {
	s := n.status.Load()
	return s.Status == election.StatusNormal.String() && !s.IsLeader && s.Leader == peer
}

// untilDeadline is the host time until the Machine's next deadline.
func (n *Node) untilDeadline() time.Duration {
	return n.clock.hostDuration(max(n.m.NextDeadline()-n.now(), 0))
}

// step hands msg to the Machine unless its payload is malformed: the
// Machine trusts JOIN and MEMBERS addresses to fit a MEMBERS list.
func (n *Node) step(msg *wire.Message) {
	var err error
	switch msg.Type {
	case wire.TypeJoin:
		_, err = wire.DecodeAddr(msg.Payload)
	case wire.TypeMembers:
		_, err = wire.DecodeMembers(msg.Payload)
	case wire.TypeReject, wire.TypeElected:
		_, err = wire.DecodeID(msg.Payload)
	case wire.TypeRingElection:
		_, _, err = wire.DecodeRingElection(msg.Payload)
	}
	if err != nil {
		n.tr.Counters().rejected.Add(1)
		n.issues.report(IssueMalformed, n.memberAddr(msg.From), msg.From, fmt.Sprintf("%s: %v", msg.Type, err))
		return
	}
	n.m.Step(n.now(), msg)
}

// flush drains the Machine: persist, then log, then send. The order is the
// point: a HALT_ACK or COORDINATOR promises a ballot, and the promise must be
// on disk before any peer can act on it.
func (n *Node) flush() error {
	out := n.m.Drain()
	if out.State != nil {
		if err := n.store.Save(out.State); err != nil {
			return fmt.Errorf("save state: %w", err)
		}
	}
	members, electionEnded := false, false
	n.log.hold()
	for _, e := range out.Events {
		if e.Kind == election.EventRefused {
			n.issues.report(issueOfRefusal(e.Cause), e.Peer.Addr, e.Peer.ID, e.Detail)
			continue
		}
		n.log.Event(e)
		switch e.Kind {
		case election.EventElectionStarted:
			n.started++
		case election.EventElectionWon:
			n.won++
		case election.EventLeaderChanged:
			n.changes++
		case election.EventMemberJoined, election.EventMemberLeft:
			members = true
		case election.EventStatus:
			electionEnded = electionEnded || e.From == election.StatusElecting
		}
	}
	n.log.release()
	if r, ok := n.tr.(ElectionRetractor); ok && electionEnded {
		// Before sending: an election started in the same Output keeps
		// its ELECTIONs.
		r.RetractElections()
	}
	if members {
		// Before sending: a joiner is sent MEMBERS and COORDINATOR in the
		// same Output that adds it.
		n.tr.SetPeers(n.m.Members())
	}
	for i := range out.Messages {
		n.tr.Send(out.Messages[i].To, &out.Messages[i].Msg)
	}
	if out.State != nil || len(out.Events) > 0 || n.left {
		n.publish()
		n.warmStandby()
	}
	return nil
}

// warmStandby has the transport connect to the peers the Machine would
// send to first if its leader failed (election.Standby), once the node
// has followed that leader for a FailureTimeout, after most of a boot's
// burst (1000 nodes in one host agreed as fast with it as without, within
// noise). The peers are given again only when they change.
func (n *Node) warmStandby() {
	s, ok := n.m.(election.Standby)
	w, ok2 := n.tr.(Warmer)
	if !ok || !ok2 {
		return
	}
	var peers []uuid.UUID
	if !n.left {
		peers = s.StandbyPeers()
	}
	if slices.Equal(peers, n.standby) {
		return
	}
	n.standby = slices.Clone(peers)
	w.Warm(n.standby, n.cfg.FailureTimeout)
}

// memberAddr returns the address id is known by, for logs.
func (n *Node) memberAddr(id uuid.UUID) string {
	for _, m := range n.m.Members() {
		if m.ID == id {
			return m.Addr
		}
	}
	return ""
}

// publish makes the Machine's view available to Status without a lock.
func (n *Node) publish() {
	leader, epoch := n.m.Leader()
	ms := n.m.Members()
	s := &NodeStatus{
		ID:               n.cfg.ID,
		Addr:             n.cfg.Addr,
		Algorithm:        n.algorithm,
		Status:           n.m.Status().String(),
		Leader:           leader,
		IsLeader:         n.m.IsLeader(),
		Epoch:            epoch,
		MaxEpoch:         n.m.Epoch(),
		Members:          n.memberInfosOf(ms),
		Left:             n.left,
		ElectionsStarted: n.started,
		ElectionsWon:     n.won,
		LeaderChanges:    n.changes,
	}
	n.status.Store(s)
}

// memberInfosOf returns ms as MemberInfos, shared between statuses (Status
// copies it) until the Machine's list changes: a node publishes on every
// event, and at 1000 members copying the list each time was a tenth of a
// boot's CPU.
func (n *Node) memberInfosOf(ms []wire.Member) []MemberInfo {
	if n.memberInfos != nil && len(ms) == len(n.infosOf) && (len(ms) == 0 || &ms[0] == &n.infosOf[0]) {
		return n.memberInfos
	}
	infos := make([]MemberInfo, len(ms))
	for i, m := range ms {
		infos[i] = MemberInfo{ID: m.ID, Addr: m.Addr}
	}
	n.memberInfos, n.infosOf = infos, ms
	return infos
}

// Status returns the node's current view and counters.
func (n *Node) Status() NodeStatus {
	s := *n.status.Load()
	s.Members = append([]MemberInfo(nil), s.Members...)
	s.Counters = n.tr.Counters().Snapshot()
	s.PID = os.Getpid()
	up := time.Since(n.created)
	s.Uptime = up.Round(time.Millisecond).String()
	s.UptimeNS = int64(up)
	if skew := n.clock.Skew(); skew != (fault.ClockSkew{}) {
		s.Clock = &skew
	}
	return s
}

// SetClock puts skew on the node's clock from now (Clock.Set): the wall
// time its HELLOs carry and it checks peers' against, and the rate its
// timers run at. A zero skew puts it back on the host's clock.
func (n *Node) SetClock(ctx context.Context, skew fault.ClockSkew) error {
	if err := skew.Validate(); err != nil {
		return err
	}
	// On the Run goroutine, so that the timer it waits on is set again at
	// the new rate.
	return n.do(ctx, func() { n.clock.Set(skew) })
}

// do runs f on the Run goroutine and waits until it ran.
func (n *Node) do(ctx context.Context, f func()) error {
	ran := make(chan struct{})
	select {
	case n.ctrl <- func() { f(); close(ran) }:
	case <-n.done:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	<-ran // f runs before the loop can return
	return nil
}

// hold parks the Run goroutine, as SIGSTOP parks a node's process, until
// release is closed or stop ends: no timer fires and nothing is stepped,
// saved or sent meanwhile. It returns once the goroutine is parked.
func (n *Node) hold(release, stop <-chan struct{}) error {
	parked := make(chan struct{})
	select {
	case n.ctrl <- func() {
		close(parked)
		select {
		case <-release:
		case <-stop:
		}
	}:
	case <-n.done:
		return ErrNotRunning
	}
	<-parked
	return nil
}

// Campaign starts an election now (Reason manual), unless the node is
// already electing.
func (n *Node) Campaign(ctx context.Context) error {
	return n.do(ctx, func() { n.m.Campaign(n.now(), wire.ReasonManual) })
}

// Release lets a node started with Config.HoldBoot elect: held
// (election.StatusHeld), it starts its boot election now (Reason boot).
// A node an election has drawn in meanwhile is left alone: it follows a
// leader, or its own timers end the election it takes part in, so a
// release of a whole cluster after its leader won costs no frame. A node
// not held is unchanged too.
func (n *Node) Release(ctx context.Context) error {
	return n.do(ctx, func() {
		if n.m.Status() == election.StatusHeld {
			n.m.Campaign(n.now(), wire.ReasonBoot)
		}
	})
}

// Leave announces LEAVE to every member and waits until Run has returned,
// having given the transport up to a second to write the LEAVE frames.
func (n *Node) Leave(ctx context.Context) error {
	err := n.do(ctx, func() {
		n.m.Leave(n.now())
		n.left = true
	})
	if err != nil {
		return err
	}
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
