//go:build linux

package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/election"
	"github.com/google/uuid"
)

const (
	// pollInterval is how often waits query control sockets and process
	// states: the resolution of every time a Lab measures.
	pollInterval = 5 * time.Millisecond
	// queryTimeout bounds one control-socket request; a node that cannot
	// answer in that time counts as not agreeing.
	queryTimeout = 2 * time.Second
	// queryWorkers bounds the concurrent control-socket requests of a poll.
	queryWorkers = 4
)

// Monitor watches a lab's nodes: what each reports, which failed, and
// when they agree on a leader. It keeps nothing of its own: it reads the
// nodes' processes and network, and asks the nodes.
type Monitor struct {
	*roster
	procs *nodeProcs
	net   *network
	ctx   context.Context // the lab's: ends when Close begins
}

// NodeState is one node's row in Status: what the lab did to it and, when
// it answered, what its control socket says.
type NodeState struct {
	Node string `json:"node"`
	// Host is the hosts entry that runs the node, in a testbed across
	// hosts; its Namespace, PID and Log are that host's.
	Host      string    `json:"host,omitempty"`
	Namespace string    `json:"namespace"`
	Addr      string    `json:"addr"` // where peers dial it
	ID        uuid.UUID `json:"id"`
	PID       int       `json:"pid,omitempty"`
	// State is ProcRunning, ProcPaused, ProcCrashed or ProcExited.
	State    string   `json:"state"`
	Isolated bool     `json:"isolated,omitempty"`
	Blocked  []string `json:"blocked,omitempty"` // nodes whose packets it drops
	// Status is the node's election status (normal, electing, halting,
	// waiting); "" when it was not asked (not running) or did not answer.
	Status string `json:"status,omitempty"`
	// Leader names the leader it follows; meaningful while Status is normal.
	Leader   string `json:"leader,omitempty"`
	IsLeader bool   `json:"is_leader,omitempty"`
	Epoch    uint64 `json:"epoch,omitempty"`
	// Backend is the impairment backend of its link, "" while nothing was
	// ever impaired there; fault.Impairment what is in force.
	Backend    string           `json:"backend,omitempty"`
	Impairment string           `json:"impairment,omitempty"`
	Log        string           `json:"log"`
	Error      string           `json:"error,omitempty"` // why Status is empty for a running node
	View       *node.NodeStatus `json:"view,omitempty"`  // the node's answer, without its member list
}

// NodeStates returns every node's state, asking the running ones over their
// control sockets (paused ones cannot answer and are not asked). It asks
// for their status without the member list: each lists every node, so a
// poll of all of them was O(N^2), 80 MB of JSON at 1000 nodes, and the
// bench's wait for a quiet cluster, polling every 50 ms, never saw one.
func (m *Monitor) NodeStates() []NodeState {
	out := make([]NodeState, len(m.nodes))
	// Both parts' locks, in the lock order, so that each row is of one
	// moment.
	m.procs.mu.Lock()
	m.net.mu.Lock()
	for i, n := range m.nodes {
		s := NodeState{Node: n.name, Namespace: n.ns, Addr: n.listen, ID: n.id, Log: n.log,
			State: m.procs.stateLocked(n), Isolated: n.net.isolated}
		if n.run.proc != nil && (s.State == ProcRunning || s.State == ProcPaused) {
			s.PID = n.run.proc.PID()
		}
		for peer := range n.net.blocked {
			s.Blocked = append(s.Blocked, peer)
		}
		slices.SortFunc(s.Blocked, m.cmpNames)
		if n.net.imp != nil {
			s.Backend = n.net.imp.Backend()
		}
		s.Impairment = m.net.describeLocked(n)
		out[i] = s
	}
	m.net.mu.Unlock()
	m.procs.mu.Unlock()
	parallel(len(out), queryWorkers, func(i int) bool {
		s := &out[i]
		if s.State != ProcRunning {
			return true
		}
		// A deadline a request: one for all had a share of 1000 nodes on
		// a loaded host, 250 requests a worker, report most of them
		// failed, the later ones never sent.
		ctx, cancel := context.WithTimeout(m.ctx, queryTimeout)
		v, err := m.nodes[i].client.StatusBrief(ctx)
		cancel()
		if err != nil {
			s.Error = err.Error()
			return true
		}
		s.View = v
		s.Status, s.IsLeader, s.Epoch = v.Status, v.IsLeader, v.Epoch
		if v.Leader != uuid.Nil {
			s.Leader = m.nodeName(v.Leader)
			if s.Leader == "" {
				s.Leader = v.Leader.String()
			}
		}
		return true
	})
	return out
}

