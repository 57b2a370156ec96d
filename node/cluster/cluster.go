// Package cluster starts, queries and kills local clusters of `bullylab
// node` processes on loopback, for the demo and the end-to-end tests.
package cluster

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// PollInterval is how often waits query the nodes' control sockets; it is
// the resolution of every time the package measures.
const PollInterval = 5 * time.Millisecond

// Spec describes the cluster Launch runs.
type Spec struct {
	// Binary is the bullylab executable to run as `Binary node ...`.
	Binary string
	// Nodes is the cluster size.
	Nodes int
	// Dir holds the peers file, each node's data dir and log. If empty, a
	// new temporary dir is used and removed by Close.
	Dir string
	// NodeArgs are extra flags for every node, such as timeouts. With
	// --insecure among them the nodes get no cluster key.
	NodeArgs []string
	// Key is the cluster key the nodes share; nil draws a new one. Launch
	// writes it to Dir/cluster.key (mode 0600) for the nodes'
	// --cluster-key.
	Key *wire.Key
	// MemberKeys gives each node a member key of its own (Process.KeyFile,
	// --member-key) and the peers file their public keys, so that the
	// nodes accept only HELLOs signed by their senders.
	MemberKeys bool
	// Env is added to the nodes' environment, which is otherwise this
	// process's: GOMAXPROCS=2, say, to measure a node as it ran before
	// it took one P by default.
	Env []string
	// StartTimeout bounds the wait for a node's control socket after it is
	// started. Default 10s.
	StartTimeout time.Duration
}

// Process is one node process of a Cluster.
type Process struct {
	Index   int // 1-based, as in the names n1, n2, ...
	ID      uuid.UUID
	Addr    string
	DataDir string
	Control string
	LogPath string
	// KeyFile is the node's member key file, in the cluster's Dir; "" when
	// the nodes have none (Spec.MemberKeys).
	KeyFile   string
	publicKey ed25519.PublicKey

	client *node.ControlClient
	proc   *proc // nil while not running
}

func (n *Process) String() string { return fmt.Sprintf("n%d(%s)", n.Index, n.ID.String()[:8]) }

