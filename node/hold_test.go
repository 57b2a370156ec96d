package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// TestReleaseHeldBoot: nodes started held send nothing; released, the
// highest of them elects and halts the other, whose release then sends
// nothing, as it follows a leader already.
func TestReleaseHeldBoot(t *testing.T) {
	nw := NewInmemNetwork()
	var peers []wire.Member
	for i := range 3 {
		peers = append(peers, wire.Member{ID: uuid.New(), Addr: fmt.Sprintf("inmem-%d", i)})
	}
	// The highest of the three never starts: the other two elect alone.
	slices.SortFunc(peers, func(a, b wire.Member) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	start := func(i int) (*Node, *InmemTransport) {
		cfg := fastConfig()
		cfg.ID, cfg.Addr, cfg.Peers, cfg.HoldBoot = peers[i].ID, peers[i].Addr, peers, true
		tr := nw.NewTransport(cfg.ID, cfg.Addr)
		n, err := New(Options{Config: cfg, Transport: tr, Store: &memStore{}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go n.Run(ctx)
		t.Cleanup(func() { cancel(); <-n.Done(); tr.Close() })
		return n, tr
	}
	low, lowTr := start(0)
	high, highTr := start(1)
	sent := func(tr *InmemTransport) (all uint64) {
		for _, ty := range wire.Types {
			all += tr.Counters().Sent(ty)
		}
		return all
	}
	ctx := t.Context()
	// barrier returns once n's Run loop has handled what came before.
	barrier := func(n *Node) {
		if err := n.do(ctx, func() {}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []*Node{low, high} {
		barrier(n)
		if s := n.Status(); s.Status != "held" {
			t.Fatalf("%s: status %q, want held", n.ID(), s.Status)
		}
	}
	if a, b := sent(lowTr), sent(highTr); a+b != 0 {
		t.Fatalf("held nodes sent %d and %d frames", a, b)
	}
	if err := high.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitAgree(t, []*testNode{{Node: low, id: low.ID()}, {Node: high, id: high.ID()}}, high.ID(), 0)
	before := sent(lowTr)
	if err := low.Release(ctx); err != nil {
		t.Fatal(err)
	}
	barrier(low) // Release's Output was flushed
	if s := low.Status(); s.Status != election.StatusNormal.String() || s.Leader != high.ID() || s.ElectionsStarted != 0 {
		t.Fatalf("released follower: %+v, want normal under %s with no election", s, high.ID())
	}
	if got := sent(lowTr); got != before {
		t.Fatalf("a follower's release sent %d frames", got-before)
	}
}
