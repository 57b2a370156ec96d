package bully

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// TestDetectionStagger: a follower's failure deadline grows by one stagger
// per member between it and its leader, up to ElectionTimeout; a member
// joining or leaving in between moves it; a halted node's wait is staggered
// below the node that halted it.
func TestDetectionStagger(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(3, 4)), 8)
	leader := ids[7]
	peers := electiontest.Members(ids)
	cfg := electiontest.Config()
	cfg.DetectionStagger = 30 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	follower := func(i int, peers []wire.Member) election.Machine {
		c := cfg
		c.ID, c.Addr, c.Peers = ids[i], fmt.Sprintf("n%d", i), peers
		m, err := NewElector(c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Step(time.Second, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: leader})
		if l, _ := m.Leader(); m.Status() != election.StatusNormal || l != leader {
			t.Fatalf("n%d did not follow the leader: %s", i, m.Status())
		}
		return m
	}
	for i, want := range []time.Duration{100, 100, 100, 90, 60, 30, 0} { // ms past FailureTimeout
		m := follower(i, peers)
		if got := m.NextDeadline() - time.Second - cfg.FailureTimeout; got != want*time.Millisecond {
			t.Errorf("n%d (rank %d): stagger %v, want %v", i, 6-i, got, want*time.Millisecond)
		}
		m.Step(time.Second+10*time.Millisecond, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: leader})
		if got := m.NextDeadline() - time.Second - 10*time.Millisecond - cfg.FailureTimeout; got != want*time.Millisecond {
			t.Errorf("n%d after a heartbeat: stagger %v, want %v", i, got, want*time.Millisecond)
		}
	}

	// n4 starts without n5 and n6: rank 0 until they join, rank 2 after.
	m := follower(4, append(slices.Clone(peers[:5]), peers[7]))
	if got := m.NextDeadline() - time.Second; got != cfg.FailureTimeout {
		t.Errorf("n4 with nobody in between: deadline +%v, want +%v", got, cfg.FailureTimeout)
	}
	for _, p := range peers[5:7] {
		m.Step(time.Second+time.Millisecond, &wire.Message{Type: wire.TypeJoin, From: p.ID, Payload: wire.AppendAddr(nil, p.Addr)})
	}
	if got := m.NextDeadline() - time.Second; got != cfg.FailureTimeout+60*time.Millisecond {
		t.Errorf("n4 after two joined above it: deadline +%v, want +%v", got, cfg.FailureTimeout+60*time.Millisecond)
	}
	m.Step(time.Second+2*time.Millisecond, &wire.Message{Type: wire.TypeLeave, From: ids[6]})
	if got := m.NextDeadline() - time.Second; got != cfg.FailureTimeout+30*time.Millisecond {
		t.Errorf("n4 after one left: deadline +%v, want +%v", got, cfg.FailureTimeout+30*time.Millisecond)
	}

	// Halted by n6, n2 (three members in between) waits three steps longer.
	m = follower(2, peers)
	m.Step(2*time.Second, &wire.Message{Type: wire.TypeHalt, Epoch: 2, From: ids[6]})
	if m.Status() != election.StatusWaiting {
		t.Fatalf("n2 after HALT: %s", m.Status())
	}
	if got, want := m.NextDeadline()-2*time.Second, WaitFactor*cfg.ElectionTimeout+90*time.Millisecond; got != want {
		t.Errorf("n2 halted by n6: waits %v, want %v", got, want)
	}

	cfg.DetectionStagger = 0
	if got := follower(0, peers).NextDeadline() - time.Second; got != cfg.FailureTimeout {
		t.Errorf("stagger 0: deadline +%v, want +%v", got, cfg.FailureTimeout)
	}
}

