package node

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
)

var bootRuns = flag.Uint64("sim.bootruns", 1000, "staggered boots per TestStaggeredBootOneLeader run; an eighth of them, with each link's first SYN lost in turn, per TestStaggeredBootLostSYN")

// simTCP models what TCPTransport does between a Machine and the network,
// per directed link: a frame goes out on the link's connection, dialled
// when there is none; a dial to a node whose process is not up (not yet
// listening) is refused, which drops the frame, reports it to the sender's
// Machine (Refused) and starts a backoff, BackoffMin doubling to BackoffMax
// with a random half of jitter, during which every frame for that peer is
// dropped at once; a frame received from the peer ends the backoff. Dials
// to a listening peer succeed at once, as quickDial's do on one host, but
// for a lost SYN (lose).
type simTCP struct {
	min, max    time.Duration
	dialTimeout time.Duration
	conn        map[[2]int]bool
	retryAt     map[[2]int]time.Duration
	failures    map[[2]int]int
	// A dial whose SYN went unanswered: it fails at dialEnd, dropping the
	// frames queued meanwhile, unless a frame from the peer comes first
	// (the transport then abandons it and dials again, at once).
	dialEnd map[[2]int]time.Duration
	queued  map[[2]int][]wire.Message

	// userTimeout aborts a connection whose frames cross a dropping cut
	// that long after the first of them (TCP_USER_TIMEOUT): until then
	// they are lost silently; lostSince is when that first one went.
	userTimeout time.Duration
	lostSince   map[[2]int]time.Duration
	// cutDialEnd is when a dial into a dropping cut times out.
	cutDialEnd map[[2]int]time.Duration

	// lose, when set, is the link whose first dial's SYN goes unanswered:
	// a loaded host or delayer dropped it, which the transport cannot tell
	// from a partition.
	lose     *[2]int
	lostOnce bool
}

func newSimTCP(cfg TCPConfig) *simTCP {
	cfg = cfg.withDefaults()
	return &simTCP{
		min:         cfg.BackoffMin,
		max:         cfg.BackoffMax,
		dialTimeout: cfg.DialTimeout,
		userTimeout: cfg.UserTimeout,
		lostSince:   map[[2]int]time.Duration{},
		cutDialEnd:  map[[2]int]time.Duration{},
		conn:        map[[2]int]bool{},
		retryAt:     map[[2]int]time.Duration{},
		failures:    map[[2]int]int{},
		dialEnd:     map[[2]int]time.Duration{},
		queued:      map[[2]int][]wire.Message{},
	}
}

// send decides the fate of msg on link from->to: whether it goes on the
// network now, and whether its dial was refused (the network then reports
// it to the sender rather than delivering it).
func (c *simTCP) send(s *simNetwork, from, to int, msg wire.Message) (send, refused bool) {
	link := [2]int{from, to}
	c.settle(s, link)
	if _, dialling := c.dialEnd[link]; dialling {
		msg.Payload = slices.Clone(msg.Payload)
		c.queued[link] = append(c.queued[link], msg)
		return false, false
	}
	if s.now < c.retryAt[link] {
		s.tracef("n%d -> n%d %s e%d dropped: backing off until %v", from, to, msg.Type, msg.Epoch, c.retryAt[link])
		s.unreachable(max(s.now, c.cutDialEnd[link]), from, to, msg)
		return false, false
	}
	if c.conn[link] && s.cut[link] {
		if s.cutResets {
			// The reset answers this segment: the frame is lost and the
			// connection closed; the next frame dials into the cut.
			delete(c.conn, link)
			s.tracef("n%d -> n%d %s e%d: connection reset", from, to, msg.Type, msg.Epoch)
			return false, false
		}
		since, lost := c.lostSince[link]
		if !lost {
			c.lostSince[link] = s.now
		}
		if !lost || s.now < since+c.userTimeout {
			return true, false
		}
		s.tracef("n%d -> n%d: connection aborted, unacknowledged since %v", from, to, since)
		delete(c.conn, link)
		delete(c.lostSince, link)
	}
	if c.conn[link] {
		delete(c.lostSince, link)
		return true, false
	}
	if s.cut[link] && !s.cutResets {
		// The SYN is dropped: the dial times out and the frame is reported
		// unreachable then, and so is every frame of the backoff that
		// follows, those sent during the dial when it fails.
		end := s.now + c.dialTimeout
		c.cutDialEnd[link] = end
		c.failures[link]++
		c.retryAt[link] = end + c.backoff(s, link)
		s.tracef("n%d -> n%d %s e%d: SYN into the cut", from, to, msg.Type, msg.Epoch)
		s.unreachable(end, from, to, msg)
		return false, false
	}
	if c.lose != nil && *c.lose == link && !c.lostOnce {
		c.lostOnce = true
		s.tracef("n%d -> n%d %s e%d: SYN unanswered", from, to, msg.Type, msg.Epoch)
		c.dialEnd[link] = s.now + c.dialTimeout
		msg.Payload = slices.Clone(msg.Payload)
		c.queued[link] = []wire.Message{msg}
		return false, false
	}
	if s.nodes[to].up && !s.cut[link] {
		c.conn[link] = true
		c.failures[link] = 0
		c.retryAt[link] = 0
		return true, false
	}
	c.failures[link]++
	c.retryAt[link] = s.now + c.backoff(s, link)
	return true, true
}

