package cluster

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// The hostile-peer suite: each attack of the hostile-peer table runs against
// three real node processes on loopback, with a cluster key (by an outsider
// without it, and by a member with a bug, who has it) and with --insecure,
// and must do no harm: every process keeps running, nobody follows or lists
// an outsider, the nodes agree on their highest, and after a leader crash
// the survivors elect and the restarted leader takes over again.

// attackerHost is where attacks come from: another address than the
// nodes', as from another host, so that the per-host limits the nodes
// apply to it leave their own connections alone.
const attackerHost = "127.0.0.2"

// attacker sends frames to nodes as whoever it claims to be.
type attacker struct {
	t   *testing.T
	key *wire.Key // nil: an outsider without the cluster key
	// signed: the nodes require HELLOs signed by their senders' member
	// keys, none of which the attacker has.
	signed bool
}

// dial connects to n from attackerHost.
func (a *attacker) dial(n *Process) net.Conn {
	a.t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(attackerHost)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", n.Addr)
	if err != nil {
		a.t.Fatalf("attacker dial %s: %v", n, err)
	}
	a.t.Cleanup(func() { c.Close() })
	return c
}

// stream encodes msgs as one connection to n from the sender of the first:
// sealed behind a HELLO when the attacker has the key.
func (a *attacker) stream(n *Process, msgs ...wire.Message) []byte {
	var b []byte
	if a.key == nil {
		for i := range msgs {
			b = wire.Append(b, &msgs[i])
		}
		return b
	}
	h, err := wire.NewHello(n.ID, time.Now())
	if err != nil {
		a.t.Fatal(err)
	}
	s, b := wire.NewSealer(nil, a.key, msgs[0].From, h)
	for i := range msgs {
		b = s.Seal(b, wire.Append(nil, &msgs[i]))
	}
	return b
}

// send writes msgs to n on a new connection and closes it.
func (a *attacker) send(n *Process, msgs ...wire.Message) {
	a.t.Helper()
	c := a.dial(n)
	if _, err := c.Write(a.stream(n, msgs...)); err != nil {
		a.t.Fatalf("attacker write to %s: %v", n, err)
	}
	c.Close()
}

type hostileMode struct {
	name     string
	insecure bool
	withKey  bool // the attacker holds the cluster key: a member with a bug
	// memberKeys: the nodes have member keys, listed in the peers file,
	// and the attacker none of theirs, so that it cannot open a
	// connection in a member's name.
	memberKeys bool
}

var hostileModes = []hostileMode{
	{name: "key/outsider"},
	{name: "key/member-with-bug", withKey: true},
	{name: "member-keys/member-with-bug", withKey: true, memberKeys: true},
	{name: "insecure", insecure: true},
}

type attack struct {
	name string
	run  func(t *testing.T, c *Cluster, a *attacker)
	// outsiderOnly: the attack is an outsider's; a key holder is a member,
	// whose JOIN is legitimate.
	outsiderOnly bool
	// addsMembers: a member with a bug may add members by it, up to
	// MaxMembers.
	addsMembers bool
}

func TestHostilePeers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the hostile-peer suite starts 21 three-node clusters")
	}
	if c, err := net.Dial("tcp", net.JoinHostPort(attackerHost, "1")); err != nil && !strings.Contains(err.Error(), "refused") {
		t.Fatalf("cannot reach %s, which every Linux loopback routes: %v", attackerHost, err)
	} else if err == nil {
		c.Close()
	}
	for _, at := range hostileAttacks {
		for _, mode := range hostileModes {
			if at.outsiderOnly && mode.withKey {
				continue
			}
			t.Run(at.name+"/"+mode.name, func(t *testing.T) {
				var args []string
				if mode.insecure {
					args = []string{"--insecure"}
				}
				c := startClusterSpec(t, Spec{Nodes: 3, NodeArgs: args, MemberKeys: mode.memberKeys})
				a := &attacker{t: t, signed: mode.memberKeys}
				if mode.withKey {
					k, err := wire.ReadKeyFile(c.KeyFile)
					if err != nil {
						t.Fatal(err)
					}
					a.key = &k
				}
				epoch := waitSettled(t, c)
				at.run(t, c, a)
				maxMembers := len(c.Nodes)
				if at.addsMembers && mode.withKey {
					maxMembers = election.DefaultMaxMembers
				}
				checkNoHarm(t, c, epoch, maxMembers)
			})
		}
	}
}