// parallel calls f(0..n-1) from up to workers goroutines and stops handing
// out indexes once f returns false; it reports whether every f returned
// true.
func parallel(n, workers int, f func(i int) bool) bool {
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if !f(i) {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return !stop.Load()
}

// NodeFailure is a node that stopped although no fault stopped it.
type NodeFailure struct {
	Node string
	// Reason is the node's last words in its log ("bullylab: ..."),
	// or what the log lacks; or, when the shared host process that ran
	// it exited, that host's name and last words.
	Reason string
}

// Failed returns the nodes, lowest ID first, that were started and have
// exited by themselves: not crashed, and not after a leave fault. A node
// that stops on its own (its state could not be saved, say) is no longer
// measured, and an election among the others is not the one asked for.
func (m *Monitor) Failed() []NodeFailure {
	var out []NodeFailure
	for _, n := range m.procs.failed() {
		reason := m.procs.hostFailure(n)
		if reason == "" {
			reason = lastWords(n.log)
		}
		out = append(out, NodeFailure{Node: n.name, Reason: reason})
	}
	return out
}

// Leader is an agreement WaitLeader observed.
type Leader struct {
	Node  string    `json:"node"`
	ID    uuid.UUID `json:"id"`
	Epoch uint64    `json:"epoch"`
	// At is when the poll that found every node agreeing completed: the
	// agreement happened at most one poll (pollInterval plus the time to
	// ask every node) before.
	At time.Time `json:"at"`
	// Nodes are the nodes that agreed.
	Nodes []string `json:"nodes"`
}

// ErrNoLeader is wrapped by WaitLeader's error when ctx ends first.
var ErrNoLeader = errors.New("no agreed leader")

// WaitLeader polls the control sockets until every live node (not crashed,
// exited or paused; isolated and partitioned nodes count) is Normal and
// follows the same leader at the same epoch, the leader being one of them,
// and pred (nil accepts any) accepts the agreement; it returns that
// agreement. When ctx ends first, the error says what each disagreeing node
// last said.
func (m *Monitor) WaitLeader(ctx context.Context, pred func(Leader) bool) (Leader, error) {
	return m.WaitLeaderAmong(ctx, nil, pred)
}

// WaitLeaderAmong is WaitLeader over the live nodes among names (all nodes
// when names is empty), such as one side of a partition.
func (m *Monitor) WaitLeaderAmong(ctx context.Context, names []string, pred func(Leader) bool) (Leader, error) {
	set := m.nodes
	if len(names) > 0 {
		var err error
		if set, err = m.nodesOf(names); err != nil {
			return Leader{}, err
		}
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	views := make(map[string]string)
	start := 0 // where the last disagreement was: ask it first next time
	for {
		live := m.procs.running(set)
		if len(live) > 0 {
			start %= len(live)
			order := append(slices.Clone(live[start:]), live[:start]...)
			ag, bad, ok := m.agreement(ctx, order, views)
			if ok && (pred == nil || pred(ag)) {
				return ag, nil
			}
			if !ok {
				start = (start + bad) % len(live)
			}
		}
		select {
		case <-ctx.Done():
			return Leader{}, fmt.Errorf("%w among %d live nodes: %s", ErrNoLeader, len(live), summarize(views, live))
		case <-m.ctx.Done():
			return Leader{}, fmt.Errorf("%w: lab %s closed", ErrNoLeader, m.run)
		case <-tick.C:
		}
	}
}

// agreement asks nodes in order, stopping at the first that disagrees with
// the first answer, and returns the agreement, or the position of a node
// that disagreed.
func (m *Monitor) agreement(ctx context.Context, nodes []*labNode, views map[string]string) (Leader, int, bool) {
	type answer struct {
		v   *node.NodeStatus
		err error
	}
	answers := make([]answer, len(nodes))
	var (
		ref    atomic.Pointer[node.NodeStatus]
		badMu  sync.Mutex
		badPos = len(nodes)
	)
	ok := parallel(len(nodes), queryWorkers, func(i int) bool {
		qctx, cancel := context.WithTimeout(ctx, queryTimeout)
		v, err := nodes[i].client.StatusBrief(qctx)
		cancel()
		answers[i] = answer{v, err}
		good := err == nil && v.Status == election.StatusNormal.String() && !v.Left
		if good {
			ref.CompareAndSwap(nil, v)
			r := ref.Load()
			good = v.Leader == r.Leader && v.Epoch == r.Epoch
		}
		if !good {
			badMu.Lock()
			badPos = min(badPos, i)
			badMu.Unlock()
		}
		return good
	})
	for i, a := range answers {
		switch {
		case a.err != nil && ctx.Err() != nil:
			// Cut short by the caller's deadline: the previous view says
			// more than "deadline exceeded".
		case a.err != nil:
			views[nodes[i].name] = a.err.Error()
		case a.v != nil:
			views[nodes[i].name] = fmt.Sprintf("%s leader %s epoch %d", a.v.Status, m.leaderName(a.v.Leader), a.v.Epoch)
		}
	}
	if !ok {
		return Leader{}, badPos, false
	}
	at := time.Now()
	r := ref.Load()
	lead := m.byID[r.Leader]
	if lead == nil || !slices.Contains(nodes, lead) {
		// Everyone follows a node outside the set, such as a leader that
		// was just paused: not an agreement among the live.
		return Leader{}, 0, false
	}
	ag := Leader{Node: lead.name, ID: lead.id, Epoch: r.Epoch, At: at}
	for _, n := range nodes {
		ag.Nodes = append(ag.Nodes, n.name)
	}
	slices.SortFunc(ag.Nodes, m.cmpNames)
	return ag, 0, true
}

func (m *Monitor) leaderName(id uuid.UUID) string {
	if id == uuid.Nil {
		return "none"
	}
	if name := m.nodeName(id); name != "" {
		return name
	}
	return id.String()
}

// summarize renders the last views of nodes on one line: the nodes that
// differ from the most common view by name (at most 8), then the rest.
func summarize(views map[string]string, nodes []*labNode) string {
	if len(nodes) == 0 {
		return "no live node"
	}
	view := func(n *labNode) string {
		if v, ok := views[n.name]; ok {
			return v
		}
		return "not asked yet"
	}
	count := map[string]int{}
	common := ""
	for _, n := range nodes {
		v := view(n)
		count[v]++
		if count[v] > count[common] {
			common = v
		}
	}
	var parts []string
	odd := 0
	for _, n := range nodes {
		if v := view(n); v != common {
			if odd++; odd <= 8 {
				parts = append(parts, n.name+": "+v)
			}
		}
	}
	if odd > 8 {
		parts = append(parts, fmt.Sprintf("%d more like these", odd-8))
	}
	if count[common] == len(nodes) && len(nodes) > 1 {
		parts = append(parts, fmt.Sprintf("all %d: %s", len(nodes), common))
	} else if len(nodes) > 1 {
		parts = append(parts, fmt.Sprintf("%d others: %s", count[common], common))
	} else {
		parts = append(parts, nodes[0].name+": "+common)
	}
	return strings.Join(parts, "; ")
}

// AgreedAt returns when the agreement ag came about, from the nodes' event
// logs: the time the last of ag.Nodes became a Normal follower (or the
// leader) of ag's leader and epoch, for the last time before ag.At. ag.At
// is when a poll saw the agreement, later by the poll's own duration: the
// first control request a node process answers is its slowest, and a
// first poll of 250 nodes took 0.3 s. A node may leave the agreement after
// the poll asked it, before or after ag.At (bullied by a lower node that
// booted just after it): the poll vouches for it having agreed when asked.
// ok is false when a log does not show the node entering the agreement, as
// for a node that restarted into the leader and epoch it had persisted (it
// logs no leader change).
func (m *Monitor) AgreedAt(ag Leader) (at time.Time, ok bool, err error) {
	leader, epoch := ag.ID.String(), ag.Epoch
	for _, name := range ag.Nodes {
		n, err := m.node(name)
		if err != nil {
			return time.Time{}, false, err
		}
		since, ok, err := agreedSince(n.log, leader, epoch, ag.At)
		if err != nil || !ok {
			return time.Time{}, false, err
		}
		if since.After(at) {
			at = since
		}
	}
	return at, !at.IsZero(), nil
}

// agreedSince reads a node's JSON event log and returns when, last before
// until, the node became Normal with leader at epoch; ok is false when it
// did not since its process last started.
func agreedSince(path, leader string, epoch uint64, until time.Time) (since time.Time, ok bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("reading event log: %w", err)
	}
	since, ok, err = AgreedSince(data, leader, epoch, until)
	if err != nil {
		err = fmt.Errorf("event log %s: %w", path, err)
	}
	return since, ok, err
}

// AgreedSince reads a node's JSON event log (Options.LogDir's, or a
// span's, remote.Span.EventLog) and returns when, last before until, the
// node became Normal with leader (its ID) at epoch, in the log's clock;
// ok is false when it did not since its process last started.
func AgreedSince(log []byte, leader string, epoch uint64, until time.Time) (since time.Time, ok bool, err error) {
	var normal, follows, agreed bool
	for line := range bytes.Lines(log) {
		var rec struct {
			Time   string `json:"time"`
			Event  string `json:"event"`
			To     string `json:"to"`
			Leader string `json:"leader"`
			Epoch  uint64 `json:"epoch"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue // not a record: a Go runtime message, say
		}
		at, err := time.Parse(time.RFC3339Nano, rec.Time)
		if err != nil {
			return time.Time{}, false, fmt.Errorf("bad time %q", rec.Time)
		}
		if at.After(until) {
			break
		}
		switch rec.Event {
		case "node_started":
			normal, follows, ok = false, false, false
		case "status":
			normal = rec.To == election.StatusNormal.String()
		case "leader_changed":
			follows = rec.Leader == leader && rec.Epoch == epoch
		default:
			continue
		}
		if now := normal && follows; now != agreed {
			agreed = now
			if agreed {
				since, ok = at, true
			}
		}
	}
	return since, ok, nil
}
