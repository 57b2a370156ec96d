package node

import (
	"bytes"
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// simNetwork is a deterministic in-memory network of Machines, in the style of
// etcd-io/raft's test network: virtual time, per-link FIFO delivery with a
// random delay, and faults (crash, restart, partition, one-way cut, loss,
// delay spikes) applied between events. Everything random comes from one
// seeded PRNG, so a seed replays a run exactly.
type simNetwork struct {
	t   testing.TB
	rng *rand.Rand
	// algorithm is what every node runs (NewElection); "" is Bully.
	algorithm string
	now       time.Duration
	cfg       election.Config // timeouts shared by every node
	nodes     []*simNode
	byID      map[uuid.UUID]*simNode
	queue     deliveryHeap
	seq       uint64
	fifo      map[[2]int]time.Duration // per directed link: latest scheduled arrival
	cut       map[[2]int]bool          // per directed link: messages are dropped
	// cutResets makes a cut answer what crosses it with a reset, as the
	// testbed's reset mode does: the sender's Machine is told Refused, as
	// for a node that is down, instead of hearing nothing.
	cutResets bool
	minDly    time.Duration
	maxDly    time.Duration
	loss      float64

	sent      [16]uint64 // messages handed to the network, by type
	delivered [16]uint64 // messages a node took (Step), by type
	dropped   [16]uint64 // messages a cut dropped, by type
	trace     *strings.Builder
	// tcp, when set, models the TCP transport between the Machines and the
	// network: dials, refusals and the backoff during which frames are
	// dropped at the sender (simTCP).
	tcp *simTCP
	// observe, when set, sees every event a node's flush drains.
	observe func(n *simNode, e election.Event)
}

type simNode struct {
	idx   int
	id    uuid.UUID
	m     election.Machine
	up    bool
	state *election.State // what the node last persisted
	peers []wire.Member   // the peers it boots with; nil means every node
	join  bool            // announce itself with JOIN at boot
	// What its event log says it leads: since its last election_won,
	// until its status left normal or it followed another leader.
	logLeads bool
	logEpoch uint64
	// refused collects the EventRefused its flushes drained, for inject.
	refused []election.Event
}

type delivery struct {
	at   time.Duration
	seq  uint64
	from int
	to   int
	msg  wire.Message
	// refused: the sender's dial was refused; the delivery reports it to
	// the sender instead of handing msg to the receiver.
	refused bool
	// unreachable: the sender's transport dropped msg unsent (a backoff, a
	// dial that timed out); the delivery reports it to the sender's
	// Machine if it asks (UnreachableReporter), as TCPTransport does.
	unreachable bool
}

type deliveryHeap []delivery

func (h deliveryHeap) Len() int { return len(h) }
func (h deliveryHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h deliveryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deliveryHeap) Push(x any)   { *h = append(*h, x.(delivery)) }
func (h *deliveryHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

func newSimNetwork(t testing.TB, seed uint64, n int, cfg election.Config) *simNetwork {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &simNetwork{
		t:      t,
		rng:    rng,
		cfg:    cfg,
		byID:   map[uuid.UUID]*simNode{},
		fifo:   map[[2]int]time.Duration{},
		cut:    map[[2]int]bool{},
		minDly: time.Millisecond,
		maxDly: time.Millisecond,
	}
	for i, id := range electiontest.SortedIDs(rng, n) {
		sn := &simNode{idx: i, id: id}
		s.nodes = append(s.nodes, sn)
		s.byID[id] = sn
	}
	return s
}

func (s *simNetwork) tracef(format string, args ...any) {
	if s.trace != nil {
		fmt.Fprintf(s.trace, "%9.3fms ", float64(s.now)/float64(time.Millisecond))
		fmt.Fprintf(s.trace, format, args...)
		s.trace.WriteByte('\n')
	}
}

func (s *simNetwork) peers() []wire.Member {
	ms := make([]wire.Member, len(s.nodes))
	for i, n := range s.nodes {
		ms[i] = wire.Member{ID: n.id, Addr: fmt.Sprintf("n%d", i)}
	}
	return ms
}

// start boots node i (cold start when it never persisted, restart otherwise).
func (s *simNetwork) start(i int) {
	n := s.nodes[i]
	cfg := s.cfg
	cfg.ID = n.id
	cfg.Addr = fmt.Sprintf("n%d", i)
	cfg.Join = n.join
	cfg.Peers = n.peers
	if cfg.Peers == nil {
		cfg.Peers = s.peers()
	}
	m, err := NewElection(s.algorithm, cfg, n.state, s.now)
	if err != nil {
		s.t.Fatalf("NewElection(n%d): %v", i, err)
	}
	n.m, n.up = m, true
	n.logLeads = false
	s.tracef("n%d up (epoch %d)", i, m.Epoch())
	s.flush(n)
}

func (s *simNetwork) crash(i int) {
	n := s.nodes[i]
	n.up, n.m = false, nil
	s.tracef("n%d CRASH", i)
}

// flush drains a node's output: persist, then hand messages to the network.
func (s *simNetwork) flush(n *simNode) {
	out := n.m.Drain()
	if out.State != nil {
		if n.state != nil && out.State.Epoch < n.state.Epoch {
			s.t.Fatalf("n%d persisted epoch %d after %d: epoch went backwards", n.idx, out.State.Epoch, n.state.Epoch)
		}
		n.state = out.State
	}
	for _, e := range out.Events {
		if s.observe != nil {
			s.observe(n, e)
		}
		switch e.Kind {
		case election.EventRefused:
			n.refused = append(n.refused, e)
		case election.EventStatus:
			s.tracef("n%d %s -> %s", n.idx, e.From, e.To)
			if e.To != election.StatusNormal {
				n.logLeads = false
			}
		case election.EventElectionStarted:
			s.tracef("n%d election (%s)", n.idx, e.Reason)
		case election.EventElectionWon:
			n.logLeads, n.logEpoch = true, e.Epoch
		case election.EventLeaderChanged:
			s.tracef("n%d leader n%d epoch %d", n.idx, s.byID[e.Leader].idx, e.Epoch)
			if e.Leader != n.id {
				n.logLeads = false
			}
		}
	}
	for _, env := range out.Messages {
		// The log and the wire agree: a node claims to lead (COORDINATOR,
		// HEARTBEAT, an ELECTED naming itself) only the epoch its log says
		// it won, and only while its log says it leads.
		t := env.Msg.Type
		claims := t == wire.TypeCoordinator || t == wire.TypeHeartbeat ||
			t == wire.TypeElected && bytes.Equal(env.Msg.Payload, n.id[:])
		if claims && (!n.logLeads || env.Msg.Epoch != n.logEpoch) {
			s.t.Fatalf("n%d sent %s epoch %d, its log having it lead epoch %d: %v", n.idx, t, env.Msg.Epoch, n.logEpoch, n.logLeads)
		}
		to := s.byID[env.To]
		s.sent[env.Msg.Type&15]++
		refused := false
		if s.tcp != nil {
			var send bool
			if send, refused = s.tcp.send(s, n.idx, to.idx, env.Msg); !send {
				continue
			}
		}
		s.transmit(n.idx, to.idx, env.Msg, refused)
	}
}

// unreachable reports msg, which from's transport dropped unsent at time
// at, back to from.
func (s *simNetwork) unreachable(at time.Duration, from, to int, msg wire.Message) {
	s.seq++
	msg.Payload = slices.Clone(msg.Payload)
	heap.Push(&s.queue, delivery{at: max(at, s.now), seq: s.seq, from: from, to: to, msg: msg, unreachable: true})
}

// transmit puts msg on the link from->to, unless the network loses it.
func (s *simNetwork) transmit(from, to int, msg wire.Message, refused bool) {
	if s.loss > 0 && s.rng.Float64() < s.loss {
		s.tracef("n%d -> n%d %s e%d LOST", from, to, msg.Type, msg.Epoch)
		return
	}
	link := [2]int{from, to}
	at := s.now + s.minDly
	if s.maxDly > s.minDly {
		at += time.Duration(s.rng.Int64N(int64(s.maxDly - s.minDly + 1)))
	}
	// TCP keeps each connection in order.
	if last := s.fifo[link]; at < last {
		at = last
	}
	s.fifo[link] = at
	s.seq++
	msg.Payload = slices.Clone(msg.Payload)
	heap.Push(&s.queue, delivery{at: at, seq: s.seq, from: from, to: to, msg: msg, refused: refused})
}

// step processes the earliest event at or before limit and reports whether
// there was one.
func (s *simNetwork) step(limit time.Duration) bool {
	next := limit + 1
	var timer *simNode
	for _, n := range s.nodes {
		if n.up && n.m.NextDeadline() < next {
			next, timer = n.m.NextDeadline(), n
		}
	}
	if len(s.queue) > 0 && s.queue[0].at <= next && s.queue[0].at <= limit {
		d := heap.Pop(&s.queue).(delivery)
		s.now = max(s.now, d.at)
		to := s.nodes[d.to]
		if d.unreachable {
			from := s.nodes[d.from]
			if ur, ok := from.m.(UnreachableReporter); ok && from.up && d.msg.Type.Algorithm() != "" {
				ur.Unreachable(s.now, to.id, d.msg.Type, d.msg.Epoch)
				s.flush(from)
			}
			return true
		}
		cut := s.cut[[2]int{d.from, d.to}]
		if cut && !s.cutResets {
			s.tracef("n%d -> n%d %s e%d dropped", d.from, d.to, d.msg.Type, d.msg.Epoch)
			s.dropped[d.msg.Type&15]++
			return true
		}
		if d.refused || !to.up || cut {
			// A crashed process's host answers with a reset, as TCP does, and so
			// does a cut in reset mode.
			s.tracef("n%d -> n%d %s e%d refused", d.from, d.to, d.msg.Type, d.msg.Epoch)
			if from := s.nodes[d.from]; from.up {
				from.m.Refused(s.now, to.id, d.msg.Type, d.msg.Epoch)
				// As Node.Run: a refused connect is crash evidence.
				from.m.PeerCrashed(s.now, to.id)
				s.flush(from)
			}
			return true
		}
		s.tracef("n%d -> n%d %s e%d", d.from, d.to, d.msg.Type, d.msg.Epoch)
		if s.tcp != nil {
			s.tcp.heard(s, d.to, d.from)
		}
		s.delivered[d.msg.Type&15]++
		to.m.Step(s.now, &d.msg)
		s.flush(to)
		return true
	}
	if timer == nil {
		return false
	}
	s.now = max(s.now, next)
	timer.m.Tick(s.now)
	s.flush(timer)
	return true
}

// runUntil processes every event up to and including time t, calling check
// after each one.
func (s *simNetwork) runUntil(t time.Duration, check func()) {
	for s.step(t) {
		if check != nil {
			check()
		}
	}
	s.now = max(s.now, t)
}

func (s *simNetwork) partition(groups ...[]int) {
	group := map[int]int{}
	for g, members := range groups {
		for _, i := range members {
			group[i] = g
		}
	}
	for i := range s.nodes {
		for j := range s.nodes {
			if i != j && group[i] != group[j] {
				s.cut[[2]int{i, j}] = true
			}
		}
	}
	s.tracef("PARTITION %v", groups)
}

// cutLinks cuts the links between each pair of nodes, both ways, or with
// oneWay only what the first sends to the second; every other link stays
// as it is. heal restores them.
func (s *simNetwork) cutLinks(oneWay bool, pairs ...[2]int) {
	for _, p := range pairs {
		s.cut[p] = true
		if !oneWay {
			s.cut[[2]int{p[1], p[0]}] = true
		}
	}
	s.tracef("CUT %v (one way: %v)", pairs, oneWay)
}

// reaches reports whether what a sends gets to b.
func (s *simNetwork) reaches(a, b int) bool { return a == b || !s.cut[[2]int{a, b}] }

func (s *simNetwork) heal() {
	clear(s.cut)
	s.loss = 0
	s.minDly, s.maxDly = time.Millisecond, simMaxDelay
	s.tracef("HEAL")
}

// agreement returns the leader every live node agrees on, or an error that
// says who disagrees. The simulations ask after every event, so the views
// are spelled out only when there is no agreement.
func (s *simNetwork) agreement() (int, error) {
	if leader, ok := s.agreed(); ok {
		return leader, nil
	}
	return -1, s.disagreement()
}

// agreed returns the leader every live node agrees on, if they do.
func (s *simNetwork) agreed() (int, bool) {
	leader := -1
	for _, n := range s.nodes {
		if !n.up {
			continue
		}
		l, _ := n.m.Leader()
		ln := s.byID[l]
		if n.m.Status() != election.StatusNormal || ln == nil || (leader != -1 && leader != ln.idx) {
			return -1, false
		}
		leader = ln.idx
	}
	return leader, leader != -1
}

// disagreement describes every node's view, for agreement.
func (s *simNetwork) disagreement() error {
	var views []string
	for _, n := range s.nodes {
		if !n.up {
			views = append(views, fmt.Sprintf("n%d:down", n.idx))
			continue
		}
		l, e := n.m.Leader()
		views = append(views, fmt.Sprintf("n%d:%s/%s@%d", n.idx, n.m.Status(), s.name(l), e))
	}
	return fmt.Errorf("no agreement: %s", strings.Join(views, " "))
}

// sle1 returns an error when two live Normal nodes name different leaders.
func (s *simNetwork) sle1() error {
	var first uuid.UUID
	seen := false
	for _, n := range s.nodes {
		if !n.up || n.m.Status() != election.StatusNormal {
			continue
		}
		l, _ := n.m.Leader()
		if !seen {
			first, seen = l, true
			continue
		}
		if l != first {
			var views []string
			for _, o := range s.nodes {
				if o.up {
					ol, oe := o.m.Leader()
					views = append(views, fmt.Sprintf("n%d:%s/%s@%d", o.idx, o.m.Status(), s.name(ol), oe))
				}
			}
			return fmt.Errorf("SLE1 violated at %v: %s", s.now, strings.Join(views, " "))
		}
	}
	return nil
}

// name returns the short simulation name of a node ID.
func (s *simNetwork) name(id uuid.UUID) string {
	if n := s.byID[id]; n != nil {
		return fmt.Sprintf("n%d", n.idx)
	}
	return "none"
}

const simMaxDelay = 5 * time.Millisecond
