//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies/fault"
)

// Process states of a lab node, as NodeState.State reports them.
const (
	ProcRunning = "running"
	ProcPaused  = "paused"  // SIGSTOPped by a pause fault
	ProcCrashed = "crashed" // SIGKILLed by a crash fault
	ProcExited  = "exited"  // ended by itself: after a leave fault, or failing
)

// nodeProc is a node's running incarnation: its own process
// (*netem.Process), or a node in one of the lab's shared hosts
// (*hostedProc).
type nodeProc interface {
	PID() int
	Done() <-chan struct{}
}

// nodeRun is a node's process as its lab knows it.
type nodeRun struct {
	proc    nodeProc
	crashed bool // ended by a crash fault, not by itself
	left    bool // ended by itself after a leave fault
	join    bool // the next start announces the node with JOIN
	hold    bool // the next start holds the node's boot election (bootAll)
	paused  bool
	// clock is the skew a clock fault gave the node's host clock at
	// clockSet; every start of the node gets it, drifted since.
	clock    fault.ClockSkew
	clockSet time.Time
}

// nodeProcs boots a lab's nodes and starts, kills, pauses and resumes
// their processes: one each, or all in shared hosts.
type nodeProcs struct {
	*roster
	tb    *netem.Testbed
	opts  BootOptions
	ctx   context.Context // the lab's: ends when Close begins, aborting waits
	hosts []*sharedHost   // run the nodes when the topology's hosting is shared (HostProcessOf)
	tmpfs bool            // mounted a tmpfs on DataRoot(run)
	times Times

	// Set when the nodes boot while the testbed is built: nodeBuilt[i] is
	// closed once node i's part is, built once all of it is or the build
	// failed, with buildErr (written before built is closed).
	nodeBuilt []chan struct{}
	built     chan struct{}
	buildErr  error

	// watches read the nodes' event logs from before a held boot
	// started them, by node (startHeld), for settle.
	watches []*eventWatch

	mu     sync.Mutex // guards closed and every node's run
	closed bool       // Close has begun: no process starts any more
}

// stateLocked returns n's process state; ps.mu must be held.
func (ps *nodeProcs) stateLocked(n *labNode) string {
	if n.run.proc == nil {
		return ProcExited
	}
	select {
	case <-n.run.proc.Done():
		if n.run.crashed {
			return ProcCrashed
		}
		return ProcExited
	default:
	}
	if n.run.paused {
		return ProcPaused
	}
	return ProcRunning
}

// isClosed reports whether Close has begun.
func (ps *nodeProcs) isClosed() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.closed
}

// refuse returns the first error why gives one of nodes, which it sees
// with its process state.
func (ps *nodeProcs) refuse(nodes []*labNode, why func(n *labNode, state string) error) error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, n := range nodes {
		if err := why(n, ps.stateLocked(n)); err != nil {
			return err
		}
	}
	return nil
}

// running returns the nodes of set whose processes run.
func (ps *nodeProcs) running(set []*labNode) []*labNode {
	var live []*labNode
	ps.mu.Lock()
	for _, n := range set {
		if ps.stateLocked(n) == ProcRunning {
			live = append(live, n)
		}
	}
	ps.mu.Unlock()
	return live
}

// failed returns the nodes that were started and have exited by
// themselves: not crashed, and not after a leave fault.
func (ps *nodeProcs) failed() []*labNode {
	var out []*labNode
	ps.mu.Lock()
	for _, n := range ps.nodes {
		if n.run.proc != nil && !n.run.left && ps.stateLocked(n) == ProcExited {
			out = append(out, n)
		}
	}
	ps.mu.Unlock()
	return out
}

// setClock records skew as the clock of nodes' hosts from at, for their
// next starts.
func (ps *nodeProcs) setClock(nodes []*labNode, skew fault.ClockSkew, at time.Time) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, n := range nodes {
		n.run.clock, n.run.clockSet = skew, at
	}
}

// clockLocked is the skew n starts with now: the one its clock fault set,
// with the offset it drifted to since. ps.mu must be held.
func (ps *nodeProcs) clockLocked(n *labNode, now time.Time) fault.ClockSkew {
	c := n.run.clock
	if c.RatePPM != 0 {
		c.Offset += time.Duration(float64(now.Sub(n.run.clockSet)) * c.RatePPM / 1e6)
	}
	return c
}

// clockArgs are the flags that start a node on skew.
func clockArgs(skew fault.ClockSkew) []string {
	if skew == (fault.ClockSkew{}) {
		return nil
	}
	return []string{"--clock-offset", skew.Offset.String(), "--clock-rate", strconv.FormatFloat(skew.RatePPM, 'g', -1, 64)}
}

