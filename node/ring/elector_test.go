package ring

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/node/election/electiontest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// ringOf is four members n0 < n1 < n2 < n3, with the Elector of one.
type ringOf struct {
	t   *testing.T
	ids []uuid.UUID
	cfg election.Config
	m   *Elector
	now time.Duration
}

func newRing(t *testing.T, self int, restored *election.State) *ringOf {
	t.Helper()
	r := &ringOf{t: t, ids: electiontest.SortedIDs(rand.New(rand.NewPCG(5, 6)), 4), cfg: electiontest.Config()}
	r.cfg.Peers = electiontest.Members(r.ids)
	r.cfg.ID, r.cfg.Addr = r.ids[self], fmt.Sprintf("n%d", self)
	m, err := NewElector(r.cfg, restored, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	return r
}

func (r *ringOf) name(id uuid.UUID) string {
	for i, x := range r.ids {
		if x == id {
			return fmt.Sprintf("n%d", i)
		}
	}
	return id.String()[:8]
}

// out drains the Elector and spells its messages and refusals, one per
// line: "RING_ELECTION e5 n1 n3 -> n2", "ELECTED e5 n3 -> n2",
// "refused n0 malformed".
func (r *ringOf) out() string {
	var lines []string
	o := r.m.Drain()
	for _, env := range o.Messages {
		line := fmt.Sprintf("%s e%d", env.Msg.Type, env.Msg.Epoch)
		switch env.Msg.Type {
		case wire.TypeRingElection:
			i, c, _ := wire.DecodeRingElection(env.Msg.Payload)
			line += " " + r.name(i) + " " + r.name(c)
		case wire.TypeElected:
			l, _ := wire.DecodeID(env.Msg.Payload)
			line += " " + r.name(l)
		}
		lines = append(lines, line+" -> "+r.name(env.To))
	}
	for _, e := range o.Events {
		if e.Kind == election.EventRefused {
			lines = append(lines, fmt.Sprintf("refused %s cause %d: %s", r.name(e.Peer.ID), e.Cause, e.Detail))
		}
	}
	return strings.Join(lines, "\n")
}

func (r *ringOf) run(from int, epoch uint64, initiator, candidate int) {
	r.now += time.Millisecond
	r.m.Step(r.now, &wire.Message{Type: wire.TypeRingElection, Epoch: epoch, From: r.ids[from],
		Payload: wire.AppendRingElection(nil, r.ids[initiator], r.ids[candidate])})
}

func (r *ringOf) elected(from int, epoch uint64, leader int) {
	r.now += time.Millisecond
	r.m.Step(r.now, &wire.Message{Type: wire.TypeElected, Epoch: epoch, From: r.ids[from], Payload: wire.AppendID(nil, r.ids[leader])})
}

func (r *ringOf) expect(want string) {
	r.t.Helper()
	if got := r.out(); got != want {
		r.t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func (r *ringOf) expectPrefix(want string) {
	r.t.Helper()
	if got := r.out(); !strings.HasPrefix(got, want) {
		r.t.Fatalf("got\n%s\nwant it to begin\n%s", got, want)
	}
}

// TestRingRules walks n1 of a four-node ring through the rules of the
// package doc, one received frame at a time.
func TestRingRules(t *testing.T) {
	r := newRing(t, 1, nil)
	r.expect("RING_ELECTION e1 n1 n1 -> n2") // boot: a run of its own
	if r.m.Status() != election.StatusElecting {
		t.Fatalf("status %s after boot", r.m.Status())
	}

	r.run(0, 1, 0, 0) // a lower run of the same epoch dies here
	r.expect("")
	r.run(0, 1, 3, 3) // a higher initiator: forwarded unchanged
	r.expect("RING_ELECTION e1 n3 n3 -> n2")
	r.run(0, 1, 3, 3) // its second pass
	r.expect("RING_ELECTION e1 n3 n3 -> n2")
	r.elected(0, 1, 3)
	r.expect("ELECTED e1 n3 -> n2")
	if l, e := r.m.Leader(); r.m.Status() != election.StatusNormal || l != r.ids[3] || e != 1 {
		t.Fatalf("after ELECTED: %s, leader %s epoch %d", r.m.Status(), r.name(l), e)
	}
	r.elected(0, 1, 3) // a copy: not forwarded again
	r.expect("")

	r.run(0, 1, 0, 0) // a stale run: its initiator is told the leader
	r.expect("ELECTED e1 n3 -> n0")

	r.run(0, 2, 0, 0) // a newer run: n1 stands as candidate, leaves Normal
	r.expect("RING_ELECTION e2 n0 n1 -> n2")
	if r.m.Status() != election.StatusElecting {
		t.Fatalf("status %s after forwarding a run", r.m.Status())
	}
	r.m.Refused(r.now, r.ids[2], wire.TypeRingElection, 2) // n2 is down: passed on to n3
	r.expect("RING_ELECTION e2 n0 n1 -> n3")
	r.m.Refused(r.now, r.ids[3], wire.TypeRingElection, 2)
	r.expect("RING_ELECTION e2 n0 n1 -> n0")
	r.run(0, 2, 0, 1) // its own candidacy came back: it wins
	r.expect("ELECTED e2 n1 -> n2")
	if !r.m.IsLeader() {
		t.Fatal("n1 does not lead after its candidacy came back")
	}
	r.m.Refused(r.now, r.ids[2], wire.TypeElected, 2)
	r.expect("ELECTED e2 n1 -> n3")

	r.m.Tick(r.now + r.cfg.HeartbeatInterval)
	r.expect("HEARTBEAT e2 -> n0\nHEARTBEAT e2 -> n2\nHEARTBEAT e2 -> n3")
	r.now += r.cfg.HeartbeatInterval
	r.elected(0, 2, 0) // a lower leader: n1 starts a run it will win
	r.expect("RING_ELECTION e3 n1 n1 -> n2")
}

// TestRingCandidateDown: the node that finds the run's candidate down
// stands in for it, and a candidate it does not know counts as down.
func TestRingCandidateDown(t *testing.T) {
	r := newRing(t, 1, nil)
	r.out()
	r.run(0, 5, 0, 3)
	r.expect("RING_ELECTION e5 n0 n3 -> n2")
	r.m.Refused(r.now, r.ids[2], wire.TypeRingElection, 5) // n2 is down; n3 still the candidate
	r.expect("RING_ELECTION e5 n0 n3 -> n3")
	r.m.Refused(r.now, r.ids[3], wire.TypeRingElection, 5) // the candidate is down: n1 stands in
	r.expect("RING_ELECTION e5 n0 n1 -> n0")

	stranger := uuid.New()
	r.now += time.Millisecond
	r.m.Step(r.now, &wire.Message{Type: wire.TypeRingElection, Epoch: 6, From: r.ids[0], Payload: wire.AppendRingElection(nil, r.ids[0], stranger)})
	r.expect("RING_ELECTION e6 n0 n1 -> n2")
}

// TestRingSkipsSuspectedLeader: a follower whose detector fires leaves the
// leader out of its run and its ELECTED.
func TestRingSkipsSuspectedLeader(t *testing.T) {
	r := newRing(t, 2, nil)
	r.out()
	r.elected(1, 1, 3)
	r.expect("ELECTED e1 n3 -> n3")
	r.m.Tick(r.m.NextDeadline())
	r.expect("RING_ELECTION e2 n2 n2 -> n0")
	r.run(1, 2, 2, 2)
	r.expect("ELECTED e2 n2 -> n0")
}

// TestRingLoopGuard: a run that keeps coming back without anyone winning
// it is forwarded at most maxForwards times.
func TestRingLoopGuard(t *testing.T) {
	r := newRing(t, 1, nil)
	r.out()
	forwards := 0
	for range 3 * maxForwards {
		r.run(0, 7, 0, 3)
		if r.out() != "" {
			forwards++
		}
	}
	if forwards != maxForwards {
		t.Fatalf("forwarded %d times, want %d", forwards, maxForwards)
	}
}

// TestRingRunTimeout: a node that forwarded a run and heard nothing more
// within RunTimeout starts a newer run of its own.
func TestRingRunTimeout(t *testing.T) {
	r := newRing(t, 1, nil)
	r.out()
	r.run(0, 4, 0, 0)
	r.expect("RING_ELECTION e4 n0 n1 -> n2")
	if want := r.now + RunTimeout(4, r.cfg.ElectionTimeout); r.m.NextDeadline() != want {
		t.Fatalf("deadline %v, want %v", r.m.NextDeadline(), want)
	}
	r.m.Tick(r.m.NextDeadline())
	r.expect("RING_ELECTION e5 n1 n1 -> n2")
}

// TestRingRestartKeepsPromise: a restarted node never forwards a run below
// the one it promised before.
func TestRingRestartKeepsPromise(t *testing.T) {
	r := newRing(t, 1, nil)
	r.out()
	r.run(0, 9, 2, 2)
	r.expect("RING_ELECTION e9 n2 n2 -> n2")
	st := r.m.State()
	if st.Promise != (election.Ballot{Epoch: 9, ID: r.ids[2]}) {
		t.Fatalf("persisted promise %+v", st.Promise)
	}
	r2 := newRing(t, 1, &st)
	r2.expect("RING_ELECTION e10 n1 n1 -> n2")
	r2.run(0, 9, 3, 3)
	r2.expect("")
}

// TestRingRefusesBadFrames: Bully's frames, malformed payloads and frames
// naming nobody are ignored and reported, and change nothing.
func TestRingRefusesBadFrames(t *testing.T) {
	r := newRing(t, 1, nil)
	r.out()
	before := r.m.State()
	for _, tc := range []struct {
		msg   wire.Message
		cause election.RefusalCause
		says  string
	}{
		{wire.Message{Type: wire.TypeHalt, Epoch: 9}, election.CauseAlgorithm, "HALT from"},
		{wire.Message{Type: wire.TypeCoordinator, Epoch: 9}, election.CauseAlgorithm, "this node runs ring"},
		{wire.Message{Type: wire.TypeRingElection, Epoch: 9, Payload: make([]byte, 31)}, election.CauseMalformed, "RING_ELECTION"},
		{wire.Message{Type: wire.TypeRingElection, Epoch: 9, Payload: make([]byte, 32)}, election.CauseMalformed, "nil UUID"},
		{wire.Message{Type: wire.TypeElected, Epoch: 9, Payload: []byte{1}}, election.CauseMalformed, "ELECTED"},
		{wire.Message{Type: wire.TypeElected, Epoch: election.EpochWindow + 9, Payload: wire.AppendID(nil, r.ids[3])}, election.CauseEpochWindow, "window"},
	} {
		r.m.Bootstrapping = false
		tc.msg.From = r.ids[3]
		r.m.Step(r.now, &tc.msg)
		o := r.m.Drain()
		if len(o.Messages) != 0 || len(o.Events) != 1 || o.Events[0].Cause != tc.cause || !strings.Contains(o.Events[0].Detail, tc.says) {
			t.Errorf("%s: messages %v, events %+v; want one refusal of cause %d saying %q", tc.msg.Type, o.Messages, o.Events, tc.cause, tc.says)
		}
	}
	if after := r.m.State(); after.Epoch != before.Epoch || after.Promise != before.Promise || after.Leader != before.Leader {
		t.Errorf("state moved: %+v -> %+v", before, after)
	}
}

// PeerCrashed of a follower's leader starts its run after the stagger of
// its rank, with the leader left out of the ring and reason
// leader-crashed; of another member it changes nothing.
func TestPeerCrashed(t *testing.T) {
	r := newRing(t, 2, nil)
	r.out()
	r.elected(1, 1, 3)
	r.out()
	if l, _ := r.m.Leader(); r.m.Status() != election.StatusNormal || l != r.ids[3] {
		t.Fatalf("n2 does not follow n3: %s", r.m.Status())
	}
	before := r.m.NextDeadline()
	r.m.PeerCrashed(r.now, r.ids[1])
	if r.m.NextDeadline() != before {
		t.Fatal("a non-leader's crash moved the deadline")
	}
	r.m.PeerCrashed(r.now, r.ids[3])
	if got := r.m.NextDeadline(); got != r.now {
		t.Fatalf("deadline %v, want %v: n2 is the highest below n3", got, r.now)
	}
	r.m.Tick(r.now)
	out := r.m.Drain()
	if len(out.Messages) != 1 || out.Messages[0].To != r.ids[0] || out.Messages[0].Msg.Reason() != wire.ReasonLeaderCrashed {
		t.Fatalf("sent %+v, want one RING_ELECTION to n0 (n3 left out) for leader-crashed", out.Messages)
	}
}