var hostileAttacks = []attack{
	{"heartbeat-at-max-epoch", func(t *testing.T, c *Cluster, a *attacker) {
		leader := Highest(c.Nodes)
		for _, n := range Except(c.Nodes, leader) {
			a.send(n, wire.Message{Type: wire.TypeHeartbeat, Epoch: math.MaxUint64, From: leader.ID})
		}
		waitIssues(t, c, Except(c.Nodes, leader), "epoch_window", "auth_failed", "bad_signature")
	}, false, false},
	{"forged-leave-of-the-leader", func(t *testing.T, c *Cluster, a *attacker) {
		leader := Highest(c.Nodes)
		for _, n := range Except(c.Nodes, leader) {
			a.send(n, wire.Message{Type: wire.TypeLeave, Epoch: 1, From: leader.ID})
			// Refused, or taken: the node logged the leader's leaving.
			// With member keys, a member cannot speak for the leader.
			left := `"event":"member_left","peer":"` + leader.ID.String()
			waitFor(t, 10*time.Second, fmt.Sprintf("%s handled the LEAVE", n), func() bool {
				log, _ := os.ReadFile(n.LogPath)
				issues := status(t, c, n).Counters.PeerIssues
				if a.signed {
					return issues["bad_signature"] > 0
				}
				return issues["auth_failed"] > 0 || strings.Contains(string(log), left)
			})
			if log, _ := os.ReadFile(n.LogPath); a.signed && strings.Contains(string(log), left) {
				t.Errorf("%s took a LEAVE in the leader's name from a member that does not hold its key", n)
			}
		}
	}, false, false},
	{"outsider-joins-then-coordinates", func(t *testing.T, c *Cluster, a *attacker) {
		outsider := uuid.MustParse("ffffffff-ffff-4fff-bfff-ffffffffffff")
		s := status(t, c, c.Nodes[0])
		for _, n := range c.Nodes {
			a.send(n,
				wire.Message{Type: wire.TypeJoin, Flags: wire.FlagWantMembers, From: outsider, Payload: []byte(attackerHost + ":1")},
				wire.Message{Type: wire.TypeCoordinator, Epoch: s.MaxEpoch + 1, From: outsider},
			)
		}
		waitIssues(t, c, c.Nodes, "membership", "auth_failed")
	}, true, false},
	{"forged-coordinator-and-halt", func(t *testing.T, c *Cluster, a *attacker) {
		leader := Highest(c.Nodes)
		lowest := c.Nodes[0]
		for _, n := range c.Nodes {
			if election.Less(n.ID, lowest.ID) {
				lowest = n
			}
		}
		s := status(t, c, leader)
		for _, n := range c.Nodes {
			if n != lowest {
				a.send(n, wire.Message{Type: wire.TypeCoordinator, Epoch: s.MaxEpoch + 100, From: lowest.ID})
			}
			if n != leader {
				a.send(n, wire.Message{Type: wire.TypeHalt, Epoch: s.MaxEpoch + 100, From: leader.ID})
			}
		}
	}, false, false},
	{"fake-members-and-join-flood", func(t *testing.T, c *Cluster, a *attacker) {
		leader := Highest(c.Nodes)
		fakes := make([]wire.Member, 20)
		for i := range fakes {
			fakes[i] = wire.Member{ID: uuid.New(), Addr: fmt.Sprintf("%s:%d", attackerHost, 1000+i)}
		}
		joins := make([]wire.Message, 3000)
		for i := range joins {
			joins[i] = wire.Message{Type: wire.TypeJoin, From: uuid.New(), Payload: []byte(attackerHost + ":" + strconv.Itoa(2000+i))}
		}
		for _, n := range Except(c.Nodes, leader) {
			a.send(n, wire.Message{Type: wire.TypeMembers, Epoch: 1, From: leader.ID, Payload: wire.AppendMembers(nil, fakes)})
			// Each JOIN on its own connection: with a key each needs its
			// own HELLO, since a connection is one sender's.
			c := a.dial(n)
			for _, j := range joins {
				if _, err := c.Write(a.stream(n, j)); err != nil {
					break // the node hung up: a key mode, and the sender changed
				}
				if a.key == nil {
					continue
				}
				c.Close()
				c = a.dial(n)
			}
			c.Close()
		}
	}, false, true},
	{"connection-flood-drip-and-half-frame", func(t *testing.T, c *Cluster, a *attacker) {
		target := Highest(c.Nodes)
		before := openFDs(t, target)
		rssBefore := rssKB(t, target)
		// 2000 connections that send nothing, from 125 hosts: past the
		// inbound limit, and past what connections without a HELLO may hold.
		var held []net.Conn
		for i := range 2000 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, 1+byte(i%125))}}
			conn, err := d.Dial("tcp", target.Addr)
			if err != nil {
				break // the accept queue is full: the node keeps up or refuses
			}
			held = append(held, conn)
		}
		peak := openFDs(t, target)
		// A frame dripped byte by byte, and a 60 KB frame sent by half.
		drip := a.dial(target)
		big := a.stream(target, wire.Message{Type: wire.TypeMembers, Epoch: 1, From: uuid.New(), Payload: make([]byte, 60_000)})
		half := a.dial(target)
		half.Write(big[:len(big)/2])
		// What the node holds: at most a quarter of its inbound limit
		// without a HELLO (and its own few).
		limit := before + node.DefaultMaxInbound/4 + 8
		waitFor(t, 10*time.Second, fmt.Sprintf("%s down to at most %d descriptors under the flood", target, limit),
			func() bool { return openFDs(t, target) <= limit })
		go func() {
			for _, b := range big[:64] {
				if _, err := drip.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(time.Second) // the attack itself: one byte a second
			}
		}()
		// Both slow connections are cut within the frame and handshake
		// deadlines (5s each), not left open.
		for _, conn := range []net.Conn{drip, half} {
			conn.SetReadDeadline(time.Now().Add(15 * time.Second))
			if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Errorf("a slow connection is still open after 15s: %v", err)
			}
		}
		rssDuring := rssKB(t, target)
		for _, conn := range held {
			conn.Close()
		}
		if rssDuring > rssBefore+32<<10 {
			t.Errorf("%s RSS %d KiB under the flood, %d before", target, rssDuring, rssBefore)
		}
		waitFor(t, 10*time.Second, "descriptors back after the flood", func() bool { return openFDs(t, target) <= before+2 })
		t.Logf("%s: %d connections opened; descriptors %d before, %d right after they were, %d after; RSS %d KiB before, %d under the flood, %d after",
			target, len(held), before, peak, openFDs(t, target), rssBefore, rssDuring, rssKB(t, target))
	}, false, false},
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// startClusterSpec starts the cluster spec describes, of the test binary
// in a directory of the test's.
func startClusterSpec(t *testing.T, spec Spec) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	spec.Binary, spec.Dir = binary, t.TempDir()
	c, err := Launch(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s log tail: %s", n, c.LogTail(n, 8))
			}
		}
	})
	return c
}

