package remote

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// shareBuildTimeout bounds building a host's share.
const shareBuildTimeout = 5 * time.Minute

// HostShares builds this host's share of a testbed with netem, one at a
// time: an agent serves one controller.
type HostShares struct {
	mu    sync.Mutex
	tb    *netem.Testbed
	topo  *topologies.Topology // the whole topology
	nodes []shareNode          // started, in topology order
	// firewalls cut this host's nodes from others, by node; made on the
	// first partition.
	firewalls map[string]*netem.Firewall
	paused    map[string]bool
}

// shareNode is a node the agent started.
type shareNode struct {
	name    string
	proc    *netem.Process
	control *node.ControlClient
}

var _ Shares = (*HostShares)(nil)

// Build builds r's share: the host's nodes as netem builds any topology,
// its switch joined to the other hosts' by the overlay, and a route to
// every node of another host through that host's switch.
func (s *HostShares) Build(r ShareRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tb != nil {
		return fmt.Errorf("share %s is built already", s.tb.Run())
	}
	topo, err := topologies.Parse(r.Source, r.Topology)
	if err != nil {
		return err
	}
	k := slices.IndexFunc(topo.Hosts, func(h topologies.Host) bool { return h.Name == r.Host })
	if k < 0 {
		return fmt.Errorf("topology %s has no host %q", topo.Name, r.Host)
	}
	if len(r.Switches) != len(topo.Hosts) {
		return fmt.Errorf("%d overlay switches for %d hosts", len(r.Switches), len(topo.Hosts))
	}
	switches, err := parseSwitches(r.Switches)
	if err != nil {
		return err
	}
	share, err := topo.Share(r.Host)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareBuildTimeout)
	defer cancel()
	tb, err := netem.Build(ctx, share, r.Run)
	if err != nil {
		return err
	}
	o := netem.Overlay{Name: r.Run + "vx", VNI: r.VNI, Port: r.Port,
		Local: switches[k].Underlay, Addr: netip.PrefixFrom(switches[k].Addr, OverlayBits), MAC: switches[k].MAC}
	for j, sw := range switches {
		if j != k {
			o.Peers = append(o.Peers, sw)
		}
	}
	var remote []netem.RemoteNode
	for _, n := range topo.Nodes {
		if n.Host != r.Host {
			j := slices.IndexFunc(topo.Hosts, func(h topologies.Host) bool { return h.Name == n.Host })
			remote = append(remote, netem.RemoteNode{Addr: n.Addr, Via: switches[j].Addr})
		}
	}
	if err := tb.JoinOverlay("", o, remote); err != nil {
		tb.Close()
		return err
	}
	if r.Nodes != nil {
		nodes, err := startShareNodes(tb, share, r.Run, *r.Nodes)
		if err != nil {
			tb.Close()
			return err
		}
		s.nodes = nodes
	}
	s.tb, s.topo = tb, topo
	return nil
}

// Partition cuts groups from each other at this host's nodes (see
// Shares); the other hosts' agents do the same at theirs, so each
// direction is dropped at its receiver, as on one host.
func (s *HostShares) Partition(groups [][]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tb == nil {
		return errors.New("no share is built")
	}
	blocks, err := s.blocks(groups)
	if err != nil {
		return err
	}
	if err := s.healLocked(); err != nil {
		return err
	}
	for _, n := range s.tb.Topology().Nodes {
		srcs := blocks[n.Name]
		if len(srcs) == 0 {
			continue
		}
		fw, err := s.firewall(n.Name)
		if err != nil {
			return err
		}
		if err := fw.Block(srcs...); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	return nil
}

// blocks maps each node in groups to the addresses of the nodes of the
// other groups.
func (s *HostShares) blocks(groups [][]string) (map[string][]netip.Addr, error) {
	group := map[string]int{}
	for g, names := range groups {
		for _, name := range names {
			if _, ok := s.topo.Node(name); !ok {
				return nil, fmt.Errorf("partition: unknown node %q", name)
			}
			if prev, ok := group[name]; ok && prev != g {
				return nil, fmt.Errorf("partition: node %s is in two groups", name)
			}
			group[name] = g
		}
	}
	out := map[string][]netip.Addr{}
	for name, g := range group {
		for other, h := range group {
			if h != g {
				n, _ := s.topo.Node(other)
				out[name] = append(out[name], n.Addr)
			}
		}
	}
	return out, nil
}

// firewall is node's, made on first use; s.mu is held.
func (s *HostShares) firewall(name string) (*netem.Firewall, error) {
	if fw := s.firewalls[name]; fw != nil {
		return fw, nil
	}
	ns, err := s.tb.NamespaceHandle(name)
	if err != nil {
		return nil, err
	}
	fw, err := netem.NewFirewall(ns, s.tb.Run())
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	if s.firewalls == nil {
		s.firewalls = map[string]*netem.Firewall{}
	}
	s.firewalls[name] = fw
	return fw, nil
}

// Heal ends the partition at this host's nodes.
func (s *HostShares) Heal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healLocked()
}

func (s *HostShares) healLocked() error {
	var errs []error
	for _, fw := range s.firewalls {
		errs = append(errs, fw.Clear())
	}
	return errors.Join(errs...)
}