// A HALT refused by a peer whose process is not running counts the peer as
// failed at once; only a HALT of the current proposal does.
func TestRefusedHalt(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(5, 6)), 4)
	peers := electiontest.Members(ids)
	top := func(t *testing.T) (election.Machine, uint64) {
		c := electiontest.Config()
		c.ID, c.Addr, c.Peers = ids[3], "n3", peers
		m, err := NewElector(c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The highest node's boot election has nobody to ask: it halts
		// the three below it at once.
		m.Tick(0)
		out := m.Drain()
		var halts int
		var epoch uint64
		for _, e := range out.Messages {
			if e.Msg.Type == wire.TypeHalt {
				halts++
				epoch = e.Msg.Epoch
			}
		}
		if m.Status() != election.StatusHalting || halts != 3 {
			t.Fatalf("boot: %s with %d HALTs, want halting with 3", m.Status(), halts)
		}
		return m, epoch
	}
	at := time.Millisecond

	t.Run("all refused", func(t *testing.T) {
		m, e := top(t)
		for i := range 3 {
			if m.IsLeader() {
				t.Fatalf("leader after %d of 3 refusals", i)
			}
			m.Refused(at, ids[i], wire.TypeHalt, e)
		}
		if !m.IsLeader() || m.Status() != election.StatusNormal {
			t.Fatalf("after every HALT was refused: %s, leader %v; want the leader", m.Status(), m.IsLeader())
		}
	})
	t.Run("refused and acknowledged", func(t *testing.T) {
		m, e := top(t)
		m.Refused(at, ids[0], wire.TypeHalt, e)
		m.Refused(at, ids[1], wire.TypeHalt, e)
		m.Step(at, &wire.Message{Type: wire.TypeHaltAck, Epoch: e, From: ids[2]})
		if !m.IsLeader() {
			t.Fatalf("%s after two refusals and an ack, want the leader", m.Status())
		}
	})
	t.Run("ignored", func(t *testing.T) {
		m, e := top(t)
		m.Refused(at, ids[0], wire.TypeHalt, e-1)   // an older round
		m.Refused(at, ids[1], wire.TypeElection, e) // not a HALT
		m.Refused(at, ids[3], wire.TypeHalt, e)     // not pending: itself
		m.Step(at, &wire.Message{Type: wire.TypeHaltAck, Epoch: e, From: ids[2]})
		if m.IsLeader() || m.Status() != election.StatusHalting {
			t.Fatalf("%s, leader %v: a refusal that was not of this round's HALT counted", m.Status(), m.IsLeader())
		}
	})
}

// A leader that hears a HEARTBEAT from a higher node takes it as that
// node's COORDINATOR: it follows a claim at an epoch not below its own and
// rejects an older one, naming its ballot, so that the higher node elects
// again. Either way two leaders end when the higher one's frame arrives,
// not only when the lower one's HEARTBEAT gets through to it.
func TestLowerLeaderHearsHigherHeartbeat(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(8, 9)), 3)
	peers := electiontest.Members(ids)
	// lead makes ids[1] the leader of epoch restored+1: nobody above
	// answers its ELECTION and the node below refuses its HALT.
	lead := func(t *testing.T, restored uint64) election.Machine {
		c := electiontest.Config()
		c.ID, c.Addr, c.Peers = ids[1], "n1", peers
		var st *election.State
		if restored > 0 {
			st = &election.State{Epoch: restored, Promise: election.Ballot{Epoch: restored, ID: ids[1]}, Leader: ids[1], LeaderEpoch: restored}
		}
		m, err := NewElector(c, st, 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Tick(0)
		m.Tick(c.ElectionTimeout)
		m.Refused(c.ElectionTimeout, ids[0], wire.TypeHalt, restored+1)
		if _, e := m.Leader(); !m.IsLeader() || e != restored+1 {
			t.Fatalf("%s, leader %v of epoch %d; want the leader of epoch %d", m.Status(), m.IsLeader(), e, restored+1)
		}
		m.Drain()
		return m
	}
	at := time.Second

	t.Run("newer or equal epoch", func(t *testing.T) {
		m := lead(t, 0)
		m.Step(at, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: ids[2]})
		if l, e := m.Leader(); m.Status() != election.StatusNormal || l != ids[2] || e != 1 {
			t.Fatalf("%s following %s at epoch %d, want normal following the higher leader at 1", m.Status(), l, e)
		}
		if out := m.Drain(); len(out.Messages) != 0 {
			t.Errorf("sent %v, want nothing", out.Messages)
		}
	})
	t.Run("older epoch", func(t *testing.T) {
		m := lead(t, 4)
		m.Step(at, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 2, From: ids[2]})
		if !m.IsLeader() {
			t.Fatalf("%s, want still the leader of epoch 5", m.Status())
		}
		out := m.Drain()
		if len(out.Messages) != 1 {
			t.Fatalf("sent %d messages, want one REJECT", len(out.Messages))
		}
		env := out.Messages[0]
		id, err := wire.DecodeID(env.Msg.Payload)
		if env.To != ids[2] || env.Msg.Type != wire.TypeReject || env.Msg.Epoch != 5 || err != nil || id != ids[1] {
			t.Errorf("sent %s epoch %d naming %s to %s, want REJECT epoch 5 naming itself to the higher node", env.Msg.Type, env.Msg.Epoch, id, env.To)
		}
	})
}

