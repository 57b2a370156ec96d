//go:build linux

package netem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Process is a process started in a node namespace by (*Testbed).Start.
// Signals go to its process group, so children it forks share its fate.
type Process struct {
	Node string
	Argv []string
	Log  string // where stdout and stderr go

	tb   *Testbed
	cmd  *exec.Cmd
	ref  ProcRef
	done chan struct{}

	mu     sync.Mutex
	exited bool // set before the process is reaped, under mu

	state   *os.ProcessState
	waitErr error
}

// LogPath is where Start writes node's output when given no path. Close
// removes it with the state directory.
func LogPath(run, node string) string {
	return filepath.Join(StateDir(run), "logs", node+".log")
}

// KeyPath is where a lab keeps its nodes' cluster key: in the run's state
// directory, removed with it by Close and by Clean.
func KeyPath(run string) string { return filepath.Join(StateDir(run), node.ClusterKeyFileName) }

// RecordKeyFile puts path in state.json as the run's cluster key file.
func (tb *Testbed) RecordKeyFile(path string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.state.KeyFile = path
	tb.changedLocked()
	tb.saveLater()
}

// KeyFile returns the cluster key file the run's nodes use, as state.json
// records it: "" for a testbed without a lab.
func (tb *Testbed) KeyFile() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.state.KeyFile
}

// Start starts argv inside node's namespace, with stdout and stderr appended
// to logPath (LogPath(run, node) when empty) and env as the environment
// (this process's when nil). The process gets its own process group, so a
// Ctrl-C meant for the orchestrator does not reach the nodes before the
// orchestrator has torn down in order. Its PID and start time are in
// state.json when Start returns, so that `bullylab clean` can kill it, and
// only it, after a crash.
func (tb *Testbed) Start(node string, argv []string, env []string, logPath string) (*Process, error) {
	return tb.start(node, argv, env, logPath, true)
}

// StartUnflushed is Start, but returns before the process is in
// state.json: for callers starting many at once, which call Flush
// afterwards.
func (tb *Testbed) StartUnflushed(node string, argv []string, env []string, logPath string) (*Process, error) {
	return tb.start(node, argv, env, logPath, false)
}

func (tb *Testbed) start(node string, argv []string, env []string, logPath string, wait bool) (*Process, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("node %s: start: empty command", node)
	}
	ns, err := tb.NamespaceHandle(node)
	if err != nil {
		return nil, err
	}
	if logPath == "" {
		logPath = LogPath(tb.run, node)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("node %s: start: %w", node, err)
	}
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node %s: start: %w", node, err)
	}
	defer f.Close() // the child has its own copy

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	return tb.launch(node, ns, cmd, logPath, wait)
}

// StartHost starts cmd, a process that hosts nodes (their sockets in their
// namespaces, see NamespaceSocket), in this process's namespace, and
// records it as Start does, under label, so that Close and `bullylab
// clean` kill it. logPath names where cmd's output goes, for the record.
func (tb *Testbed) StartHost(label string, cmd *exec.Cmd, logPath string) (*Process, error) {
	return tb.launch(label, netns.None(), cmd, logPath, true)
}

// launch starts cmd in its own process group, in ns unless ns is
// netns.None(), and records it for Close and `bullylab clean`.
func (tb *Testbed) launch(node string, ns netns.NsHandle, cmd *exec.Cmd, logPath string, wait bool) (*Process, error) {
	if !tb.owned {
		return nil, fmt.Errorf("node %s: start: run %s belongs to process %d; only its owner starts recorded processes", node, tb.run, tb.state.Owner.PID)
	}
	tb.life.RLock()
	defer tb.life.RUnlock()
	if tb.closed {
		return nil, fmt.Errorf("node %s: start: testbed %s is closed", node, tb.run)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := cmd.Start
	if ns.IsOpen() {
		start = func() error { return startIn(ns, cmd) }
	}
	if err := start(); err != nil {
		return nil, fmt.Errorf("node %s: starting %s: %w", node, cmd.Path, err)
	}
	p := &Process{
		Node: node,
		Argv: slices.Clone(cmd.Args),
		Log:  logPath,
		tb:   tb,
		cmd:  cmd,
		done: make(chan struct{}),
	}
	p.ref.PID = cmd.Process.Pid
	var err error
	// Not yet reaped, so the PID cannot have been recycled.
	if p.ref.StartTime, err = ProcStartTime(p.ref.PID); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("node %s: reading start time of %d: %w", node, p.ref.PID, err)
	}

	tb.mu.Lock()
	tb.procs[p] = struct{}{}
	tb.state.Processes = append(tb.state.Processes, StateProcess{ProcRef: p.ref, Node: node, Argv: p.Argv, Log: logPath})
	v := tb.changedLocked()
	tb.saveLater()
	if wait {
		err = tb.waitSavedLocked(v)
	}
	tb.mu.Unlock()
	go p.reap()
	if err != nil {
		// The record cannot be kept, so the process is not started.
		// Not Kill: waiting here would hold tb.life while reap needs it.
		_ = p.Signal(syscall.SIGKILL)
		return nil, fmt.Errorf("node %s: recording processes: %w", node, err)
	}
	return p, nil
}

