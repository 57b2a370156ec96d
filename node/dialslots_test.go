package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
)

// A freed dial slot goes to the writer that has waited longest; a wait
// that runs out or whose context ends gets none and leaves the slots as
// they were.
func TestDialSlotsOldestFirst(t *testing.T) {
	s := newDialSlots(1)
	if got, err := s.acquire(context.Background(), 0); !got || err != nil {
		t.Fatalf("a free slot: got %v, %v", got, err)
	}
	waiting := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			s.mu.Lock()
			k := len(s.waiters)
			s.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiters, want %d", k, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	got := make(chan string, 2)
	for i, name := range []string{"older", "newer"} {
		go func() {
			if ok, err := s.acquire(context.Background(), time.Minute); ok && err == nil {
				got <- name
			}
		}()
		waiting(i + 1)
	}
	s.release()
	if name := <-got; name != "older" {
		t.Fatalf("the freed slot went to the %s waiter, want the older", name)
	}
	s.release()
	if name := <-got; name != "newer" {
		t.Fatalf("the next slot went to the %s waiter, want the newer", name)
	}

	if ok, err := s.acquire(context.Background(), 10*time.Millisecond); ok || err != nil {
		t.Fatalf("no slot within the wait: got %v, %v; want none and no error", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := s.acquire(ctx, time.Minute); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("context ended: got %v, %v; want none and its error", ok, err)
	}
	s.release()
	if ok, _ := s.acquire(context.Background(), 0); !ok {
		t.Fatal("the slot given back after the failed waits is not free")
	}
	if s.free != 0 || len(s.waiters) != 0 {
		t.Fatalf("%d free, %d waiting; want 0 and 0", s.free, len(s.waiters))
	}
}

// slotlessSender returns a transport that knows b, whose one dial slot is
// taken, and whose next dial to b finds connect(2) unsettled, as a dial
// across a loaded host may: it needs a slot. ttl is its FrameTTL (0: the
// default).
func slotlessSender(t *testing.T, b *TCPTransport, ttl time.Duration) *TCPTransport {
	t.Helper()
	a := listenTCPT(t, "127.0.0.1:0", TCPConfig{MaxDialing: 1, FrameTTL: ttl})
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	if got, _ := a.dialing.acquire(t.Context(), 0); !got {
		t.Fatal("the only slot is not free")
	}
	a.addPeer(b.id)
	a.mu.RLock()
	a.peers[b.id].slowDial = true
	a.mu.RUnlock()
	return a
}

// A dial to a peer heard from within DialTimeout takes no slot: with every
// slot held (by dials across a partition, say), the ANSWER to a peer whose
// ELECTION just arrived still goes out, while a frame to a peer not heard
// from waits for a slot and expires.
func TestTCPDialToHeardPeerTakesNoSlot(t *testing.T) {
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	send := func(heard bool) *TCPTransport {
		a := slotlessSender(t, b, 300*time.Millisecond)
		if heard {
			a.markAlive(b.id)
		}
		a.Send(b.id, &wire.Message{Type: wire.TypeAnswer, Epoch: 1, From: a.id})
		return a
	}
	send(true)
	if got := recvN(t, b, 1, 5*time.Second); got[0].Type != wire.TypeAnswer {
		t.Fatalf("b got %s, want the ANSWER", got[0].Type)
	}
	a := send(false)
	deadline := time.Now().Add(5 * time.Second)
	for a.Counters().DroppedFor(DropExpired) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the frame to a peer not heard from: %+v, want it dropped as expired (no slot)", a.Counters().Snapshot())
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case m := <-b.Recv():
		t.Fatalf("b got %s from a peer that had no slot to dial it", m.Type)
	default:
	}
}

// RetractElections drops the ELECTIONs queued before it, one that waits
// for a dial slot too, and nothing else: an ELECTION sent after it, and a
// frame of another type queued before it, still go out.
func TestTCPRetractElections(t *testing.T) {
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	a := slotlessSender(t, b, 0)
	a.Send(b.id, &wire.Message{Type: wire.TypeElection, Epoch: 1, From: a.id})
	a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: a.id})
	deadline := time.Now().Add(5 * time.Second)
	for {
		a.dialing.mu.Lock()
		waiting := len(a.dialing.waiters)
		a.dialing.mu.Unlock()
		if waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the ELECTION's writer is not waiting for a dial slot")
		}
		time.Sleep(time.Millisecond)
	}
	a.RetractElections()
	a.Send(b.id, &wire.Message{Type: wire.TypeElection, Epoch: 2, From: a.id})
	a.dialing.release()
	got := recvN(t, b, 2, 5*time.Second)
	if got[0].Type != wire.TypeHeartbeat || got[1].Type != wire.TypeElection || got[1].Epoch != 2 {
		t.Fatalf("b got %s e%d, %s e%d; want the HEARTBEAT and the ELECTION of epoch 2", got[0].Type, got[0].Epoch, got[1].Type, got[1].Epoch)
	}
	if n := a.Counters().DroppedFor(DropElectionEnded); n != 1 {
		t.Fatalf("%d frames dropped as election_ended, want 1", n)
	}
}