func TestRestoredEpochBeyondMaxEpoch(t *testing.T) {
	cfg := electiontest.Config()
	cfg.ID = uuid.New()
	_, err := NewElector(cfg, &election.State{Epoch: math.MaxUint64}, 0)
	if err == nil {
		t.Fatal("NewElector took a restored epoch of 2^64-1")
	}
}

// TestRefusesRingFrames: a Bully node ignores the ring's frames and says
// so, since a cluster does not mix algorithms.
func TestRefusesRingFrames(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(7, 8)), 3)
	cfg := electiontest.Config()
	cfg.ID, cfg.Addr = ids[0], "n0"
	cfg.Peers = electiontest.Members(ids)
	m, err := NewElector(cfg, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Drain()
	before := m.State()
	for _, msg := range []wire.Message{
		{Type: wire.TypeRingElection, Epoch: 5, From: ids[2], Payload: wire.AppendRingElection(nil, ids[2], ids[2])},
		{Type: wire.TypeElected, Epoch: 5, From: ids[2], Payload: wire.AppendID(nil, ids[2])},
	} {
		m.Step(time.Millisecond, &msg)
		o := m.Drain()
		want := msg.Type.String() + " from " + ids[2].String() + ": this node runs bully"
		if len(o.Messages) != 0 || len(o.Events) != 1 || o.Events[0].Cause != election.CauseAlgorithm || o.Events[0].Detail != want {
			t.Errorf("%s: messages %v, events %+v; want one refusal %q", msg.Type, o.Messages, o.Events, want)
		}
	}
	if after := m.State(); after.Epoch != before.Epoch || after.Promise != before.Promise {
		t.Errorf("state moved: %+v -> %+v", before, after)
	}
}

// PeerCrashed of a Normal follower's leader brings its failure deadline
// forward: at once for the highest survivor, ElectionTimeout and the
// stagger of its rank later for the others,
// and the election it then starts leaves the leader out and says
// leader-crashed; of anyone else, or once the leader was heard from
// since, it changes nothing.
func TestPeerCrashed(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(9, 10)), 8)
	leader := ids[7]
	peers := electiontest.Members(ids)
	cfg := electiontest.Config()
	cfg.DetectionStagger = 30 * time.Millisecond
	cfg.ElectionTimeout = 100 * time.Millisecond
	const at = time.Second + 5*time.Millisecond
	follower := func(i int) *Elector {
		c := cfg
		c.ID, c.Addr, c.Peers = ids[i], fmt.Sprintf("n%d", i), peers
		m, err := NewElector(c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		m.Step(time.Second, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: leader})
		m.Drain()
		return m
	}
	started := func(t *testing.T, m *Elector) {
		t.Helper()
		out := m.Drain()
		var reasons []wire.Reason
		for _, e := range out.Events {
			if e.Kind == election.EventElectionStarted {
				reasons = append(reasons, e.Reason)
			}
		}
		if !slices.Equal(reasons, []wire.Reason{wire.ReasonLeaderCrashed}) {
			t.Fatalf("elections started for %v, want one for leader-crashed", reasons)
		}
		if len(out.Messages) == 0 {
			t.Fatal("the election sent nothing")
		}
		for _, e := range out.Messages {
			if e.To == leader {
				t.Errorf("%s sent to the crashed leader", e.Msg.Type)
			}
			if e.Msg.Reason() != wire.ReasonLeaderCrashed {
				t.Errorf("%s carries reason %s, want leader-crashed", e.Msg.Type, e.Msg.Reason())
			}
		}
	}

	t.Run("highest survivor at once", func(t *testing.T) {
		m := follower(6)
		m.PeerCrashed(at, leader)
		if got := m.NextDeadline(); got != at {
			t.Fatalf("deadline %v, want %v (rank 0: no stagger)", got, at)
		}
		m.Tick(at)
		if m.Status() != election.StatusHalting {
			t.Fatalf("status %s, want halting: nobody above but the crashed leader", m.Status())
		}
		started(t, m)
	})
	t.Run("lower follower after the highest's HALT round", func(t *testing.T) {
		m := follower(4) // rank 2 below the leader
		m.PeerCrashed(at, leader)
		m.PeerCrashed(at+20*time.Millisecond, leader) // a second report does not move it
		due := at + cfg.ElectionTimeout + 60*time.Millisecond
		if got := m.NextDeadline(); got != due {
			t.Fatalf("deadline %v, want %v", got, due)
		}
		m.Tick(due - time.Millisecond)
		if m.Status() != election.StatusNormal {
			t.Fatalf("elected before ElectionTimeout and its stagger: %s", m.Status())
		}
		m.Tick(due)
		if m.Status() != election.StatusElecting {
			t.Fatalf("status %s, want electing", m.Status())
		}
		started(t, m)
	})
	t.Run("ignored", func(t *testing.T) {
		m := follower(4)
		want := m.NextDeadline()
		m.PeerCrashed(at, ids[5])
		m.PeerCrashed(at, uuid.Nil)
		if got := m.NextDeadline(); got != want {
			t.Errorf("a non-leader's crash moved the deadline: %v, want %v", got, want)
		}
		m.PeerCrashed(at, leader)
		m.Step(at+time.Millisecond, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: leader})
		if got, want := m.NextDeadline(), at+time.Millisecond+cfg.FailureTimeout+60*time.Millisecond; got != want {
			t.Errorf("after a heartbeat that followed the evidence: deadline %v, want %v", got, want)
		}
		m.Tick(m.NextDeadline())
		if out := m.Drain(); len(out.Events) == 0 || out.Messages[0].Msg.Reason() != wire.ReasonLeaderFailed {
			t.Errorf("the failure timeout's election: %+v, want reason leader-failed", out.Messages)
		}

		top := follower(7) // the leader itself, once elected
		top.Tick(time.Second + cfg.ElectionTimeout)
		top.Tick(time.Second + 2*cfg.ElectionTimeout)
		if !top.IsLeader() {
			t.Fatalf("n7 did not win: %s", top.Status())
		}
		top.Drain()
		before := top.NextDeadline()
		top.PeerCrashed(2*time.Second, ids[6])
		top.PeerCrashed(2*time.Second, ids[7])
		if top.NextDeadline() != before || !top.IsLeader() {
			t.Error("a leader acted on PeerCrashed")
		}
	})
}

