package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
)

// Run is the testbed's name.
func (sp *Span) Run() string { return sp.run }

// Nodes returns the node names in topology order.
func (sp *Span) Nodes() []string {
	names := make([]string, len(sp.topo.Nodes))
	for i, n := range sp.topo.Nodes {
		names[i] = n.Name
	}
	return names
}

// Status reads every host's nodes from its agent, in topology order. A
// host that does not answer has its nodes reported unreachable, with its
// error, and the error returned too.
func (sp *Span) Status() ([]lab.NodeState, error) {
	all := make([][]lab.NodeState, len(sp.agents))
	errs := make([]error, len(sp.agents))
	var wg sync.WaitGroup
	for k := range sp.agents {
		wg.Go(func() { all[k], errs[k] = sp.hostStatus(k) })
	}
	wg.Wait()
	var out []lab.NodeState
	for _, nodes := range all {
		out = append(out, nodes...)
	}
	slices.SortFunc(out, func(a, b lab.NodeState) int { return sp.cmpNodes(a.Node, b.Node) })
	return out, errors.Join(errs...)
}

// StateUnreachable is the state of a node whose host's agent did not
// answer.
const StateUnreachable = "unreachable"

func (sp *Span) hostStatus(k int) ([]lab.NodeState, error) {
	a, _ := sp.host(k)
	var err error
	if a == nil {
		err = fmt.Errorf("host %s: not connected", sp.topo.Hosts[k].Name)
	}
	var st ShareStatus
	if err == nil {
		st, err = a.Status()
	}
	var nodes []lab.NodeState
	if err == nil {
		if err = json.Unmarshal(st.Nodes, &nodes); err != nil {
			err = fmt.Errorf("host %s: agent: status: %v", sp.topo.Hosts[k].Name, err)
		}
	}
	if err != nil {
		for _, n := range sp.topo.Hosts[k].Nodes {
			nodes = append(nodes, lab.NodeState{Node: n, Host: sp.topo.Hosts[k].Name, State: StateUnreachable, Error: err.Error()})
		}
		return nodes, err
	}
	for i := range nodes {
		nodes[i].Host = sp.topo.Hosts[k].Name
	}
	sp.noteHealth(k, st)
	return nodes, nil
}

// HostFiles returns, by host, its shared host processes and the most
// files each held open so far (lab.Lab.HostFiles): one process's limit on
// open files is what its nodes share. A host whose agent does not answer
// has none, and its error is returned.
func (sp *Span) HostFiles() ([][]lab.HostFiles, error) {
	out := make([][]lab.HostFiles, len(sp.agents))
	err := sp.each(func(k int, a *Agent) error {
		st, err := a.Status()
		if err != nil || len(st.Files) == 0 {
			return err
		}
		if err := json.Unmarshal(st.Files, &out[k]); err != nil {
			return fmt.Errorf("host %s: agent: status: files: %v", sp.topo.Hosts[k].Name, err)
		}
		return nil
	})
	return out, err
}

// RunStatus is the span's status as a control API serves it: every
// node, each with its host, and the leader they agree on.
func (sp *Span) RunStatus() lab.RunStatus {
	st := sp.NodeStates()
	rs := lab.RunStatus{Run: sp.run, Topology: sp.topo.Name, PID: os.Getpid(), Started: sp.times.Begin,
		Backend: "each host's", BackendWhy: "the hosts' agents probe their own kernels", Nodes: st}
	if ag, ok := lab.Agreement(st); ok {
		ag.At = time.Now()
		ag.ID, _ = sp.ID(ag.Node)
		rs.Leader = &ag
	}
	return rs
}

