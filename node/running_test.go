package node

import (
	"crypto/ed25519"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// hosted is one of several nodes Start runs in the test's process, as a
// shared host process runs them.
type hosted struct {
	opts ServeOptions
	log  *syncBuffer
	r    *Running
	ctl  *ControlClient
}

// startHosted starts n nodes on loopback in this process, IDs ascending.
func startHosted(t *testing.T, n int) []*hosted { return startHostedKeys(t, n, false) }

// startHostedKeys is startHosted, with member keys for the nodes, listed
// in their peers, when memberKeys is set.
func startHostedKeys(t *testing.T, n int, memberKeys bool) []*hosted {
	return startHostedWith(t, n, memberKeys, "")
}

// startHostedWith is startHostedKeys with the nodes running algorithm.
func startHostedWith(t *testing.T, n int, memberKeys bool, algorithm string) []*hosted {
	t.Helper()
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	sortIDs(ids)
	// Bound before any node starts, so that each is listed at its port.
	members := make([]wire.Member, n)
	lns := make([]net.Listener, n)
	for i := range members {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() }) // a no-op once the node closed it
		members[i] = wire.Member{ID: ids[i], Addr: ln.Addr().String()}
		lns[i] = ln
	}
	privs := make([]ed25519.PrivateKey, n)
	var pubs map[uuid.UUID]ed25519.PublicKey
	if memberKeys {
		pubs = make(map[uuid.UUID]ed25519.PublicKey, n)
		for i := range privs {
			if privs[i], err = wire.NewMemberKey(); err != nil {
				t.Fatal(err)
			}
			pubs[ids[i]] = privs[i].Public().(ed25519.PublicKey)
		}
	}
	out := make([]*hosted, n)
	for i, m := range members {
		dir := t.TempDir()
		h := &hosted{log: &syncBuffer{}, ctl: NewControlClient(filepath.Join(dir, ControlSocketName))}
		h.opts = ServeOptions{ID: m.ID, Listen: m.Addr, Listener: lns[i], Peers: members, DataDir: dir, ClusterKey: &key,
			MemberKey: privs[i], PeerKeys: pubs, Algorithm: algorithm,
			HeartbeatInterval: 50 * time.Millisecond, FailureTimeout: 250 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
			Log: h.log, LogFormat: LogJSON}
		h.start(t)
		out[i] = h
	}
	return out
}

func (h *hosted) start(t *testing.T) {
	t.Helper()
	r, err := StartServing(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	// The listener went with the node: started again, it binds its
	// address anew, as a restarted process does.
	h.opts.Listener = nil
	h.r = r
	t.Cleanup(func() {
		r.Stop()
		<-r.Done()
	})
}

// waitAgreed waits until every node in live is Normal under leader.
func waitAgreed(t *testing.T, live []*hosted, leader *hosted) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		agreed := true
		for _, h := range live {
			if st := h.r.Node().Status(); st.Status != "normal" || st.Leader != leader.opts.ID {
				agreed = false
			}
		}
		if agreed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreement on leader %s after 30s", leader.opts.ID)
		}
		time.Sleep(5 * time.Millisecond) // a poll interval: the deadline bounds the wait
	}
}

func sortIDs(ids []uuid.UUID) {
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && election.Less(ids[j], ids[j-1]); j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
}

