package node

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// The ring on the runtime, over the in-memory transport: the highest node
// leads, the next leads once it stops, and it takes the lead back when it
// comes back with what it persisted.
func TestRingNodesConvergeAndFailOver(t *testing.T) {
	c := newTestClusterRunning(t, 5, AlgorithmRing)
	first := highest(c.nodes)
	epoch := waitAgree(t, c.nodes, first.id, 0)
	for _, n := range c.nodes {
		if s := n.Status(); s.Algorithm != AlgorithmRing {
			t.Fatalf("%s: status says algorithm %q, want %q", n.id, s.Algorithm, AlgorithmRing)
		}
	}

	failOverAndBack(t, c, first, epoch)
	for _, n := range c.nodes {
		if s := n.Status(); s.Counters.Sent[wire.TypeRingElection.String()]+s.Counters.Sent[wire.TypeElected.String()] == 0 {
			t.Errorf("%s sent no ring frames: %v", n.id, s.Counters.Sent)
		}
	}
}

// The ring over loopback TCP with cluster keys: it elects the highest node
// and says so in its log, re-elects when the leader is killed or paused,
// and the leader takes over again when it comes back.
func TestRingRunning(t *testing.T) {
	nodes := startHostedWith(t, 4, false, AlgorithmRing)
	top := nodes[3]
	waitAgreed(t, nodes, top)
	for _, rec := range top.log.records(t) {
		if rec.Event == "node_started" && rec.Algorithm != AlgorithmRing {
			t.Errorf("node_started says algorithm %q, want %q", rec.Algorithm, AlgorithmRing)
		}
	}
	if s := top.r.Node().Status(); s.Algorithm != AlgorithmRing {
		t.Errorf("status says algorithm %q", s.Algorithm)
	}

	top.r.Kill()
	waitAgreed(t, nodes[:3], nodes[2])
	top.start(t)
	waitAgreed(t, nodes, top)

	if err := top.r.Pause(); err != nil {
		t.Fatal(err)
	}
	waitAgreed(t, nodes[:3], nodes[2])
	if err := top.r.Resume(); err != nil {
		t.Fatal(err)
	}
	waitAgreed(t, nodes, top)
}

// A frame the transport drops while it backs off from a peer whose dial
// was refused is reported as unreachable, for the ring to pass it on; a
// HEARTBEAT, which no algorithm resends, is not.
func TestTCPReportsUnreachable(t *testing.T) {
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{BackoffMin: time.Minute, BackoffMax: time.Minute})
	peer := uuid.New()
	a.SetPeers([]wire.Member{{ID: peer, Addr: deadAddr(t)}})
	next := func() Refusal {
		t.Helper()
		select {
		case r := <-a.Refusals():
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no refusal reported")
		}
		return Refusal{}
	}
	a.Send(peer, &wire.Message{Type: wire.TypeRingElection, Epoch: 3, From: a.id, Payload: make([]byte, wire.RingElectionLen)})
	if r, want := next(), (Refusal{Peer: peer, Type: wire.TypeRingElection, Epoch: 3, Cause: RefusalRefused}); r != want {
		t.Fatalf("first refusal %+v, want %+v", r, want)
	}
	a.Send(peer, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 3, From: a.id})
	a.Send(peer, &wire.Message{Type: wire.TypeElected, Epoch: 4, From: a.id, Payload: make([]byte, wire.IDLen)})
	if r, want := next(), (Refusal{Peer: peer, Type: wire.TypeElected, Epoch: 4, Cause: RefusalUnreachable}); r != want {
		t.Fatalf("refusal during the backoff %+v, want %+v", r, want)
	}
}

func TestNewElectionByName(t *testing.T) {
	if got := Algorithms(); !slices.Equal(got, []string{"bully", "ring"}) {
		t.Errorf("Algorithms() = %v", got)
	}
	cfg := election.DefaultConfig()
	cfg.ID, cfg.Addr = uuid.New(), "a:1"
	for name, want := range map[string]string{"": "*bully.Elector", "bully": "*bully.Elector", "ring": "*ring.Elector"} {
		m, err := NewElection(name, cfg, nil, 0)
		if err != nil || fmt.Sprintf("%T", m) != want {
			t.Errorf("NewElection(%q) = %T, %v; want a %s", name, m, err, want)
		}
	}
	if _, err := NewElection("paxos", cfg, nil, 0); err == nil || !strings.Contains(err.Error(), `"paxos"`) {
		t.Errorf("NewElection(\"paxos\"): %v, want an error naming it", err)
	}
}