// startShareNodes starts a `bullylab node` process of this binary for each
// node of share, in its namespace, its files in the run's state directory,
// which the testbed's Close removes.
func startShareNodes(tb *netem.Testbed, share *topologies.Topology, run string, sn SpanNodes) ([]shareNode, error) {
	bin, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir := netem.StateDir(run)
	peers, keyFile := filepath.Join(dir, "peers.txt"), filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(peers, sn.Peers, 0o644); err != nil {
		return nil, err
	}
	key, err := wire.ParseKey(sn.Key)
	if err != nil {
		return nil, err
	}
	if err := wire.WriteKeyFile(keyFile, key); err != nil {
		return nil, err
	}
	var out []shareNode
	for _, n := range share.Nodes {
		id, ok := sn.IDs[n.Name]
		if !ok {
			return nil, fmt.Errorf("no ID for node %s", n.Name)
		}
		data := filepath.Join(dir, "nodes", n.Name)
		st := n.Settings
		argv := []string{bin, "node", "--id", id,
			"--listen", netip.AddrPortFrom(n.Addr, uint16(share.Port)).String(),
			"--peers", peers, "--data-dir", data, "--cluster-key", keyFile,
			"--heartbeat", st.Heartbeat.String(), "--failure-timeout", st.FailureTimeout.String(),
			"--election-timeout", st.ElectionTimeout.String(), "--detection-stagger", st.DetectionStagger.String(),
			"--log", "json"}
		p, err := tb.StartUnflushed(n.Name, argv, nil, netem.LogPath(run, n.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, shareNode{name: n.Name, proc: p, control: node.NewControlClient(filepath.Join(data, node.ControlSocketName))})
	}
	return out, tb.Flush()
}

// Crash kills node with SIGKILL, as a crash fault does on one host, and
// returns once its process is reaped.
func (s *HostShares) Crash(name string) error {
	return s.signal(name, (*netem.Process).Kill)
}

// pauseWait bounds the wait for a signalled node to stop or continue.
const pauseWait = 10 * time.Second

// Pause stops node with SIGSTOP, as a pause fault does on one host, and
// returns once the kernel shows it stopped.
func (s *HostShares) Pause(name string) error { return s.stopOrContinue(name, true) }

// Resume continues a paused node.
func (s *HostShares) Resume(name string) error { return s.stopOrContinue(name, false) }

func (s *HostShares) stopOrContinue(name string, stop bool) error {
	return s.signal(name, func(p *netem.Process) error {
		send := p.Resume
		if stop {
			send = p.Pause
		}
		if err := send(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), pauseWait)
		defer cancel()
		if err := p.WaitStopped(ctx, stop); err != nil {
			return err
		}
		s.setPaused(name, stop)
		return nil
	})
}

func (s *HostShares) setPaused(name string, paused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused == nil {
		s.paused = map[string]bool{}
	}
	s.paused[name] = paused
}

// signal applies fn to the process of node, one of this host's.
func (s *HostShares) signal(name string, fn func(*netem.Process) error) error {
	s.mu.Lock()
	i := slices.IndexFunc(s.nodes, func(n shareNode) bool { return n.name == name })
	var p *netem.Process
	if i >= 0 {
		p = s.nodes[i].proc
	}
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("node %s does not run on this host", name)
	}
	if err := fn(p); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	return nil
}

// statusTimeout bounds one node's answer to a status request.
const statusTimeout = 2 * time.Second

// Status reads every node the share started from its control socket.
func (s *HostShares) Status() ([]SpanNodeState, error) {
	s.mu.Lock()
	nodes := slices.Clone(s.nodes)
	paused := maps.Clone(s.paused)
	s.mu.Unlock()
	out := make([]SpanNodeState, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			st := SpanNodeState{Node: n.name}
			select {
			case <-n.proc.Done():
				out[i] = st
				return
			default:
				st.Running = true
			}
			if paused[n.name] {
				st.Paused = true // it would not answer
				out[i] = st
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
			defer cancel()
			v, err := n.control.StatusBrief(ctx)
			if err != nil {
				st.Error = err.Error()
			} else {
				st.Status, st.Leader, st.Epoch = v.Status, v.Leader.String(), v.Epoch
			}
			out[i] = st
		})
	}
	wg.Wait()
	return out, nil
}

func parseSwitches(in []OverlaySwitch) ([]netem.OverlayPeer, error) {
	out := make([]netem.OverlayPeer, len(in))
	for i, sw := range in {
		u, err := netip.ParseAddr(sw.Underlay)
		if err != nil {
			return nil, fmt.Errorf("switch %d: underlay: %w", i+1, err)
		}
		a, err := netip.ParseAddr(sw.Addr)
		if err != nil {
			return nil, fmt.Errorf("switch %d: overlay address: %w", i+1, err)
		}
		mac, err := net.ParseMAC(sw.MAC)
		if err != nil {
			return nil, fmt.Errorf("switch %d: %w", i+1, err)
		}
		out[i] = netem.OverlayPeer{Underlay: u, Addr: a, MAC: mac}
	}
	return out, nil
}

// Down tears the share down, if there is one.
func (s *HostShares) Down() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tb == nil {
		return nil
	}
	var errs []error
	for _, fw := range s.firewalls {
		errs = append(errs, fw.Close())
	}
	errs = append(errs, s.tb.Close()) // kills the nodes first
	s.tb, s.topo, s.nodes, s.firewalls, s.paused = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}
