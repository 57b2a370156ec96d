package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/wire"
)

// binary is the bullylab executable TestMain builds once for all tests.
var binary string

func TestMain(m *testing.M) {
	bin, cleanup, err := BuildTemp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func startCluster(t *testing.T, n int) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Launch(ctx, Spec{Binary: binary, Nodes: n, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pids := c.pids()
		c.Close()
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Close: %v", pid, err)
			}
		}
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s log tail: %s", n, c.LogTail(n, 8))
			}
		}
	})
	return c
}

// pids lists every process the cluster started and that may still exist.
func (c *Cluster) pids() []int {
	var pids []int
	for _, n := range c.Nodes {
		if pid := n.PID(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitAgree(t *testing.T, c *Cluster, nodes []*Process, leader *Process, after uint64) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	epoch, err := c.WaitAgree(ctx, nodes, leader, after)
	if err != nil {
		t.Fatal(err)
	}
	return epoch
}

// TestEndToEnd is the acceptance scenario on five real processes: agree,
// kill -9 the leader, the highest survivor takes over, the old leader comes
// back from its data dir and takes over again under a newer epoch.
func TestEndToEnd(t *testing.T) {
	c := startCluster(t, 5)
	first := Highest(c.Nodes)
	epoch1 := waitAgree(t, c, c.Nodes, first, 0)

	if err := c.Kill(first); err != nil {
		t.Fatal(err)
	}
	if first.Running() {
		t.Fatal("killed node still running")
	}
	survivors := Except(c.Nodes, first)
	second := Highest(survivors)
	epoch2 := waitAgree(t, c, survivors, second, epoch1)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.Restart(ctx, first); err != nil {
		t.Fatal(err)
	}
	epoch3 := waitAgree(t, c, c.Nodes, first, epoch2)
	if !(epoch1 < epoch2 && epoch2 < epoch3) {
		t.Errorf("epochs %d, %d, %d not increasing", epoch1, epoch2, epoch3)
	}

	// Every survivor counted frames both ways, and the restarted node
	// reports itself leader over the control socket.
	s, err := c.Status(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if !s.IsLeader || s.Epoch != epoch3 || len(s.Members) != 5 {
		t.Errorf("restarted leader's status: %+v", s)
	}
	for _, n := range survivors {
		s, err := c.Status(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if s.Counters.Received["COORDINATOR"] == 0 || s.Counters.Sent["HALT_ACK"] == 0 {
			t.Errorf("%s counters: %+v", n, s.Counters)
		}
	}
}

func TestFailoverScenario(t *testing.T) {
	c := startCluster(t, 3)
	phases, err := Failover(context.Background(), c, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 3 {
		t.Fatalf("phases %+v", phases)
	}
	first := Highest(c.Nodes)
	if phases[0].Leader != first || phases[1].Leader != Highest(Except(c.Nodes, first)) || phases[2].Leader != first {
		t.Errorf("leaders %v %v %v", phases[0].Leader, phases[1].Leader, phases[2].Leader)
	}
	if !(phases[0].Epoch < phases[1].Epoch && phases[1].Epoch < phases[2].Epoch) {
		t.Errorf("epochs not increasing: %+v", phases)
	}
}

func TestCloseKillsAndRemovesOwnDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Launch(ctx, Spec{Binary: binary, Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	pids := c.pids()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d survives Close", pid)
		}
	}
	if _, err := os.Stat(c.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir %s not removed: %v", c.Dir, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartReportsNodeFailure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Launch(ctx, Spec{Binary: binary, Nodes: 1, Dir: t.TempDir(), NodeArgs: []string{"--heartbeat", "nonsense"}})
	if err == nil {
		t.Fatal("cluster with a bad flag started")
	}
	if want := `--heartbeat: "nonsense" is not a duration`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not quote the node's own error %q", err, want)
	}
}

// The nodes run with a cluster key Launch writes in Dir, or with none when
// NodeArgs ask for --insecure.
func TestClusterKey(t *testing.T) {
	cmdline := func(t *testing.T, pid int) []string {
		t.Helper()
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	t.Run("key", func(t *testing.T) {
		c := startCluster(t, 1)
		if c.KeyFile != filepath.Join(c.Dir, node.ClusterKeyFileName) {
			t.Fatalf("KeyFile %q", c.KeyFile)
		}
		if _, err := wire.ReadKeyFile(c.KeyFile); err != nil {
			t.Fatal(err)
		}
		argv := cmdline(t, c.Nodes[0].PID())
		if i := slices.Index(argv, "--cluster-key"); i < 0 || i+1 >= len(argv) || argv[i+1] != c.KeyFile {
			t.Errorf("node runs %q, without --cluster-key %s", argv, c.KeyFile)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		dir := t.TempDir()
		c, err := Launch(ctx, Spec{Binary: binary, Nodes: 1, Dir: dir, NodeArgs: []string{"--insecure"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.KeyFile != "" {
			t.Errorf("KeyFile %q with --insecure", c.KeyFile)
		}
		if _, err := os.Lstat(filepath.Join(dir, node.ClusterKeyFileName)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a key file was written for --insecure nodes: %v", err)
		}
		if argv := cmdline(t, c.Nodes[0].PID()); slices.Contains(argv, "--cluster-key") {
			t.Errorf("insecure node runs %q", argv)
		}
	})
}

// Each node accepts peers on the socket Launch bound for it before any
// node started, at the address the peers file lists; a node restarted
// after another process took its port fails to start, naming the address.
func TestListenersBoundBeforeStart(t *testing.T) {
	c := startCluster(t, 2)
	peers, err := os.ReadFile(c.PeersFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		if !strings.Contains(string(peers), n.ID.String()+" "+n.Addr) {
			t.Errorf("peers file does not list %s at %s:\n%s", n, n.Addr, peers)
		}
		if s, err := c.Status(ctx, n); err != nil || s.Addr != n.Addr {
			t.Errorf("%s says it is at %v (%v), want %s", n, s, err, n.Addr)
		}
	}
	n := c.Nodes[0]
	if err := c.Kill(n); err != nil {
		t.Fatal(err)
	}
	// The port is free once the node is gone: take it here (unless
	// another process did already, which serves as well).
	if ln, err := net.Listen("tcp", n.Addr); err == nil {
		defer ln.Close()
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("the port of the killed node: %v", err)
	}
	if err := c.Restart(ctx, n); err == nil || !strings.Contains(err.Error(), "at its address "+n.Addr+": ") {
		t.Errorf("restart of %s with its port taken: %v, want an error naming %s", n, err, n.Addr)
	}
}