// StartCmd starts a prepared command inside node's namespace without
// recording it; the caller waits for it. A process that outlives the
// testbed is still killed by Close, which kills everything in its
// namespaces.
func (tb *Testbed) StartCmd(node string, cmd *exec.Cmd) error {
	tb.life.RLock()
	defer tb.life.RUnlock()
	if tb.closed {
		return fmt.Errorf("node %s: testbed %s is closed", node, tb.run)
	}
	ns, err := tb.NamespaceHandle(node)
	if err != nil {
		return err
	}
	if err := startIn(ns, cmd); err != nil {
		return fmt.Errorf("node %s: starting %s: %w", node, cmd.Path, err)
	}
	return nil
}

// Exec runs argv in node's namespace with this process's standard input,
// output and error, and waits for it, as `bullylab exec` does.
func (tb *Testbed) Exec(node string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("node %s: exec: empty command", node)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := tb.StartCmd(node, cmd); err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("node %s: %s: %w", node, argv[0], err)
	}
	return nil
}

// startIn forks cmd from a thread switched into ns; the child inherits the
// thread's namespace.
func startIn(ns netns.NsHandle, cmd *exec.Cmd) error {
	return inNamespace(ns, cmd.Start)
}

// StartInNamespace starts cmd in the named network namespace, and in this
// process's namespaces otherwise: unlike ip netns exec, which gives the
// command a mount namespace of its own, where namespaces it names under
// /run/netns would stay invisible to everyone else.
func StartInNamespace(name string, cmd *exec.Cmd) error {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	defer ns.Close()
	return startIn(ns, cmd)
}

// PID returns the process ID.
func (p *Process) PID() int { return p.ref.PID }

// Ref returns the PID with its start time.
func (p *Process) Ref() ProcRef { return p.ref }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns its state. The error is
// about waiting, not about the exit status: a non-zero exit or a signal is
// in the state.
func (p *Process) Wait() (*os.ProcessState, error) {
	<-p.done
	return p.state, p.waitErr
}

// Signal sends sig to the process group. It returns os.ErrProcessDone once
// the process has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Until reap sets exited, the process is at worst a zombie, which keeps
	// its PID and process group ID from being reused.
	if p.exited {
		return os.ErrProcessDone
	}
	if err := syscall.Kill(-p.ref.PID, sig); err != nil {
		return fmt.Errorf("node %s: signalling process group %d: %w", p.Node, p.ref.PID, err)
	}
	return nil
}

// Kill SIGKILLs the process group and waits for the process to be reaped.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	_, err := p.Wait()
	return err
}

// Pause stops the process group (SIGSTOP), like a node that hangs.
func (p *Process) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume continues a paused process group (SIGCONT).
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// WaitStopped polls /proc until the process is stopped (stopped true) or
// runs again (false), or is gone: signals are delivered asynchronously,
// and a caller timing a failover must not start its clock while the node
// still runs. It gives up after 5 s or when ctx ends.
func (p *Process) WaitStopped(ctx context.Context, stopped bool) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := readProcStat(p.PID())
		if err != nil {
			return nil // gone: neither running nor stopped matters any more
		}
		if (st.state == 'T' || st.state == 't') == stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: process %d in state %c 5s after the signal", p.Node, p.PID(), st.state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

func (p *Process) reap() {
	var info unix.Siginfo
	for {
		// WNOWAIT: learn of the exit without reaping, so Signal can rule
		// out a recycled PID before the PID is actually released.
		err := unix.Waitid(unix.P_PID, p.ref.PID, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil
	}
	p.state, p.waitErr = p.cmd.ProcessState, err
	// Forget first, so that a caller returning from Wait sees the record
	// without the process.
	p.tb.forget(p)
	close(p.done)
}

// forget drops an exited process from the record.
func (tb *Testbed) forget(p *Process) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	delete(tb.procs, p)
	tb.state.Processes = slices.DeleteFunc(tb.state.Processes, func(sp StateProcess) bool { return sp.ProcRef == p.ref })
	v := tb.changedLocked()
	tb.saveLater()
	// Many processes ending at once share the writes.
	_ = tb.waitSavedLocked(v)
}