// settle fails link's unanswered dial once its timeout passed: what was
// queued is dropped and a backoff starts then.
func (c *simTCP) settle(s *simNetwork, link [2]int) {
	end, dialling := c.dialEnd[link]
	if !dialling || s.now < end {
		return
	}
	s.tracef("n%d -> n%d: dial timed out at %v, %d frames dropped", link[0], link[1], end, len(c.queued[link]))
	for _, m := range c.queued[link] {
		s.unreachable(end, link[0], link[1], m)
	}
	delete(c.dialEnd, link)
	delete(c.queued, link)
	c.failures[link]++
	c.retryAt[link] = end + c.backoff(s, link)
}

// backoff is TCPTransport's pause after the link's consecutive failures.
func (c *simTCP) backoff(s *simNetwork, link [2]int) time.Duration {
	d := c.min
	for i := 1; i < c.failures[link] && d < c.max; i++ {
		d *= 2
	}
	d = min(d, c.max)
	return d/2 + time.Duration(s.rng.Int64N(int64(d/2)+1))
}

// heard ends the backoff of node at for peer from, whose frame it
// received, and retries an unanswered dial to it at once.
func (c *simTCP) heard(s *simNetwork, at, from int) {
	link := [2]int{at, from}
	c.settle(s, link)
	if _, dialling := c.dialEnd[link]; dialling {
		delete(c.dialEnd, link)
		q := c.queued[link]
		delete(c.queued, link)
		if s.nodes[from].up {
			c.conn[link] = true
			c.failures[link] = 0
			c.retryAt[link] = 0
			for _, m := range q {
				s.transmit(at, from, m, false)
			}
			return
		}
	}
	c.retryAt[link] = 0
}

// boot forgets node i's connections, both ways, and its backoffs and
// dials: a new process has none, and its peers' connections to the old
// one are reset.
func (c *simTCP) boot(i int) {
	for link := range c.conn {
		if link[0] == i || link[1] == i {
			delete(c.conn, link)
		}
	}
	for _, m := range []map[[2]int]time.Duration{c.retryAt, c.dialEnd} {
		for link := range m {
			if link[0] == i {
				delete(m, link)
			}
		}
	}
	for link := range c.queued {
		if link[0] == i {
			delete(c.queued, link)
		}
	}
	for link := range c.failures {
		if link[0] == i {
			delete(c.failures, link)
		}
	}
}

