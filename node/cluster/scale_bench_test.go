package cluster

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkBootToLeader starts N node processes on loopback at once and
// measures the boot to an agreed leader, then a steady window of
// heartbeats. It reports per node the CPU (user+sys, from /proc/PID/stat)
// spent from exec until every node agreed (start and boot election
// together), the CPU per second of the steady state, and the leader's own
// steady CPU. Run one size at a time on a shared host:
//
//	go test ./node/cluster -run '^$' -bench 'BootToLeader/n=100/' -benchtime 1x
//
// It stops at 100 (a 250-node run did not come up on a loaded 2-core
// host): booted all at once, every node's ELECTION reaches every
// higher node that is up, and each such pair keeps its connection. At 1000
// nodes that was 255,000 TCP sockets in use and 14 GB of memory, and the
// processes took minutes to exit. The testbed's lab boots the highest node
// first and the rest in ascending order, which keeps about two
// connections per node (netem/lab's BenchmarkLab measures 500 and 1000).
//
// Each size runs twice: "now", and "procs=2" with the nodes' GOMAXPROCS at
// 2, as they ran before a node took one P by default, so that one run
// gives the ratio. -bin runs another build of bullylab instead of this
// one's.
func BenchmarkBootToLeader(b *testing.B) {
	bin := binary
	if *otherBinary != "" {
		bin = *otherBinary
	}
	for _, n := range []int{100} {
		for _, v := range []struct {
			name string
			env  []string
		}{{"now", nil}, {"procs=2", []string{"GOMAXPROCS=2"}}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, v.name), func(b *testing.B) {
				if v := os.Getenv("BULLYLAB_BENCH_MAX_NODES"); v != "" {
					// As netemtest.SkipAboveMaxNodes, which this package cannot import.
					if limit, err := strconv.Atoi(v); err != nil || n > limit {
						b.Skipf("%d nodes: over BULLYLAB_BENCH_MAX_NODES=%s", n, v)
					}
				}
				needFDs(b, n)
				for range b.N {
					bootToLeader(b, Spec{Binary: bin, Nodes: n, Env: v.env})
				}
			})
		}
	}
}

var otherBinary = flag.String("bin", "", "BenchmarkBootToLeader: the bullylab binary to run, instead of one built from this tree")

// BenchmarkNodeStart measures the CPU of one node process from exec until
// its control socket answers, with no peers to elect against: the fixed
// cost every node of a cluster pays.
func BenchmarkNodeStart(b *testing.B) {
	var cpu time.Duration
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := Launch(ctx, Spec{Binary: binary, Nodes: 1, Dir: b.TempDir()})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		cpu += procCPU(b, c.Nodes[0].PID())
		c.Close()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/start")
}

// steadyWindow is how long BenchmarkBootToLeader measures the agreed
// cluster's heartbeats; a longer one leaves time to profile a node.
var steadyWindow = flag.Duration("steady", 3*time.Second, "BenchmarkBootToLeader: how long to measure the agreed cluster's heartbeats")

func bootToLeader(b *testing.B, spec Spec) {
	n := spec.Nodes
	spec.Dir, spec.StartTimeout = b.TempDir(), 2*time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := Launch(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		t0 := time.Now()
		c.Close()
		b.ReportMetric(time.Since(t0).Seconds(), "s/teardown")
	}()
	up := time.Since(c.StartedAt)
	leader := Highest(c.Nodes)
	if err := waitAgreeOnce(ctx, c, leader); err != nil {
		b.Fatal(err)
	}
	agreed := time.Since(c.StartedAt)
	boot := clusterCPU(b, c)
	time.Sleep(*steadyWindow) // the measured window itself, not a synchronisation
	steady := clusterCPU(b, c)
	var bootSum, steadySum time.Duration
	for i := range c.Nodes {
		bootSum += boot[i]
		steadySum += steady[i] - boot[i]
	}
	li := leader.Index - 1
	b.ReportMetric(up.Seconds(), "s/all-up")
	b.ReportMetric(agreed.Seconds(), "s/up-to-leader")
	b.ReportMetric(float64(bootSum.Microseconds())/1e3/float64(n), "cpu-ms/node")
	b.ReportMetric(float64(steadySum.Microseconds())/1e3/float64(n)/(*steadyWindow).Seconds(), "steady-cpu-ms/node/s")
	b.ReportMetric(float64((steady[li]-boot[li]).Microseconds())/1e3/(*steadyWindow).Seconds(), "leader-cpu-ms/s")
}

// waitAgreeOnce waits until every node of c follows leader: it polls only
// the nodes not yet seen agreeing, so that the harness's own status queries
// (a control socket round trip each, paid by the node too) stay O(N) rather
// than O(N) per poll, then checks all of them once more.
func waitAgreeOnce(ctx context.Context, c *Cluster, leader *Process) error {
	pending := c.Nodes
	for len(pending) > 0 {
		var still []*Process
		for _, n := range pending {
			if s, err := n.client.Status(ctx); err != nil || !s.Agrees(leader.ID, s.Epoch) {
				still = append(still, n)
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w on leader %s: %d nodes not following it", ErrNoAgreement, leader, len(still))
		}
		pending = still
	}
	// Every node followed the leader when asked; ask them all again, at
	// one epoch, since one may have left it meanwhile.
	_, err := c.WaitAgree(ctx, c.Nodes, leader, 0)
	return err
}

// clusterCPU reads the user+sys CPU of every node process.
func clusterCPU(b *testing.B, c *Cluster) []time.Duration {
	cpu := make([]time.Duration, len(c.Nodes))
	for i, n := range c.Nodes {
		cpu[i] = procCPU(b, n.PID())
	}
	return cpu
}

// procCPU returns utime+stime of pid from /proc/PID/stat.
func procCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Skipf("no /proc/PID/stat to read a node's CPU: %v", err)
	}
	// Fields after the parenthesised command name, which may hold spaces.
	f := bytes.Fields(raw[bytes.LastIndexByte(raw, ')')+2:])
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	// USER_HZ is 100 on every Linux ABI Go supports.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// needFDs raises this process's open-file limit for a cluster of n nodes,
// or skips: each node holds a connection to and from every other (2n
// descriptors, which a node's Go runtime raises its own soft limit to
// reach), and the harness holds a log file and a control connection per
// node.
func needFDs(b *testing.B, n int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("cannot read the open-file limit: %v", err)
	}
	want := uint64(2*n + 256)
	if lim.Max < want {
		lim.Max = want
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Skipf("the open-file limit cannot be raised to %d for %d nodes: %v", want, n, err)
	}
}