// An election asks the members above in waves, highest first: 1, 2, 4, ...
// members a DetectionStagger apart, then waits ElectionTimeout after the
// last. An ANSWER ends the waves; a wave refused by every member asked so
// far brings the next one forward; with no stagger all go at once.
func TestAskWaves(t *testing.T) {
	ids := electiontest.SortedIDs(rand.New(rand.NewPCG(13, 14)), 8)
	peers := electiontest.Members(ids)
	cfg := electiontest.Config()
	cfg.ID, cfg.Addr, cfg.Peers = ids[0], "n0", peers
	boot := func(t *testing.T, c election.Config) *Elector {
		m, err := NewElector(c, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	asked := func(m *Elector) []uuid.UUID {
		var to []uuid.UUID
		for _, e := range m.Drain().Messages {
			if e.Msg.Type != wire.TypeElection {
				t.Fatalf("sent %s, want only ELECTIONs", e.Msg.Type)
			}
			to = append(to, e.To)
		}
		return to
	}
	step := cfg.DetectionStagger
	// ids[7] first, then ids[6..5], then ids[4..1]: highest first.
	waves := [][]uuid.UUID{{ids[7]}, {ids[6], ids[5]}, {ids[4], ids[3], ids[2], ids[1]}}

	t.Run("unanswered", func(t *testing.T) {
		m := boot(t, cfg)
		for i, want := range waves {
			at := time.Duration(i) * step
			if i > 0 {
				m.Tick(at - 1)
				if got := asked(m); len(got) != 0 {
					t.Fatalf("before wave %d: asked %v", i+1, got)
				}
				m.Tick(at)
			}
			if got := asked(m); !slices.Equal(got, want) {
				t.Fatalf("wave %d: asked %v, want %v", i+1, got, want)
			}
		}
		last := time.Duration(len(waves)-1) * step
		if got := m.NextDeadline(); got != last+cfg.ElectionTimeout {
			t.Fatalf("after the last wave: deadline %v, want %v", got, last+cfg.ElectionTimeout)
		}
		if got := election.AskSpread(7, step); got != last {
			t.Fatalf("AskSpread(7) = %v, the last wave went at %v", got, last)
		}
		m.Tick(last + cfg.ElectionTimeout)
		if !m.IsLeader() {
			t.Fatalf("nobody answered: %s, want the leader (nobody below to halt)", m.Status())
		}
	})
	t.Run("answered", func(t *testing.T) {
		m := boot(t, cfg)
		asked(m)
		m.Tick(step)
		asked(m)
		m.Step(step+time.Millisecond, &wire.Message{Type: wire.TypeAnswer, From: ids[5]})
		if m.Status() != election.StatusWaiting {
			t.Fatalf("answered: %s, want waiting", m.Status())
		}
		// ids[5] may still be asking the two above it (a wave of 1, then
		// 1): one step more than WaitFactor x ElectionTimeout, and its
		// stagger (4 members between).
		want := step + time.Millisecond + WaitFactor*cfg.ElectionTimeout + step + StaggerDelay(4, step, cfg.ElectionTimeout)
		if got := m.NextDeadline(); got != want {
			t.Fatalf("waiting: deadline %v, want %v", got, want)
		}
		m.Tick(2 * step)
		if got := asked(m); len(got) != 0 {
			t.Fatalf("answered, then asked %v", got)
		}
	})
	t.Run("refused", func(t *testing.T) {
		m := boot(t, cfg)
		asked(m)
		m.Refused(time.Millisecond, ids[7], wire.TypeElection, 0)
		if got := asked(m); !slices.Equal(got, waves[1]) {
			t.Fatalf("the first wave refused: asked %v, want %v at once", got, waves[1])
		}
		m.Refused(2*time.Millisecond, ids[6], wire.TypeElection, 0)
		m.Refused(2*time.Millisecond, ids[1], wire.TypeElection, 0) // not asked yet
		if got := asked(m); len(got) != 0 {
			t.Fatalf("one of the second wave refused, %v still unheard: asked %v", ids[5], got)
		}
		m.Refused(3*time.Millisecond, ids[5], wire.TypeElection, 0)
		if got := asked(m); !slices.Equal(got, waves[2]) {
			t.Fatalf("the second wave refused: asked %v, want %v at once", got, waves[2])
		}
		if got := m.NextDeadline(); got != 3*time.Millisecond+cfg.ElectionTimeout {
			t.Fatalf("after the last wave: deadline %v, want ElectionTimeout later", got)
		}
	})
	t.Run("leader silent", func(t *testing.T) {
		// ids[7] leads and falls silent: the waves ask from both ends in
		// turn, the first the highest survivor and the nearest member
		// above, ids[1], which is electing too if the cut took the top.
		m := boot(t, cfg)
		asked(m)
		m.Step(time.Millisecond, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: ids[7]})
		detect := m.NextDeadline()
		m.Tick(detect)
		silent := [][]uuid.UUID{{ids[6], ids[1]}, {ids[5], ids[2], ids[4]}, {ids[3]}}
		for i, want := range silent {
			if i > 0 {
				m.Tick(detect + time.Duration(i)*step)
			}
			if got := asked(m); !slices.Equal(got, want) {
				t.Fatalf("wave %d: asked %v, want %v", i+1, got, want)
			}
		}
		if spread := election.AskSpread(6, step); spread < 2*step {
			t.Fatalf("AskSpread(6) = %v, the last wave went %v after the first", spread, 2*step)
		}
		m.Step(detect+2*step+time.Millisecond, &wire.Message{Type: wire.TypeAnswer, From: ids[1]})
		if m.Status() != election.StatusWaiting {
			t.Fatalf("answered by the nearest: %s, want waiting", m.Status())
		}
	})
	t.Run("bullied, leader silent", func(t *testing.T) {
		// ids[3] follows ids[7], has missed its heartbeats, and is asked
		// by ids[0]: it answers and asks as on a silent leader. Heard
		// from lately, the leader would be asked first, alone.
		c := cfg
		c.ID, c.Addr = ids[3], "n3"
		m := boot(t, c)
		asked(m)
		m.Step(time.Millisecond, &wire.Message{Type: wire.TypeCoordinator, Epoch: 1, From: ids[7]})
		at := time.Millisecond + 2*c.HeartbeatInterval + 1
		m.Step(at, &wire.Message{Type: wire.TypeElection, Epoch: 1, From: ids[0]})
		var got []uuid.UUID
		for _, e := range m.Drain().Messages {
			if e.Msg.Type == wire.TypeElection {
				got = append(got, e.To)
			}
		}
		if want := []uuid.UUID{ids[6], ids[4]}; !slices.Equal(got, want) {
			t.Fatalf("bullied: asked %v, want %v", got, want)
		}
	})
	t.Run("no stagger", func(t *testing.T) {
		c := cfg
		c.DetectionStagger = 0
		m := boot(t, c)
		if got := asked(m); len(got) != 7 {
			t.Fatalf("stagger 0: asked %d at once, want all 7", len(got))
		}
	})
}