// waitSettled waits until the nodes agree on their highest at one epoch
// for three heartbeat intervals running, as a boot's last election can
// follow a first agreement, and returns the epoch.
func waitSettled(t *testing.T, c *Cluster) uint64 {
	t.Helper()
	leader := Highest(c.Nodes)
	epoch := waitAgree(t, c, c.Nodes, leader, 0)
	for since := time.Now(); time.Since(since) < 300*time.Millisecond; time.Sleep(PollInterval) {
		if e := waitAgree(t, c, c.Nodes, leader, 0); e != epoch {
			epoch, since = e, time.Now()
		}
	}
	return epoch
}

// waitIssues waits until each of nodes counted one of the named peer
// issues: the attack reached them and was refused.
func waitIssues(t *testing.T, c *Cluster, nodes []*Process, names ...string) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, 10*time.Second, fmt.Sprintf("%s counts one of %v", n, names), func() bool {
			s, err := c.Status(context.Background(), n)
			if err != nil {
				return false
			}
			for _, name := range names {
				if s.Counters.PeerIssues[name] > 0 {
					return true
				}
			}
			return false
		})
	}
}

// checkNoHarm checks a cluster after an attack: every process runs, every
// node lists its members and at most maxMembers, they agree on their highest, and a
// leader crash and restart go as without the attack.
func checkNoHarm(t *testing.T, c *Cluster, epochBefore uint64, maxMembers int) {
	t.Helper()
	for _, n := range c.Nodes {
		if !n.Running() {
			t.Fatalf("%s exited: %s", n, c.LogTail(n, 5))
		}
	}
	leader := Highest(c.Nodes)
	epoch := waitAgree(t, c, c.Nodes, leader, epochBefore-1)
	// An attack's effect on membership may take a heartbeat to undo (a
	// forged LEAVE without a key): wait for it, within bounds.
	for _, n := range c.Nodes {
		var s *node.NodeStatus
		ok := func() bool {
			s = status(t, c, n)
			return len(s.Members) >= len(c.Nodes) && len(s.Members) <= maxMembers
		}
		deadline := time.Now().Add(5 * time.Second)
		for !ok() && time.Now().Before(deadline) {
			time.Sleep(PollInterval)
		}
		if !ok() {
			t.Errorf("%s lists %d members after the attack, want %d to %d", n, len(s.Members), len(c.Nodes), maxMembers)
		}
		if s.MaxEpoch > epoch+election.EpochWindow {
			t.Errorf("%s has seen epoch %d, the cluster's is %d", n, s.MaxEpoch, epoch)
		}
	}
	epoch = waitAgree(t, c, c.Nodes, leader, epochBefore-1)
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	survivors := Except(c.Nodes, leader)
	epoch = waitAgree(t, c, survivors, Highest(survivors), epoch)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	waitAgree(t, c, c.Nodes, leader, epoch)
}

func status(t *testing.T, c *Cluster, n *Process) *node.NodeStatus {
	t.Helper()
	s, err := c.Status(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openFDs(t *testing.T, n *Process) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", n.PID()))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func rssKB(t *testing.T, n *Process) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", n.PID())
	return 0
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(PollInterval)
	}
}
