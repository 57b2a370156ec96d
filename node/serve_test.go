package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// syncBuffer is a bytes.Buffer safe for the log writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []LogRecord {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LogRecord
	sc := bufio.NewScanner(bytes.NewReader(s.b.Bytes()))
	for sc.Scan() {
		var r LogRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// TestServeLogsFinalCounters serves two nodes on loopback until the higher
// one has led for a while, stops the follower, then the leader, and checks
// that each log ends with node_counters after node_stopped: the follower's
// equal to what its control socket counted while quiet (a follower sends
// nothing between elections), the leader's at least what it had counted.
func TestServeLogsFinalCounters(t *testing.T) {
	ids := []uuid.UUID{uuid.New(), uuid.New()}
	if election.Less(ids[1], ids[0]) {
		ids[0], ids[1] = ids[1], ids[0]
	}
	// Bound before either node starts, so that each is listed at its port.
	var members []wire.Member
	var lns []net.Listener
	for range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() }) // a no-op once the node closed it
		members = append(members, wire.Member{ID: ids[len(members)], Addr: ln.Addr().String()})
		lns = append(lns, ln)
	}
	type served struct {
		log    syncBuffer
		cancel context.CancelFunc
		done   chan struct{} // closed once Serve returned err
		err    error
		ctl    *ControlClient
	}
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*served, 2)
	for i, m := range members {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		s := &served{cancel: cancel, done: make(chan struct{}), ctl: NewControlClient(filepath.Join(dir, ControlSocketName))}
		nodes[i] = s
		go func() {
			defer close(s.done)
			s.err = Serve(ctx, ServeOptions{ID: m.ID, Listener: lns[i], Peers: members, DataDir: dir, ClusterKey: &key, Log: &s.log, LogFormat: LogJSON})
		}()
		t.Cleanup(func() {
			cancel()
			<-s.done
		})
	}
	status := func(s *served) *NodeStatus {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		st, err := s.ctl.Status(ctx)
		if err != nil {
			return nil
		}
		return st
	}
	// Wait for five HEARTBEATs from the leader, the follower following.
	deadline := time.Now().Add(30 * time.Second)
	var follower *NodeStatus
	for {
		lst, fst := status(nodes[1]), status(nodes[0])
		if lst != nil && fst != nil && fst.Status == "normal" && fst.Leader == ids[1] &&
			lst.Counters.Sent[wire.TypeHeartbeat.String()] >= 5 {
			follower = fst
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader sending HEARTBEATs after 30s")
		}
		time.Sleep(10 * time.Millisecond) // a poll interval: the deadline bounds the wait
	}
	stop := func(s *served) {
		s.cancel()
		<-s.done
		if s.err != nil {
			t.Fatal(s.err)
		}
	}
	stop(nodes[0])
	leaderBefore := status(nodes[1])
	if leaderBefore == nil {
		t.Fatal("the leader's control socket does not answer")
	}
	stop(nodes[1])
	final := func(s *served) map[string]uint64 {
		recs := s.log.records(t)
		n := len(recs)
		if n < 2 || recs[n-1].Event != "node_counters" || recs[n-2].Event != "node_stopped" {
			t.Fatalf("log does not end with node_stopped, node_counters: %+v", recs)
		}
		return recs[n-1].Sent
	}
	want := map[string]uint64{}
	for k, v := range follower.Counters.Sent {
		if v > 0 {
			want[k] = v
		}
	}
	if got := final(nodes[0]); !maps.Equal(got, want) {
		t.Errorf("follower's final counters %v, its control socket counted %v", got, want)
	}
	got := final(nodes[1])
	for k, v := range leaderBefore.Counters.Sent {
		if got[k] < v {
			t.Errorf("leader's final counters %v, below what it counted before: %v", got, leaderBefore.Counters.Sent)
			break
		}
	}
	if got[wire.TypeHeartbeat.String()] < 5 {
		t.Errorf("leader's final counters %v: fewer than 5 HEARTBEATs", got)
	}
}

// A node needs a cluster key or insecure mode, and not both.
func TestServeKeyOrInsecure(t *testing.T) {
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    ServeOptions
		want string
	}{
		{"neither", ServeOptions{}, "no cluster key: give --cluster-key FILE"},
		{"both", ServeOptions{ClusterKey: &key, Insecure: true}, "exclude each other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.o.Listen, tc.o.DataDir = "127.0.0.1:0", dir
			err := Serve(t.Context(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Serve = %v; want one line containing %q", err, tc.want)
			}
			// Refused before the data dir was touched.
			if names, _ := os.ReadDir(dir); len(names) != 0 {
				t.Errorf("data dir holds %v after a refused start", names)
			}
		})
	}
}

