package node

import (
	"crypto/ed25519"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// signedConn is sealedConn with the HELLO signed by priv, as node from's
// own when priv is from's member key; nil leaves it unsigned.
func signedConn(key *wire.Key, priv ed25519.PrivateKey, from, to uuid.UUID, at time.Time, msgs ...wire.Message) []byte {
	h := wire.Hello{To: to, Time: at.UnixNano(), Nonce: [16]byte{byte(at.UnixNano()), 1}}
	if priv != nil {
		h.Sign(from, priv)
	}
	s, b := wire.NewSealer(nil, key, from, h)
	for i := range msgs {
		b = s.Seal(b, wire.Append(nil, &msgs[i]))
	}
	return b
}

func newMemberKeyT(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := wire.NewMemberKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// Two transports with member keys exchange frames behind a signed HELLO.
func TestTCPSignedExchange(t *testing.T) {
	key := testClusterKey(t)
	ka, kb := newMemberKeyT(t), newMemberKeyT(t)
	ida, idb := uuid.New(), uuid.New()
	keys := map[uuid.UUID]ed25519.PublicKey{ida: pub(ka), idb: pub(kb)}
	a := NewTCPTransport(listenT(t), ida, TCPConfig{Key: key, MemberKey: ka, PeerKeys: keys})
	b := NewTCPTransport(listenT(t), idb, TCPConfig{Key: key, MemberKey: kb, PeerKeys: keys})
	t.Cleanup(func() { a.Close(); b.Close() })
	a.SetPeers([]wire.Member{{ID: b.id, Addr: b.LocalAddr()}})
	for i := range 3 {
		a.Send(b.id, &wire.Message{Type: wire.TypeHeartbeat, Epoch: uint64(i), From: a.id})
	}
	recvN(t, b, 3, 5*time.Second)
	for i := range numPeerIssues {
		if n := b.counters.Issues(i); n != 0 {
			t.Errorf("%s counted %d times", i, n)
		}
	}
}

// Where the peers give member keys, a HELLO is its sender's only when its
// sender signed it: a member that holds the cluster key cannot open a
// connection in another's name, signed by its own key, by none, or with
// another member's signed HELLO.
func TestTCPRefusesHelloNotItsSenders(t *testing.T) {
	key := testClusterKey(t)
	leader, member := uuid.New(), uuid.New()
	kLeader, kMember := newMemberKeyT(t), newMemberKeyT(t)
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, PeerKeys: map[uuid.UUID]ed25519.PublicKey{leader: pub(kLeader), member: pub(kMember)}})
	hb := func(from uuid.UUID) wire.Message { return wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: from} }
	ahead := time.Now().Add(4 * time.Minute)

	// The member's own key, the leader's ID: the signature verifies, but
	// the key is not the leader's.
	c := dialT(t, b.LocalAddr())
	c.Write(signedConn(key, kMember, leader, b.id, ahead, hb(leader)))
	waitIssue(t, b, IssueSignature, 1, 5*time.Second)
	waitClosed(t, c, 5*time.Second)

	// Unsigned.
	c = dialT(t, b.LocalAddr())
	c.Write(signedConn(key, nil, leader, b.id, ahead, hb(leader)))
	waitIssue(t, b, IssueSignature, 2, 5*time.Second)
	waitClosed(t, c, 5*time.Second)

	// The member's own signed HELLO with the leader's ID put in: the
	// signature covers From, so it no longer verifies.
	own := signedConn(key, kMember, member, b.id, ahead)
	var m wire.Message
	if _, err := wire.Decode(own, &m); err != nil {
		t.Fatal(err)
	}
	h, _ := wire.DecodeHello(m.Payload)
	_, forged := wire.NewSealer(nil, key, leader, h)
	c = dialT(t, b.LocalAddr())
	c.Write(forged)
	waitIssue(t, b, IssueSignature, 3, 5*time.Second)
	waitClosed(t, c, 5*time.Second)

	// None of them took the leader's place in the HELLO clock: its own
	// HELLO, stamped now, minutes before the forged ones, is accepted.
	c = dialT(t, b.LocalAddr())
	c.Write(signedConn(key, kLeader, leader, b.id, time.Now(), hb(leader)))
	if got := recvN(t, b, 1, 5*time.Second); got[0].From != leader {
		t.Fatalf("delivered %v, want the leader's HEARTBEAT", got[0])
	}
	if n := b.counters.Issues(IssueReplay); n != 0 {
		t.Errorf("%d HELLOs refused as replays", n)
	}
}