// bootOverlap boots n nodes over TCP at the given offsets, each process
// listening from its start, and runs until every node agrees plus a margin.
// It returns the longest time two or more nodes were Normal leaders at
// once, when that began, and who led.
func bootOverlap(t testing.TB, seed uint64, offsets []time.Duration, maxDly time.Duration, tweak func(*simNetwork), trace bool) (longest, from time.Duration, who string, s *simNetwork) {
	cfg := election.DefaultConfig()
	s = newSimNetwork(t, seed, len(offsets), cfg)
	s.minDly, s.maxDly = 100*time.Microsecond, maxDly
	s.tcp = newSimTCP(TCPConfig{})
	if trace {
		s.trace = &strings.Builder{}
	}
	if tweak != nil {
		tweak(s)
	}
	var began time.Duration
	var leaders string
	check := func() {
		var ls []string
		for _, n := range s.nodes {
			if n.up && n.m.IsLeader() {
				ls = append(ls, fmt.Sprintf("n%d", n.idx))
			}
		}
		switch {
		case len(ls) >= 2 && leaders == "":
			began, leaders = s.now, strings.Join(ls, ",")
		case len(ls) < 2 && leaders != "":
			if d := s.now - began; d > longest {
				longest, from, who = d, began, leaders
			}
			leaders = ""
		}
	}
	order := make([]int, len(offsets))
	for i := range order {
		order[i] = i
	}
	last := time.Duration(0)
	for range offsets {
		next := -1
		for _, i := range order {
			if !s.nodes[i].up && (next < 0 || offsets[i] < offsets[next]) {
				next = i
			}
		}
		s.runUntil(offsets[next], check)
		s.tcp.boot(next)
		s.start(next)
		check()
		last = offsets[next]
	}
	s.runUntil(last+5*time.Second, check)
	if leaders != "" {
		longest, from, who = max(longest, s.now-began), began, leaders
	}
	if l, err := s.agreement(); err != nil || l != len(offsets)-1 {
		t.Errorf("seed %d, offsets %v: no agreement on the highest node 5 s after the last boot: leader n%d, %v", seed, offsets, l, err)
	}
	return longest, from, who, s
}

// bootSpreads are the windows staggered boots start within: at once, as
// a script starts a cluster on an idle host, to seconds apart, as on a
// loaded one.
var bootSpreads = []time.Duration{0, 10 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond,
	time.Second, 2 * time.Second, 4 * time.Second}

// staggeredOffsets returns n start offsets within spread, drawn from seed.
func staggeredOffsets(seed uint64, n int, spread time.Duration) []time.Duration {
	rng := rand.New(rand.NewPCG(seed, seed^0x5bd1e995))
	offsets := make([]time.Duration, n)
	for i := range offsets {
		if spread > 0 {
			offsets[i] = time.Duration(rng.Int64N(int64(spread)))
		}
	}
	return offsets
}

// bootSearch boots five nodes with staggered starts for each seed below
// runs, with every link's first SYN lost in turn when lose is set, and
// fails when two nodes led at once for longer than bound, with the worst
// run's trace.
func bootSearch(t *testing.T, algorithm string, runs uint64, lose bool, bound time.Duration) {
	const n, maxDly = 5, 20 * time.Millisecond
	links := []*[2]int{nil}
	if lose {
		links = nil
		for i := range n {
			for j := range n {
				if i != j {
					links = append(links, &[2]int{i, j})
				}
			}
		}
	}
	var worst, worstAt time.Duration
	var worstSeed uint64
	var worstLose *[2]int
	var worstWho string
	var worstOffsets []time.Duration
	var over int
	for seed := range runs {
		offsets := staggeredOffsets(seed, n, bootSpreads[seed%uint64(len(bootSpreads))])
		for _, l := range links {
			d, at, who, _ := bootOverlap(t, seed, offsets, maxDly, func(s *simNetwork) { s.algorithm, s.tcp.lose = algorithm, l }, false)
			if d > 2*maxDly {
				over++
			}
			if d > worst {
				worst, worstAt, worstSeed, worstLose, worstWho, worstOffsets = d, at, seed, l, who, offsets
			}
		}
	}
	lost := "none"
	if worstLose != nil {
		lost = fmt.Sprintf("n%d->n%d", worstLose[0], worstLose[1])
	}
	t.Logf("longest overlap of two leaders in %d boots: %v (seed %d, lost SYN %s, %s from %v, offsets %v); %d over %v",
		runs*uint64(len(links)), worst, worstSeed, lost, worstWho, worstAt, worstOffsets, over, 2*maxDly)
	if worst > bound {
		_, _, _, s := bootOverlap(t, worstSeed, worstOffsets, maxDly, func(s *simNetwork) { s.algorithm, s.tcp.lose = algorithm, worstLose }, true)
		t.Errorf("%s led at once for %v from %v (seed %d, lost SYN %s, offsets %v), more than %v:\n%s",
			worstWho, worst, worstAt, worstSeed, lost, worstOffsets, bound, s.trace)
	}
}

