package remote

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// shareBuildTimeout bounds building a host's share.
const shareBuildTimeout = 5 * time.Minute

// captureName is the share's capture file, in its run's state directory.
const captureName = "capture.pcapng"

// HostShares builds this host's share of a testbed as a netem lab (see
// lab.Share), one at a time: an agent serves one controller.
type HostShares struct {
	mu  sync.Mutex
	lab *lab.Lab
}

var _ Shares = (*HostShares)(nil)

// Build builds r's share: the host's nodes as a lab builds any topology,
// its switch joined to the other hosts' by the overlay, with a route to
// every node of another host through that host's switch, and its capture
// started; Start starts the nodes, members of one cluster with every
// host's.
func (s *HostShares) Build(r ShareRequest) (ShareBuilt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lab != nil {
		return ShareBuilt{}, fmt.Errorf("share %s is built already", s.lab.Run())
	}
	topo, err := topologies.Parse(r.Source, r.Topology)
	if err != nil {
		return ShareBuilt{}, err
	}
	if r.Algorithm != "" {
		topo.Algorithm = r.Algorithm
	}
	opts, err := shareOptions(topo, r)
	if err != nil {
		return ShareBuilt{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareBuildTimeout)
	defer cancel()
	l, err := lab.Boot(ctx, topo, opts)
	if err != nil {
		return ShareBuilt{}, err
	}
	s.lab = l
	return shareBuilt(l), nil
}

// Start starts the nodes of the share Build built.
func (s *HostShares) Start() (ShareBuilt, error) {
	l, err := s.share()
	if err != nil {
		return ShareBuilt{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareBuildTimeout)
	defer cancel()
	if err := l.StartHeld(ctx); err != nil {
		return ShareBuilt{}, err
	}
	return shareBuilt(l), nil
}

// Lead boots the topology's highest node, which Start started held.
func (s *HostShares) Lead() error {
	l, err := s.share()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareBuildTimeout)
	defer cancel()
	return l.Lead(ctx)
}

// Settle releases the share's held nodes once they follow the highest.
func (s *HostShares) Settle() (ShareBuilt, error) {
	l, err := s.share()
	if err != nil {
		return ShareBuilt{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareBuildTimeout)
	defer cancel()
	if err := l.Settle(ctx); err != nil {
		return ShareBuilt{}, err
	}
	return shareBuilt(l), nil
}

func shareBuilt(l *lab.Lab) ShareBuilt {
	b := ShareBuilt{Ready: l.Times().Ready}
	if c := l.Capture(); c != nil {
		b.Capture, b.CaptureStarted = c.Path(), c.Started()
	}
	return b
}

// shareOptions are the lab's options for r's share of topo.
func shareOptions(topo *topologies.Topology, r ShareRequest) (lab.BootOptions, error) {
	k := slices.IndexFunc(topo.Hosts, func(h topologies.Host) bool { return h.Name == r.Host })
	if k < 0 {
		return lab.BootOptions{}, fmt.Errorf("topology %s has no host %q", topo.Name, r.Host)
	}
	if len(r.Switches) != len(topo.Hosts) {
		return lab.BootOptions{}, fmt.Errorf("%d overlay switches for %d hosts", len(r.Switches), len(topo.Hosts))
	}
	switches, err := parseSwitches(r.Switches)
	if err != nil {
		return lab.BootOptions{}, err
	}
	ids := make([]uuid.UUID, len(r.Cluster.IDs))
	for i, id := range r.Cluster.IDs {
		if ids[i], err = uuid.Parse(id); err != nil {
			return lab.BootOptions{}, fmt.Errorf("cluster: ID %d: %w", i+1, err)
		}
	}
	key, err := wire.ParseKey(r.Cluster.Key)
	if err != nil {
		return lab.BootOptions{}, fmt.Errorf("cluster: %w", err)
	}
	pubs, privs, err := shareMemberKeys(r, len(ids))
	if err != nil {
		return lab.BootOptions{}, err
	}
	bin, err := os.Executable()
	if err != nil {
		return lab.BootOptions{}, err
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
	opts := lab.BootOptions{Binary: bin, Run: r.Run, Key: &key, Backend: r.Backend, StartTimeout: spanStartTimeout(len(topo.Nodes)),
		Share: &lab.Share{Host: r.Host, IDs: ids, PublicKeys: pubs, MemberKeys: privs, Hold: true, SpanBoot: true,
			Join: func(tb *netem.Testbed) error { return tb.JoinOverlay("", o, remote) }}}
	if r.Capture {
		// Readable by the controller's user, whoever the agent runs as.
		// The overlay brings the other hosts' frames, which they capture.
		opts.Capture = &lab.CaptureOptions{Path: filepath.Join(netem.StateDir(r.Run), captureName), Mode: 0o644, Exclude: []string{o.Name}, FromBoot: true}
	}
	return opts, nil
}

// spanStartTimeout bounds the waits of a share's start for a topology of
// n nodes (lab.BootOptions.StartTimeout), among them the highest node's
// boot election, whose HALTs and COORDINATORs each go to every other node:
// the lab's 30 s to 1000 nodes, and as much again for each 1000 more. At
// 5000 over 5 stand-in hosts on 2 loaded cores that election took 15 s
// once and more than 30 s the next time.
func spanStartTimeout(n int) time.Duration {
	return time.Duration((n+999)/1000) * 30 * time.Second
}

// shareMemberKeys decodes r's member keys for n nodes: every node's public
// key and this host's private ones, at their topology indexes; none when
// the controller sent none.
func shareMemberKeys(r ShareRequest, n int) ([]ed25519.PublicKey, []ed25519.PrivateKey, error) {
	if len(r.Cluster.PublicKeys) == 0 {
		return nil, nil, nil
	}
	if len(r.Cluster.PublicKeys) != n {
		return nil, nil, fmt.Errorf("cluster: %d public keys for %d nodes", len(r.Cluster.PublicKeys), n)
	}
	pubs := make([]ed25519.PublicKey, n)
	for i, text := range r.Cluster.PublicKeys {
		var err error
		if pubs[i], err = wire.ParsePublicKey(text); err != nil {
			return nil, nil, fmt.Errorf("cluster: public key %d: %w", i+1, err)
		}
	}
	privs := make([]ed25519.PrivateKey, n)
	for i, text := range r.MemberKeys {
		if i < 0 || i >= n {
			return nil, nil, fmt.Errorf("cluster: member key for node %d of %d", i+1, n)
		}
		priv, err := wire.ParseMemberKey(text)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: member key %d: %w", i+1, err)
		}
		if !pubs[i].Equal(priv.Public()) {
			return nil, nil, fmt.Errorf("cluster: member key %d is not the one its public key names", i+1)
		}
		privs[i] = priv
	}
	return pubs, privs, nil
}

// share returns the lab, or an error when none is built.
func (s *HostShares) share() (*lab.Lab, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lab == nil {
		return nil, errors.New("no share is built")
	}
	return s.lab, nil
}

// Status reads the share's nodes (lab.NodeStates).
func (s *HostShares) Status() (ShareStatus, error) {
	l, err := s.share()
	if err != nil {
		return ShareStatus{}, err
	}
	var st ShareStatus
	if st.Nodes, err = json.Marshal(l.Monitor().NodeStates()); err != nil {
		return ShareStatus{}, err
	}
	if st.Delayers, err = json.Marshal(l.Faults().DelayerStats()); err != nil {
		return ShareStatus{}, err
	}
	if files := l.HostFiles(); len(files) > 0 {
		if st.Files, err = json.Marshal(files); err != nil {
			return ShareStatus{}, err
		}
	}
	for _, f := range l.Monitor().Failed() {
		st.Failed = append(st.Failed, ShareFailure{Node: f.Node, Reason: f.Reason})
	}
	return st, nil
}

// Network says what the impairments in force do between any two nodes.
func (s *HostShares) Network() (ShareNetwork, error) {
	l, err := s.share()
	if err != nil {
		return ShareNetwork{}, err
	}
	return ShareNetwork{MaxDelay: l.Faults().MaxDelay(), Lossy: l.Faults().Lossy()}, nil
}

// maxShareLogs bounds the logs of one reply: a node logs elections and
// membership changes, never heartbeats, so a run's log is kilobytes.
const maxShareLogs = maxAgentLine / 2

// Logs reads the share's nodes' event logs.
func (s *HostShares) Logs() (map[string][]byte, error) {
	l, err := s.share()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	total := 0
	for _, n := range l.Nodes() {
		path, err := l.LogPath(n)
		if err != nil {
			return nil, err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		// Base64 in the reply: a third more.
		if total += len(data) * 4 / 3; total > maxShareLogs {
			return nil, fmt.Errorf("the event logs of share %s pass %d MiB", l.Run(), maxShareLogs>>20)
		}
		out[n] = data
	}
	return out, nil
}

// Apply applies f to the share (see Shares).
func (s *HostShares) Apply(f fault.Fault) (fault.Fault, error) {
	l, err := s.share()
	if err != nil {
		return fault.Fault{}, err
	}
	return l.Faults().Apply(context.Background(), f)
}

// StopCapture ends the share's capture.
func (s *HostShares) StopCapture() (capture.CaptureStats, error) {
	l, err := s.share()
	if err != nil {
		return capture.CaptureStats{}, err
	}
	c := l.Capture()
	if c == nil {
		return capture.CaptureStats{}, fmt.Errorf("share %s has no capture", l.Run())
	}
	return c.Stop()
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
	if s.lab == nil {
		return nil
	}
	err := s.lab.Close()
	s.lab = nil
	return err
}