// A member the peers file does not list (it joined later) is pinned to the
// key of its first accepted HELLO; without member keys in the peers file,
// unsigned HELLOs are accepted and signed ones still checked.
func TestTCPMemberKeyFirstUseAndLegacy(t *testing.T) {
	key := testClusterKey(t)
	listed, joiner := uuid.New(), uuid.New()
	kListed, kJoiner, kOther := newMemberKeyT(t), newMemberKeyT(t), newMemberKeyT(t)
	b := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key, PeerKeys: map[uuid.UUID]ed25519.PublicKey{listed: pub(kListed)}})
	hb := wire.Message{Type: wire.TypeHeartbeat, Epoch: 1, From: joiner}
	now := time.Now()
	c := dialT(t, b.LocalAddr())
	c.Write(signedConn(key, kJoiner, joiner, b.id, now, hb))
	recvN(t, b, 1, 5*time.Second)
	c = dialT(t, b.LocalAddr())
	c.Write(signedConn(key, kOther, joiner, b.id, now.Add(time.Second), hb))
	waitIssue(t, b, IssueSignature, 1, 5*time.Second)
	waitClosed(t, c, 5*time.Second)
	c = dialT(t, b.LocalAddr())
	c.Write(signedConn(key, kJoiner, joiner, b.id, now.Add(2*time.Second), hb))
	recvN(t, b, 1, 5*time.Second)

	legacy := listenTCPT(t, "127.0.0.1:0", TCPConfig{Key: key})
	c = dialT(t, legacy.LocalAddr())
	c.Write(signedConn(key, nil, joiner, legacy.id, now, hb))
	recvN(t, legacy, 1, 5*time.Second)
	c = dialT(t, legacy.LocalAddr())
	c.Write(signedConn(key, kJoiner, joiner, legacy.id, now.Add(time.Second), hb))
	recvN(t, legacy, 1, 5*time.Second)
	// A signature that does not verify is refused even here.
	h := wire.Hello{To: legacy.id, Time: now.Add(2 * time.Second).UnixNano()}
	h.Sign(joiner, kJoiner)
	h.Signature[0] ^= 1
	_, bad := wire.NewSealer(nil, key, joiner, h)
	c = dialT(t, legacy.LocalAddr())
	c.Write(bad)
	waitIssue(t, legacy, IssueSignature, 1, 5*time.Second)
	waitClosed(t, c, 5*time.Second)
}

// Pins past the bound push out those of non-members, never a member's.
func TestMemberKeysPinBound(t *testing.T) {
	k := newMemberKeys(map[uuid.UUID]ed25519.PublicKey{uuid.New(): pub(newMemberKeyT(t))}, 2)
	member := uuid.New()
	isMember := func(id uuid.UUID) bool { return id == member }
	pinNew := func(id uuid.UUID) error {
		h := wire.Hello{}
		h.Sign(id, newMemberKeyT(t))
		if pin, err := k.check(id, &h); err != nil || !pin {
			t.Fatalf("check of a new ID = %v, %v", pin, err)
		}
		return k.pin(id, &h, isMember)
	}
	for _, id := range []uuid.UUID{member, uuid.New(), uuid.New(), uuid.New()} {
		if err := pinNew(id); err != nil {
			t.Fatalf("pin: %v", err)
		}
	}
	if _, ok := k.pinned[member]; !ok || len(k.pinned) > 2 {
		t.Errorf("pinned %v: want the member's among at most 2", k.pinned)
	}
	all := func(uuid.UUID) bool { return true }
	h := wire.Hello{}
	h.Sign(member, newMemberKeyT(t))
	if err := k.pin(uuid.New(), &h, all); err == nil || !strings.Contains(err.Error(), "its limit") {
		t.Errorf("pin past the bound, all members: %v", err)
	}
}