// noteHealth keeps what host k said of its nodes' failures and delayers,
// for Failed and DelayerStats after the share is gone.
func (sp *Span) noteHealth(k int, st ShareStatus) {
	var delayers map[string]netem.DelayerStats
	if len(st.Delayers) > 0 {
		_ = json.Unmarshal(st.Delayers, &delayers)
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.failed == nil {
		sp.failed = make([][]ShareFailure, len(sp.topo.Hosts))
	}
	sp.failed[k] = st.Failed
	if sp.delayers == nil {
		sp.delayers = map[string]netem.DelayerStats{}
	}
	maps.Copy(sp.delayers, delayers)
}

// NodeStates is Status without its error: the nodes of a host that did
// not answer are unreachable.
func (sp *Span) NodeStates() []lab.NodeState {
	st, _ := sp.Status()
	return st
}

// Failed returns the nodes that stopped with no fault stopping them, as
// their hosts last said; after Close, as they said before it.
func (sp *Span) Failed() []lab.NodeFailure {
	if !sp.closed() {
		sp.Status()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []lab.NodeFailure
	for _, h := range sp.failed {
		for _, f := range h {
			out = append(out, lab.NodeFailure{Node: f.Node, Reason: f.Reason})
		}
	}
	slices.SortFunc(out, func(a, b lab.NodeFailure) int { return sp.cmpNodes(a.Node, b.Node) })
	return out
}

// DelayerStats returns the NFQUEUE delayers' counters by node, as their
// hosts last said; they stay readable after Close.
func (sp *Span) DelayerStats() map[string]netem.DelayerStats {
	if !sp.closed() {
		sp.Status()
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return maps.Clone(sp.delayers)
}

// network asks the first host that answers what the impairments do:
// every host's lab knows them all.
func (sp *Span) network() ShareNetwork {
	for _, a := range sp.hosts() {
		if a == nil {
			continue
		}
		if nw, err := a.Network(); err == nil {
			return nw
		}
	}
	return ShareNetwork{}
}

// MaxDelay returns the largest one-way delay, jitter included, that the
// impairments in force give a packet between two nodes.
func (sp *Span) MaxDelay() time.Duration { return sp.network().MaxDelay }

// Lossy reports whether the impairments in force lose packets between
// any two nodes.
func (sp *Span) Lossy() bool { return sp.network().Lossy }

// spanPoll is how often waits read the nodes: each read is a round trip
// to every host, and its nodes' control sockets.
const spanPoll = 10 * time.Millisecond

// WaitLeader waits until every live node agrees on a leader that pred
// (nil accepts any) accepts, as lab.Monitor.WaitLeader does.
func (sp *Span) WaitLeader(ctx context.Context, pred func(lab.Leader) bool) (lab.Leader, error) {
	return sp.WaitLeaderAmong(ctx, nil, pred)
}

// WaitLeaderAmong is WaitLeader over the live nodes among names (all when
// empty), such as one side of a partition.
func (sp *Span) WaitLeaderAmong(ctx context.Context, names []string, pred func(lab.Leader) bool) (lab.Leader, error) {
	for _, n := range names {
		if _, ok := sp.hostOf[n]; !ok {
			return lab.Leader{}, fmt.Errorf("run %s has no node %q", sp.run, n)
		}
	}
	tick := time.NewTicker(spanPoll)
	defer tick.Stop()
	var last []lab.NodeState
	for {
		st, err := sp.Status()
		if err == nil {
			if len(names) > 0 {
				st = slices.DeleteFunc(st, func(s lab.NodeState) bool { return !slices.Contains(names, s.Node) })
			}
			if ag, ok := lab.Agreement(st); ok && (pred == nil || pred(ag)) {
				ag.At = time.Now()
				ag.ID, _ = sp.ID(ag.Node)
				return ag, nil
			}
		}
		last = st
		select {
		case <-ctx.Done():
			return lab.Leader{}, fmt.Errorf("%w: %s", lab.ErrNoLeader, describeStates(last, err))
		case <-tick.C:
		}
	}
}

// describeStates says in one line what the nodes last said.
func describeStates(st []lab.NodeState, err error) string {
	if err != nil {
		return err.Error()
	}
	count := map[string]int{}
	var order []string
	for _, s := range st {
		v := s.State
		if s.State == lab.ProcRunning {
			v = fmt.Sprintf("%s leader %s epoch %d", s.Status, s.Leader, s.Epoch)
		}
		if count[v] == 0 {
			order = append(order, v)
		}
		count[v]++
	}
	out := ""
	for i, v := range order {
		if i > 0 {
			out += "; "
		}
		out += fmt.Sprintf("%d: %s", count[v], v)
	}
	return out
}