func TestCheckOwnEntry(t *testing.T) {
	self, other := uuid.New(), uuid.New()
	peers := func(addr string) []wire.Member {
		return []wire.Member{{ID: other, Addr: "10.0.0.1:7000"}, {ID: self, Addr: addr}}
	}
	from := []string{"peers.txt:1", "peers.txt:2"}
	for _, tc := range []struct {
		name  string
		o     ServeOptions
		bound string
		want  string // "" for no error
	}{
		{"no peers", ServeOptions{Listen: "127.0.0.1:7000"}, "127.0.0.1:7000", ""},
		{"at listen", ServeOptions{Listen: "127.0.0.1:7000", Peers: peers("127.0.0.1:7000")}, "127.0.0.1:7000", ""},
		{"at bound", ServeOptions{Listen: "127.0.0.1:0", Peers: peers("127.0.0.1:41000")}, "127.0.0.1:41000", ""},
		{"at advertise", ServeOptions{Listen: "0.0.0.0:7000", Advertise: "Node2.Example:7000", Peers: peers("node2.example:7000")}, "0.0.0.0:7000", ""},
		{"absent", ServeOptions{Listen: "127.0.0.1:7000", Peers: peers("x")[:1], PeersSource: "peers.txt"}, "127.0.0.1:7000",
			"peers.txt: no entry for this node's ID " + self.String() + ": list every node, itself included"},
		{"absent, joining", ServeOptions{Listen: "127.0.0.1:7000", Peers: peers("x")[:1], Join: true}, "127.0.0.1:7000", ""},
		{"elsewhere", ServeOptions{Listen: "127.0.0.1:7000", Peers: peers("127.0.0.1:7001"), PeersFrom: from}, "127.0.0.1:7000",
			"peers.txt:2: this node's ID " + self.String() + " is listed at 127.0.0.1:7001, but its listen address (--listen) is 127.0.0.1:7000"},
		{"elsewhere, joining", ServeOptions{Listen: "127.0.0.1:7000", Peers: peers("127.0.0.1:7001"), PeersFrom: from, Join: true}, "127.0.0.1:7000",
			"peers.txt:2: this node's ID"},
		{"at listen, advertising another", ServeOptions{Listen: "127.0.0.1:7000", Advertise: "10.0.0.2:7000", Peers: peers("127.0.0.1:7000")}, "127.0.0.1:7000",
			"peers entry 2: this node's ID " + self.String() + " is listed at 127.0.0.1:7000, but its advertise address (--advertise) is 10.0.0.2:7000"},
		{"no name resolution", ServeOptions{Listen: "localhost:7000", Peers: peers("127.0.0.1:7000")}, "127.0.0.1:7000", ""},
		{"no name resolution either way", ServeOptions{Listen: "127.0.0.1:7000", Peers: peers("localhost:7000")}, "127.0.0.1:7000", "is listed at localhost:7000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOwnEntry(tc.o, self, tc.bound)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkOwnEntry = %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("checkOwnEntry = %v; want one line containing %q", err, tc.want)
			}
		})
	}
}

// Serve refuses a peers list without the node, or with the node elsewhere,
// and a malformed advertise address, before it answers anyone.
func TestServeOwnEntry(t *testing.T) {
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	self, other := uuid.New(), uuid.New()
	for _, tc := range []struct {
		name string
		o    ServeOptions
		want string
	}{
		{"absent", ServeOptions{Peers: []wire.Member{{ID: other, Addr: "127.0.0.1:1"}}}, "no entry for this node's ID " + self.String()},
		{"elsewhere", ServeOptions{Peers: []wire.Member{{ID: self, Addr: "127.0.0.1:2"}}}, "is listed at 127.0.0.1:2, but its listen address (--listen) is 127.0.0.1:0, bound at 127.0.0.1:"},
		{"bad advertise", ServeOptions{Advertise: "not an addr"}, `advertise address: bad address "not an addr"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.o.ID, tc.o.Listen, tc.o.DataDir, tc.o.ClusterKey = self, "127.0.0.1:0", dir, &key
			err := Serve(t.Context(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Serve = %v; want one line containing %q", err, tc.want)
			}
			if _, err := os.Lstat(filepath.Join(dir, ControlSocketName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("control socket exists after a refused start: %v", err)
			}
		})
	}
}

// A node handed a listener owns it: Start closes it when it fails too.
func TestStartClosesListenerOnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := StartServing(ServeOptions{Listener: ln, DataDir: t.TempDir()}); !errors.Is(err, ErrNoClusterKey) {
		t.Fatalf("Start without a cluster key: %v, want ErrNoClusterKey", err)
	}
	if c, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		if c != nil {
			c.Close()
		}
		t.Errorf("the listener after a failed Start: Accept = %v, want it closed", err)
	}
}
