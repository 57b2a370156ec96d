package node

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// countingListener counts the connections accepted through it.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// crashPair is a leader and a follower on loopback, each with a connection
// to the other: the leader's HEARTBEAT and the follower's HALT_ACK.
func crashPair(t *testing.T) (leader, follower *TCPTransport, ln *countingListener) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln = &countingListener{Listener: raw}
	leader = NewTCPTransport(ln, uuid.New(), TCPConfig{})
	t.Cleanup(func() { leader.Close() })
	follower = listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	members := []wire.Member{{ID: leader.id, Addr: leader.LocalAddr()}, {ID: follower.id, Addr: follower.LocalAddr()}}
	leader.SetPeers(members)
	follower.SetPeers(members)
	leader.Send(follower.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: leader.id})
	follower.Send(leader.id, &wire.Message{Type: wire.TypeHaltAck, Epoch: 1, From: follower.id})
	recvN(t, follower, 1, 5*time.Second)
	recvN(t, leader, 1, 5*time.Second)
	return leader, follower, ln
}

func waitPeerClosed(t *testing.T, tr *TCPTransport, want uuid.UUID) {
	t.Helper()
	select {
	case got := <-tr.PeerClosed():
		if got != want {
			t.Fatalf("PeerClosed reported %s, want %s", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no PeerClosed within 5s")
	}
}

// A peer whose listener and connections close, as a crashed process's
// host closes them, is reported and its probe refused.
func TestTCPCrashedPeerReportedAndRefused(t *testing.T) {
	leader, follower, _ := crashPair(t)
	leader.Close()
	waitPeerClosed(t, follower, leader.id)
	if got := follower.ProbePeer(t.Context(), leader.id, time.Second); got != ProbeRefused {
		t.Fatalf("probe of a closed listener: %s, want refused", got)
	}
}

// A live peer that closes one connection is reported, but its probe
// connects: no evidence. The probe, closed before its first byte, is no
// issue at the peer, and this node closing its own connections reports
// nothing.
func TestTCPLivePeerProbeConnects(t *testing.T) {
	leader, follower, ln := crashPair(t)
	leader.SetPeers(nil) // closes its connection to the follower
	waitPeerClosed(t, follower, leader.id)
	if got := follower.ProbePeer(t.Context(), leader.id, time.Second); got != ProbeConnected {
		t.Fatalf("probe of a live peer: %s, want connected", got)
	}
	// The probe's connection is the leader's second; wait until it read
	// its end and forgot it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		leader.inMu.Lock()
		open := len(leader.inbound)
		leader.inMu.Unlock()
		if ln.accepted.Load() == 2 && open == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leader: %d accepted, %d open; want the probe accepted and gone", ln.accepted.Load(), open)
		}
		time.Sleep(time.Millisecond)
	}
	for issue, n := range leader.Counters().Snapshot().PeerIssues {
		if n != 0 {
			t.Errorf("the probe counted as peer issue %s at the leader (%d)", issue, n)
		}
	}
	select {
	case id := <-leader.PeerClosed():
		t.Errorf("the leader reported %s although it closed the connection itself", id)
	default:
	}
}

// fakeProber answers probes from a script, then with last.
type fakeProber struct {
	script []ProbeResult
	last   ProbeResult
	probes atomic.Int64
}

func (f *fakeProber) PeerClosed() <-chan uuid.UUID { return nil }

func (f *fakeProber) ProbePeer(context.Context, uuid.UUID, time.Duration) ProbeResult {
	n := int(f.probes.Add(1))
	if n <= len(f.script) {
		return f.script[n-1]
	}
	return f.last
}

// A probe that a listener takes and then resets as it closes, as a dying
// process's kernel closes a connection before its listener, is made again
// and refused.
func TestTCPProbeOfDyingListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err == nil {
			c.(*net.TCPConn).SetLinger(0) // a reset, as for a closed listener's queue
			c.Close()
		}
	}()
	tr := listenTCPT(t, "127.0.0.1:0", TCPConfig{})
	dying := uuid.New()
	tr.SetPeers([]wire.Member{{ID: dying, Addr: addr}})
	if got := tr.ProbePeer(t.Context(), dying, time.Second); got != ProbeRefused {
		t.Fatalf("probe of a listener closing as it took the probe: %s, want refused", got)
	}
}