// listenT listens on a loopback port for a transport the test builds.
func listenT(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// The attack of issue 24: a member holding the cluster key sends a HELLO
// in the leader's name stamped 4 minutes ahead, within the clock skew
// allowed. Had the victim taken it, it would refuse the real leader's
// HELLOs as replays, after the leader restarts, until that time passed,
// and stay behind at the old epoch while the others moved on. With member
// keys it is refused, and the restarted leader leads the victim too.
func TestRunningForgedHelloInLeadersName(t *testing.T) {
	nodes := startHostedKeys(t, 3, true)
	hostile, victim, top := nodes[0], nodes[1], nodes[2]
	waitAgreed(t, nodes, top)
	before := top.r.Node().Status().Epoch
	key := hostile.opts.ClusterKey
	hb := wire.Message{Type: wire.TypeHeartbeat, Epoch: before, From: top.opts.ID}
	ahead := time.Now().Add(4 * time.Minute)
	for i, forged := range [][]byte{
		signedConn(key, hostile.opts.MemberKey, top.opts.ID, victim.opts.ID, ahead, hb), // its own key
		signedConn(key, nil, top.opts.ID, victim.opts.ID, ahead.Add(time.Second), hb),   // unsigned
	} {
		c := dialT(t, victim.opts.Listen)
		c.Write(forged)
		waitClosed(t, c, 5*time.Second)
		waitIssue(t, victim.r.tr, IssueSignature, uint64(i+1), 5*time.Second)
	}
	top.r.Kill()
	waitAgreed(t, nodes[:2], victim)
	top.start(t)
	waitAgreed(t, nodes, top)
	epochs := map[uint64]bool{}
	for _, h := range nodes {
		epochs[h.r.Node().Status().Epoch] = true
	}
	if after := top.r.Node().Status().Epoch; len(epochs) != 1 || after <= before {
		t.Errorf("epochs %v after the leader's restart, want one, above %d", epochs, before)
	}
	if n := victim.r.tr.counters.Issues(IssueReplay); n != 0 {
		t.Errorf("the victim refused %d HELLOs as replays", n)
	}
	var refused int
	for _, rec := range victim.log.records(t) {
		if rec.Event == "peer_refused" && rec.Reason == "bad_signature" {
			refused++
		}
	}
	if refused == 0 {
		t.Error("the victim logged no bad_signature refusal")
	}
	t.Logf("forged HELLOs refused as bad_signature: %d; HELLOs refused as replays: %d; epoch %d before the leader's restart, %d on every node after",
		victim.r.tr.counters.Issues(IssueSignature), victim.r.tr.counters.Issues(IssueReplay), before, top.r.Node().Status().Epoch)
}

// Serve checks the member keys against the peers before it starts.
func TestServeMemberKeys(t *testing.T) {
	key := testClusterKey(t)
	self, other := uuid.New(), uuid.New()
	mine, theirs := newMemberKeyT(t), newMemberKeyT(t)
	for _, tc := range []struct {
		name string
		o    ServeOptions
		want string
	}{
		{"none, peers have keys", ServeOptions{PeerKeys: map[uuid.UUID]ed25519.PublicKey{other: pub(theirs)}, PeersSource: "peers.txt"},
			"peers.txt: the peers have member keys, so every node must sign its HELLOs, and this one has none"},
		{"not the listed one", ServeOptions{MemberKey: theirs, PeerKeys: map[uuid.UUID]ed25519.PublicKey{self: pub(mine)}, PeersFrom: []string{"peers.txt:1"}},
			"peers.txt:1: this node's ID " + self.String() + " is listed with member key " + wire.EncodePublicKey(pub(mine)) + ", but its own member key's public key is " + wire.EncodePublicKey(pub(theirs))},
		{"insecure", ServeOptions{MemberKey: mine, Insecure: true}, "a member key signs HELLOs, which insecure mode does not send"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.o.ID, tc.o.Listen, tc.o.DataDir = self, "127.0.0.1:0", dir
			if !tc.o.Insecure {
				tc.o.ClusterKey = key
			}
			tc.o.Peers = []wire.Member{{ID: self, Addr: "127.0.0.1:0"}}
			err := Serve(t.Context(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Serve = %v; want one line containing %q", err, tc.want)
			}
		})
	}
}

// node_started says what proves a peer's ID at the node, so that a log
// shows a cluster still open to a member speaking in another's name.
func TestNodeStartedSaysIdentity(t *testing.T) {
	for _, tc := range []struct {
		memberKeys bool
		want       string
	}{{true, IdentityMemberKeys}, {false, IdentityClusterKey}} {
		h := startHostedKeys(t, 1, tc.memberKeys)[0]
		var got []string
		for deadline := time.Now().Add(5 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
			for _, rec := range h.log.records(t) {
				if rec.Event == "node_started" {
					got = append(got, rec.Identity)
				}
			}
			time.Sleep(time.Millisecond) // polling the log, with a deadline
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("member keys %v: node_started identity %q, want %q", tc.memberKeys, got, tc.want)
		}
	}
	if id := (ServeOptions{Insecure: true}).identity(); id != IdentityNone {
		t.Errorf("insecure node's identity %q, want %q", id, IdentityNone)
	}
}