// PID returns the node's process ID, or 0 if it is not running.
func (n *Process) PID() int {
	if n.proc == nil {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// Running reports whether the node's process was started and has not been
// seen to exit.
func (n *Process) Running() bool {
	if n.proc == nil {
		return false
	}
	select {
	case <-n.proc.exited:
		return false
	default:
		return true
	}
}

type proc struct {
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
}

// Cluster is a set of node processes sharing one peers file. Its methods are
// not safe for concurrent use, except Close.
type Cluster struct {
	Dir       string
	PeersFile string
	// KeyFile is the nodes' cluster key file, in Dir; "" when the nodes
	// run with --insecure.
	KeyFile string
	Nodes   []*Process
	// StartedAt is when the first node process of the final attempt was
	// started: the origin of the boot convergence time.
	StartedAt time.Time

	opts   Spec
	ownDir bool
	mu     sync.Mutex // guards the procs against Close from another goroutine
	closed bool
}

// Launch starts opts.Nodes node processes on free loopback ports and waits
// until every control socket answers. On error nothing is left running.
// The ports are bound here, at port 0, before any node starts, and each
// node inherits its listening socket (--listen-fd): no other process can
// take a port between its choice and the node's start.
func Launch(ctx context.Context, opts Spec) (*Cluster, error) {
	if opts.Nodes < 1 {
		return nil, fmt.Errorf("cluster: need at least 1 node, got %d", opts.Nodes)
	}
	if opts.Binary == "" {
		return nil, errors.New("cluster: no bullylab binary given")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	c := &Cluster{opts: opts, Dir: opts.Dir}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "bullylab-")
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		c.Dir, c.ownDir = dir, true
	}
	c.PeersFile = filepath.Join(c.Dir, "peers")
	if !slices.Contains(opts.NodeArgs, "--insecure") {
		if err := c.writeKey(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range opts.Nodes {
		dataDir := filepath.Join(c.Dir, fmt.Sprintf("n%d", i+1))
		ctl := filepath.Join(dataDir, node.ControlSocketName)
		c.Nodes = append(c.Nodes, &Process{
			Index:   i + 1,
			ID:      uuid.New(),
			DataDir: dataDir,
			Control: ctl,
			LogPath: filepath.Join(c.Dir, fmt.Sprintf("n%d.log", i+1)),
			client:  node.NewControlClient(ctl),
		})
	}
	if opts.MemberKeys {
		if err := c.writeMemberKeys(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.startAll(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// writeMemberKeys gives each node a member key, in its own file in Dir.
func (c *Cluster) writeMemberKeys() error {
	for _, n := range c.Nodes {
		priv, err := wire.NewMemberKey()
		if err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		path := filepath.Join(c.Dir, fmt.Sprintf("n%d.key", n.Index))
		if err := wire.WriteMemberKeyFile(path, priv); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		n.KeyFile, n.publicKey = path, priv.Public().(ed25519.PublicKey)
	}
	return nil
}

// writeKey writes the nodes' cluster key file.
func (c *Cluster) writeKey() error {
	var k wire.Key
	if c.opts.Key != nil {
		k = *c.opts.Key
	} else {
		var err error
		if k, err = wire.NewKey(); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	path := filepath.Join(c.Dir, node.ClusterKeyFileName)
	if err := wire.WriteKeyFile(path, k); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.KeyFile = path
	return nil
}

func (c *Cluster) startAll(ctx context.Context) error {
	lns := make([]*net.TCPListener, len(c.Nodes))
	defer func() {
		// The nodes hold their own copies.
		for _, ln := range lns {
			if ln != nil {
				ln.Close()
			}
		}
	}()
	members := make([]wire.Member, len(c.Nodes))
	var keys map[uuid.UUID]ed25519.PublicKey
	for i, n := range c.Nodes {
		if n.publicKey != nil {
			if keys == nil {
				keys = make(map[uuid.UUID]ed25519.PublicKey)
			}
			keys[n.ID] = n.publicKey
		}
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return fmt.Errorf("cluster: %s: listening on a free port: %w", n, err)
		}
		lns[i] = ln
		n.Addr = ln.Addr().String()
		members[i] = wire.Member{ID: n.ID, Addr: n.Addr}
		// A node must not inherit state from one that ran in Dir before
		// with other peers' addresses.
		if err := os.RemoveAll(n.DataDir); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	var buf bytes.Buffer
	if err := node.FormatPeersKeys(&buf, members, keys); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := os.WriteFile(c.PeersFile, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.StartedAt = time.Now()
	for i, n := range c.Nodes {
		if err := c.spawn(n, lns[i]); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := c.waitUp(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// spawn starts n's process, accepting peers on ln, which it inherits; the
// caller closes its own ln.
func (c *Cluster) spawn(n *Process, ln *net.TCPListener) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("cluster: closed")
	}
	if n.Running() {
		return fmt.Errorf("cluster: %s is already running (pid %d)", n, n.PID())
	}
	if err := os.MkdirAll(n.DataDir, 0o700); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	lf, err := ln.File()
	if err != nil {
		logf.Close()
		return fmt.Errorf("cluster: %s: its listening socket: %w", n, err)
	}
	defer lf.Close() // the child has its own copy once started
	args := []string{"node",
		"--id", n.ID.String(),
		"--listen-fd", "3", // ExtraFiles[0]
		"--peers", c.PeersFile,
		"--data-dir", n.DataDir,
		"--control", n.Control,
		"--log", "json",
	}
	if c.KeyFile != "" {
		args = append(args, "--cluster-key", c.KeyFile)
	}
	if n.KeyFile != "" {
		args = append(args, "--member-key", n.KeyFile)
	}
	args = append(args, c.opts.NodeArgs...)
	cmd := exec.Command(c.opts.Binary, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{lf}
	cmd.SysProcAttr = sysProcAttr()
	if len(c.opts.Env) > 0 {
		cmd.Env = append(os.Environ(), c.opts.Env...)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start %s: %w", n, err)
	}
	p := &proc{cmd: cmd, log: logf, exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	n.proc = p
	return nil
}

// waitUp polls n's control socket until it answers, n exits, or the start
// timeout passes.
func (c *Cluster) waitUp(ctx context.Context, n *Process) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		if _, err := n.client.Status(ctx); err == nil {
			return nil
		}
		select {
		case <-n.proc.exited:
			return fmt.Errorf("cluster: %s exited at start: %s", n, c.LogTail(n, 3))
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s: control socket not up after %v", n, c.opts.StartTimeout)
		case <-tick.C:
		}
	}
}

// LogTail returns the last lines of n's log, joined by " | ", for error
// messages.
func (c *Cluster) LogTail(n *Process, lines int) string {
	b, _ := os.ReadFile(n.LogPath)
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(ls[max(0, len(ls)-lines):], " | ")
}

// Status queries n's control socket.
func (c *Cluster) Status(ctx context.Context, n *Process) (*node.NodeStatus, error) {
	return n.client.Status(ctx)
}

// Client returns the control client of n.
func (c *Cluster) Client(n *Process) *node.ControlClient { return n.client }

// Kill sends SIGKILL to n's process by PID and waits until it has exited.
func (c *Cluster) Kill(n *Process) error {
	c.mu.Lock()
	p := n.proc
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("cluster: %s is not running", n)
	}
	if err := syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("cluster: kill %s: %w", n, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("cluster: %s (pid %d) did not exit after SIGKILL", n, p.cmd.Process.Pid)
	}
}

// Restart starts n again with the same ID, address and data dir, and waits
// until its control socket answers. The address is bound again here: it
// fails, naming it, if another process took the port while n was down.
func (c *Cluster) Restart(ctx context.Context, n *Process) error {
	if n.Running() {
		return fmt.Errorf("cluster: %s is still running", n)
	}
	addr, err := net.ResolveTCPAddr("tcp", n.Addr)
	if err != nil {
		return fmt.Errorf("cluster: restart %s: %w", n, err)
	}
	ln, err := net.ListenTCP("tcp", addr)
	if err != nil {
		return fmt.Errorf("cluster: restart %s at its address %s: %w", n, n.Addr, err)
	}
	err = c.spawn(n, ln)
	ln.Close()
	if err != nil {
		return err
	}
	return c.waitUp(ctx, n)
}

// Highest returns the node with the highest ID among nodes: the one Bully
// elects.
func Highest(nodes []*Process) *Process {
	var h *Process
	for _, n := range nodes {
		if h == nil || election.Less(h.ID, n.ID) {
			h = n
		}
	}
	return h
}

// Except returns nodes without x.
func Except(nodes []*Process, x *Process) []*Process {
	return slices.DeleteFunc(slices.Clone(nodes), func(n *Process) bool { return n == x })
}

// ErrNoAgreement is wrapped by WaitAgree's error when its context ends first.
var ErrNoAgreement = errors.New("no agreement")

// WaitAgree polls nodes until every one is Normal and follows leader at the
// same epoch, greater than after, and returns that epoch. The context's
// deadline bounds the wait; the error then describes each node's last view.
func (c *Cluster) WaitAgree(ctx context.Context, nodes []*Process, leader *Process, after uint64) (uint64, error) {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	views := make([]string, len(nodes))
	for {
		epoch, agreed := uint64(0), true
		for i, n := range nodes {
			s, err := n.client.Status(ctx)
			if err != nil {
				views[i] = fmt.Sprintf("%s: %v", n, err)
				agreed = false
				continue
			}
			views[i] = fmt.Sprintf("%s %s leader=%s epoch=%d", n, s.Status, s.Leader.String()[:8], s.Epoch)
			if i == 0 {
				epoch = s.Epoch
			}
			if !s.Agrees(leader.ID, epoch) || s.Epoch <= after {
				agreed = false
			}
		}
		if agreed {
			return epoch, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w on leader %s: %s", ErrNoAgreement, leader, strings.Join(views, "; "))
		case <-tick.C:
		}
	}
}

func (c *Cluster) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if p := n.proc; p != nil {
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
	}
}

// Close kills every process the cluster started (by PID) and removes the
// dir if Launch created it. It is safe to call more than once, and from
// another goroutine than the one using the cluster.
func (c *Cluster) Close() error {
	c.killAll()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.ownDir {
		return os.RemoveAll(c.Dir)
	}
	return nil
}