// Nodes booted at staggered times over the TCP transport's semantics
// never have two Normal leaders for longer than a few message delays with
// every link up. A bench of star5 once reported two boot leaders for
// 908 ms; the suspect was each node's backoff from the other, begun while
// the other was not yet listening, hiding the two leaders' HEARTBEATs from
// each other for up to BackoffMax. That takes a refused dial each way,
// which cannot be: a node listens before it sends, so the first of the two
// to send was listening when the other dialled it, and a backoff one way
// ends with the first frame that gets through the other.
func TestStaggeredBootOneLeader(t *testing.T) {
	// Two leaders coexist at most until the later one's COORDINATOR
	// reaches the earlier one: one message delay, with room to spare.
	bootSearch(t, AlgorithmBully, *bootRuns, false, 4*20*time.Millisecond)
}

// One SYN lost at boot (a loaded host or delayer dropping it; the judge of
// a bench sees the network connected) costs the dial its DialTimeout, since
// the kernel would resend the SYN only after a second, and the frames
// queued meanwhile. A booting node whose HALT waits on that dial counts the
// peer as failed after ElectionTimeout and leads while the peer, if it led,
// still does; the peer's transport may be backing off from the booting node
// since before it came up, so the peer's HEARTBEATs do not end it. The
// lower leader follows the first of the higher one's frames that gets
// through once the dial failed and its backoff ran out, a HEARTBEAT at
// worst, so the two end within DialTimeout - ElectionTimeout + BackoffMin +
// HeartbeatInterval and a few delays.
func TestStaggeredBootLostSYN(t *testing.T) {
	cfg, tcp := election.DefaultConfig(), TCPConfig{}.withDefaults()
	bootSearch(t, AlgorithmBully, *bootRuns/8, true, tcp.DialTimeout-cfg.ElectionTimeout+tcp.BackoffMin+cfg.HeartbeatInterval+4*20*time.Millisecond)
}

// The ring booted at staggered times over the TCP transport's semantics:
// a node leads only after a run passed every node up, so two leaders
// coexist only until the later run, which passes the earlier leader,
// reaches it; what the search finds is reported, and bounded as Bully's.
func TestRingStaggeredBootOneLeader(t *testing.T) {
	bootSearch(t, AlgorithmRing, ringBootRuns(), false, 4*20*time.Millisecond)
}

// ringBootRuns is the ring's share of -sim.bootruns: all of it, or a
// quarter in a short run, where Bully's searches keep theirs.
func ringBootRuns() uint64 {
	if testing.Short() {
		return *bootRuns / 4
	}
	return *bootRuns
}

// The ring with one SYN lost at boot: the frame waits out the dial and is
// then passed on as unreachable, so a run may skip a node that is up; that
// node leads too, if it did, until the later run's HEARTBEATs or ELECTED
// reach it, within the bound Bully's lost SYN has.
func TestRingStaggeredBootLostSYN(t *testing.T) {
	cfg, tcp := election.DefaultConfig(), TCPConfig{}.withDefaults()
	bootSearch(t, AlgorithmRing, ringBootRuns()/8, true, tcp.DialTimeout-cfg.ElectionTimeout+tcp.BackoffMin+cfg.HeartbeatInterval+4*20*time.Millisecond)
}