// crash SIGKILLs the nodes' processes, or has the shared host kill them,
// waits until they are gone, and says how.
func (ps *nodeProcs) crash(nodes []*labNode) (string, error) {
	var procs []*netem.Process
	var hosted []*labNode
	ps.mu.Lock()
	for _, n := range nodes {
		if p, ok := n.run.proc.(*netem.Process); ok {
			procs = append(procs, p)
		} else {
			hosted = append(hosted, n)
		}
		n.run.crashed = true
	}
	ps.mu.Unlock()
	if len(hosted) > 0 {
		pids, err := ps.hostAll(hostKill, hosted)
		if err != nil {
			return "", err
		}
		how := fmt.Sprintf("killed in %s, as SIGKILL would its own process", hostProcessesText(pids))
		for _, n := range nodes {
			// The host reports the end after the kill's answer.
			select {
			case <-n.run.proc.Done():
			case <-time.After(10 * time.Second):
				return "", fmt.Errorf("node %s still running 10s after the shared host killed it", n.name)
			}
		}
		return how, nil
	}
	pids := make([]string, len(procs))
	for i, p := range procs {
		pids[i] = strconv.Itoa(p.PID())
	}
	if err := netem.KillAll(procs); err != nil {
		return "", err
	}
	return "SIGKILL to process " + strings.Join(pids, ", "), nil
}

// restart starts crashed or exited nodes again, announcing themselves with
// JOIN when join is set, waits until their control sockets answer, and
// says how.
func (ps *nodeProcs) restart(ctx context.Context, nodes []*labNode, join bool) (string, error) {
	ps.mu.Lock()
	for _, n := range nodes {
		n.run.join = join
	}
	ps.mu.Unlock()
	if err := ps.boot(ctx, nodes, false); err != nil {
		return "", err
	}
	var how string
	if ps.hosts != nil {
		how = "in " + hostProcessesText(ps.hostPIDs(nodes))
	} else {
		var pids []string
		ps.mu.Lock()
		for _, n := range nodes {
			pids = append(pids, strconv.Itoa(n.run.proc.PID()))
		}
		ps.mu.Unlock()
		how = "as process " + strings.Join(pids, ", ")
	}
	if join {
		how = "with --join " + how
	}
	return "started " + how + "; control sockets answering", nil
}

// signal SIGSTOPs (pause) or SIGCONTs the nodes' process groups, returns
// once the kernel reports them stopped or running again, and says how.
func (ps *nodeProcs) signal(nodes []*labNode, pause bool) (string, error) {
	if ps.hosts != nil {
		return ps.hostSignal(nodes, pause)
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	var pids []string
	for _, n := range nodes {
		p := n.run.proc.(*netem.Process)
		if err := p.Signal(sig); err != nil {
			return "", err
		}
		ps.mu.Lock()
		n.run.paused = pause
		ps.mu.Unlock()
		pids = append(pids, strconv.Itoa(p.PID()))
	}
	for _, n := range nodes {
		if err := n.run.proc.(*netem.Process).WaitStopped(ps.ctx, pause); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%v to process group %s", sig, strings.Join(pids, ", ")), nil
}

// awaitLeft waits until nodes that were asked to leave have exited, so
// that their state (exited) is right when it returns.
func (ps *nodeProcs) awaitLeft(nodes []*labNode) error {
	for _, n := range nodes {
		select {
		case <-n.run.proc.Done():
		case <-time.After(5 * time.Second):
			return fmt.Errorf("node %s did not exit 5s after leaving", n.name)
		}
		ps.mu.Lock()
		n.run.left = true
		ps.mu.Unlock()
	}
	return nil
}

// close marks the processes closed, so that none starts any more, and
// returns the node processes to kill.
func (ps *nodeProcs) close() []*netem.Process {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	var procs []*netem.Process
	for _, n := range ps.nodes {
		if p, ok := n.run.proc.(*netem.Process); ok {
			procs = append(procs, p)
		}
	}
	return procs
}

// kill SIGKILLs procs and the shared hosts, for Close.
func (ps *nodeProcs) kill(procs []*netem.Process) error {
	errs := []error{netem.KillAll(procs)}
	for _, h := range ps.hosts {
		errs = append(errs, h.kill())
	}
	return errors.Join(errs...)
}

// unmount removes the tmpfs prepare mounted, for Close.
func (ps *nodeProcs) unmount() error {
	if !ps.tmpfs {
		return nil
	}
	return netem.Unmount(DataRoot(ps.run))
}