// TestRunningKill kills the leader as SIGKILL would: it writes nothing
// more to its log, its control socket is gone, the others elect the next
// node on evidence of the crash (leader-crashed), not the failure timeout,
// and the killed node starts again from its data dir (its lock is
// released) and takes the lead back.
func TestRunningKill(t *testing.T) {
	nodes := startHosted(t, 3)
	top := nodes[2]
	waitAgreed(t, nodes, top)
	before, before1 := len(top.log.records(t)), len(nodes[1].log.records(t))
	top.r.Kill()
	select {
	case <-top.r.Done():
	default:
		t.Fatal("Kill returned before the node was done")
	}
	if err := top.r.Err(); err != nil {
		t.Errorf("killed node's Err = %v, want nil", err)
	}
	if recs := top.log.records(t); len(recs) != before {
		t.Errorf("killed node logged %d records after Kill, want none: %+v", len(recs)-before, recs[before:])
	}
	if _, err := os.Stat(filepath.Join(top.opts.DataDir, ControlSocketName)); !os.IsNotExist(err) {
		t.Errorf("control socket after Kill: %v, want it gone", err)
	}
	waitAgreed(t, nodes[:2], nodes[1])
	if got := electionReasons(t, nodes[1], before1); len(got) == 0 || got[0] != wire.ReasonLeaderCrashed.String() {
		t.Errorf("n1 elected for %v after the leader's kill, want leader-crashed first", got)
	}
	top.start(t)
	waitAgreed(t, nodes, top)
}

// electionReasons returns the reasons of the elections h started, in
// order, in the log records after the first skip.
func electionReasons(t *testing.T, h *hosted, skip int) []string {
	t.Helper()
	var out []string
	for _, r := range h.log.records(t)[skip:] {
		if r.Event == "election_started" {
			out = append(out, r.Reason)
		}
	}
	return out
}

// TestRunningPause pauses the leader: it stops heartbeating, so the others
// elect the next node when the failure timeout ends (a pause leaves the
// leader's sockets open: no evidence of a crash); resumed, it takes the
// lead back.
func TestRunningPause(t *testing.T) {
	nodes := startHosted(t, 3)
	top := nodes[2]
	waitAgreed(t, nodes, top)
	if err := top.r.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := top.r.Pause(); err == nil {
		t.Error("a second Pause succeeded")
	}
	beats := top.r.Node().Status().Counters.Sent[wire.TypeHeartbeat.String()]
	before1 := len(nodes[1].log.records(t))
	waitAgreed(t, nodes[:2], nodes[1])
	if got := electionReasons(t, nodes[1], before1); len(got) == 0 || got[0] != wire.ReasonLeaderFailed.String() {
		t.Errorf("n1 elected for %v after the leader's pause, want leader-failed first", got)
	}
	if got := top.r.Node().Status().Counters.Sent[wire.TypeHeartbeat.String()]; got != beats {
		t.Errorf("paused leader sent %d HEARTBEATs while paused", got-beats)
	}
	if err := top.r.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := top.r.Resume(); err == nil {
		t.Error("Resume of a running node succeeded")
	}
	waitAgreed(t, nodes, top)
}

// TestRunningKillPaused kills a paused node: Kill must not wait for Resume.
func TestRunningKillPaused(t *testing.T) {
	nodes := startHosted(t, 2)
	waitAgreed(t, nodes, nodes[1])
	if err := nodes[1].r.Pause(); err != nil {
		t.Fatal(err)
	}
	nodes[1].r.Kill()
	waitAgreed(t, nodes[:1], nodes[0])
}

// A node accepts four connections per member: a new leader is dialled by
// every member at once.
func TestMaxInboundGrowsWithMembers(t *testing.T) {
	peers := make([]wire.Member, 300)
	for i := range peers {
		peers[i] = wire.Member{ID: uuid.New(), Addr: "10.0.0.1:" + strconv.Itoa(1000+i)}
	}
	for _, tc := range []struct {
		peers []wire.Member
		set   int
		want  int
	}{
		{nil, 0, DefaultMaxInbound},
		{peers, 0, 1200},
		{peers, 10, 10},
	} {
		o := ServeOptions{Listen: "127.0.0.1:0", Advertise: "127.0.0.1:1", Peers: tc.peers, TCP: TCPConfig{MaxInbound: tc.set}, Join: true}
		cfg := election.Config{ID: uuid.New()}
		tr, err := listenPeers(o, &cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := tr.cfg.MaxInbound; got != tc.want {
			t.Errorf("%d peers, MaxInbound %d given: %d, want %d", len(tc.peers), tc.set, got, tc.want)
		}
		tr.Close()
	}
}