// A peer that ends connections in a loop, its listener answering, gets
// probes paced to one per crashProbeInterval after a short burst, and no
// evidence.
func TestCrashProbePaced(t *testing.T) {
	f := &fakeProber{last: ProbeConnected}
	ctx, cancel := context.WithCancel(t.Context())
	c := newCrashProbes(ctx, f, func(uuid.UUID) bool { return true })
	peer := uuid.New()
	start := time.Now()
	for time.Since(start) < 5*crashProbeInterval {
		c.request(peer, 0)
		time.Sleep(time.Millisecond) // a peer ending a connection each millisecond
	}
	cancel()
	c.wg.Wait()
	elapsed := time.Since(start)
	// The burst: gaps of 5, 10, 20, 40 and 80 ms before the interval.
	if n, most := f.probes.Load(), int64(elapsed/crashProbeInterval)+6; n > most {
		t.Errorf("%d probes in %v, want at most %d", n, elapsed, most)
	}
	select {
	case <-c.refused:
		t.Error("evidence from probes that connected")
	default:
	}
}

// A follower below the highest probes its leader only after its delay, and
// not at all once it stopped following it (the highest one's HALT came
// first).
func TestCrashProbeDelayed(t *testing.T) {
	const delay = 30 * time.Millisecond
	f := &fakeProber{last: ProbeRefused}
	var watched atomic.Bool
	watched.Store(true)
	c := newCrashProbes(t.Context(), f, func(uuid.UUID) bool { return watched.Load() })
	start := time.Now()
	c.request(uuid.New(), delay)
	select {
	case <-c.refused:
		if d := time.Since(start); d < delay {
			t.Errorf("evidence %v after the request, before its %v delay", d, delay)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no evidence 5s after a delayed probe of a refusing peer")
	}
	c.wg.Wait()
	watched.Store(false)
	c.request(uuid.New(), delay)
	c.wg.Wait()
	if n := f.probes.Load(); n != 1 {
		t.Errorf("%d probes, want 1: none for a leader no longer followed", n)
	}
}

// A probe refused by a peer whose listener is gone, while this node's
// connection to it is still open (a dying process's FIN not yet sent),
// holds what is sent to it: dropped as unreachable, never written on that
// connection. A frame from the peer ends the hold.
func TestTCPProbeRefusedHoldsSends(t *testing.T) {
	leader, follower, ln := crashPair(t)
	ln.Close() // the listener goes first; the connections stay open
	if got := follower.ProbePeer(t.Context(), leader.id, time.Second); got != ProbeRefused {
		t.Fatalf("probe of a closed listener: %s, want refused", got)
	}
	c := follower.Counters()
	follower.Send(leader.id, &wire.Message{Type: wire.TypeCoordinator, Epoch: 2, From: follower.id})
	if got := c.DroppedFor(DropUnreachable); got != 1 {
		t.Fatalf("%d frames dropped as unreachable after the refused probe, want the one sent", got)
	}
	select {
	case m := <-leader.Recv():
		t.Fatalf("the peer whose listener refused the probe received %s", m.Type)
	case <-time.After(100 * time.Millisecond):
	}
	// The peer speaks: it is back, and frames to it go out again.
	leader.Send(follower.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: 2, From: leader.id})
	recvN(t, follower, 1, 5*time.Second)
	follower.Send(leader.id, &wire.Message{Type: wire.TypeHaltAck, Epoch: 2, From: follower.id})
	recvN(t, leader, 1, 5*time.Second)
	if got := c.DroppedFor(DropUnreachable); got != 1 {
		t.Errorf("%d frames dropped after the peer was heard from, want still 1", got)
	}
}
