package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// OverlayBits is the prefix length of the overlay's switch addresses:
// host k's switch is 169.254.1.1 + k, clear of the nodes' gateway,
// 169.254.0.1, which no interface holds.
const OverlayBits = 16

// overlayBase is host 0's switch address on the overlay.
var overlayBase = netip.MustParseAddr("169.254.1.1")

// Span is a testbed across hosts: each host's share of the topology,
// built by the agent the controller started there over SSH.
type Span struct {
	// Run is the testbed's name; host k's share is Runs[k].
	Run  string
	Runs []string
	VNI  uint32

	clients []*Client
	agents  []*Agent
}

// SpanOptions configure BuildSpan.
type SpanOptions struct {
	CheckOptions
	// Nodes, when set, has every agent start its share's nodes, members
	// of one cluster (see NewSpanNodes).
	Nodes *SpanNodes
}

// NewSpanNodes makes the membership of topo's nodes: a fresh ID each, a
// fresh cluster key, and the peers file listing every node at its address.
func NewSpanNodes(topo *topologies.Topology) (*SpanNodes, error) {
	key, err := wire.NewKey()
	if err != nil {
		return nil, err
	}
	sn := &SpanNodes{Key: key.Encode(), IDs: map[string]string{}}
	var members []wire.Member
	for _, n := range topo.Nodes {
		id, err := uuid.NewRandom()
		if err != nil {
			return nil, err
		}
		sn.IDs[n.Name] = id.String()
		members = append(members, wire.Member{ID: id, Addr: netip.AddrPortFrom(n.Addr, uint16(topo.Port)).String()})
	}
	var buf bytes.Buffer
	if err := node.FormatPeers(&buf, members); err != nil {
		return nil, err
	}
	sn.Peers = buf.Bytes()
	return sn, nil
}

// BuildSpan builds topo, parsed from file source whose contents are
// topoFile, across its hosts: it reaches each (as Check does), then has
// every agent build its host's share at once. On error what was built is
// torn down.
func BuildSpan(ctx context.Context, topo *topologies.Topology, source string, topoFile []byte, sopts SpanOptions) (*Span, error) {
	opts := sopts.CheckOptions
	if len(topo.Hosts) == 0 {
		return nil, fmt.Errorf("topology %s has no hosts", topo.Name)
	}
	remoteBin, err := remoteBinary(opts)
	if err != nil {
		return nil, err
	}
	sp, err := newSpan(len(topo.Hosts))
	if err != nil {
		return nil, err
	}
	switches, err := sp.connect(ctx, topo.Hosts, opts, remoteBin)
	if err != nil {
		sp.Close()
		return nil, err
	}
	errs := make([]error, len(topo.Hosts))
	var wg sync.WaitGroup
	for k, h := range topo.Hosts {
		req := ShareRequest{Run: sp.Runs[k], Topology: topoFile, Source: source, Host: h.Name, VNI: sp.VNI,
			Switches: switches, Nodes: sopts.Nodes}
		wg.Go(func() { errs[k] = sp.agents[k].Build(req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		sp.Close()
		return nil, err
	}
	return sp, nil
}

// newSpan draws a run name and the overlay's VNI from it.
func newSpan(hosts int) (*Span, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	sp := &Span{Run: "bl" + hex.EncodeToString(b[:]), VNI: 1<<16 | uint32(b[0])<<8 | uint32(b[1])}
	for k := range hosts {
		// Each host's objects carry its number too, so that hosts sharing
		// a kernel (the tests' stand-ins) do not collide.
		sp.Runs = append(sp.Runs, sp.Run+"h"+strconv.Itoa(k+1))
	}
	return sp, nil
}

// connect reaches every host and starts its agent, and returns the
// overlay's switches, in host order.
func (sp *Span) connect(ctx context.Context, hosts []topologies.Host, opts CheckOptions, remoteBin string) ([]OverlaySwitch, error) {
	sp.clients = make([]*Client, len(hosts))
	sp.agents = make([]*Agent, len(hosts))
	switches := make([]OverlaySwitch, len(hosts))
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for k, h := range hosts {
		wg.Go(func() {
			under, err := underlayAddr(ctx, h)
			if err != nil {
				errs[k] = err
				return
			}
			switches[k] = overlaySwitch(k, under)
			c, a, r := connectHost(ctx, h, opts, remoteBin)
			sp.clients[k], sp.agents[k], errs[k] = c, a, r.Err
		})
	}
	wg.Wait()
	return switches, errors.Join(errs...)
}

// underlayAddr is the address the hosts' network reaches h at: its SSH
// address, resolved.
func underlayAddr(ctx context.Context, h topologies.Host) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(h.SSH)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host %s: %w", h.Name, err)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("host %s: resolving %s: %v", h.Name, host, err)
	}
	return addrs[0].Unmap(), nil
}

// overlaySwitch is host k's switch on the overlay.
func overlaySwitch(k int, underlay netip.Addr) OverlaySwitch {
	b := overlayBase.As4()
	n := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(k)
	addr := netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
	mac := net.HardwareAddr{0x02, 0x76, 0, 0, byte((k + 1) >> 8), byte(k + 1)}
	return OverlaySwitch{Underlay: underlay.String(), Addr: addr.String(), MAC: mac.String()}
}

// Status reads every host's nodes from its agent, in host order.
func (sp *Span) Status() ([]SpanNodeState, error) {
	all := make([][]SpanNodeState, len(sp.agents))
	errs := make([]error, len(sp.agents))
	var wg sync.WaitGroup
	for k, a := range sp.agents {
		if a == nil {
			continue
		}
		wg.Go(func() { all[k], errs[k] = a.Status() })
	}
	wg.Wait()
	var out []SpanNodeState
	for _, nodes := range all {
		out = append(out, nodes...)
	}
	return out, errors.Join(errs...)
}

// Crash kills node with SIGKILL on host, the index of the host that runs
// it in the topology's hosts.
func (sp *Span) Crash(host int, node string) error {
	return sp.on(host, func(a *Agent) error { return a.Crash(node) })
}

// Pause stops node with SIGSTOP on host (see Crash); Resume continues it.
func (sp *Span) Pause(host int, node string) error {
	return sp.on(host, func(a *Agent) error { return a.Pause(node) })
}

// Resume continues a node Pause stopped.
func (sp *Span) Resume(host int, node string) error {
	return sp.on(host, func(a *Agent) error { return a.Resume(node) })
}

func (sp *Span) on(host int, fn func(*Agent) error) error {
	if host < 0 || host >= len(sp.agents) || sp.agents[host] == nil {
		return fmt.Errorf("no host %d in the span", host)
	}
	return fn(sp.agents[host])
}

// Partition cuts groups of nodes from each other, at every host; it
// replaces any partition before.
func (sp *Span) Partition(groups [][]string) error {
	return sp.each(func(a *Agent) error { return a.Partition(groups) })
}

// Heal ends the partition at every host.
func (sp *Span) Heal() error {
	return sp.each(func(a *Agent) error { return a.Heal() })
}

// each calls fn on every agent at once.
func (sp *Span) each(fn func(*Agent) error) error {
	errs := make([]error, len(sp.agents))
	var wg sync.WaitGroup
	for k, a := range sp.agents {
		if a != nil {
			wg.Go(func() { errs[k] = fn(a) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Agreed reports the leader's ID when every node in states that runs is
// Normal and follows one leader at one epoch.
// Crashed and paused nodes are left out.
func Agreed(states []SpanNodeState) (leader string, epoch uint64, ok bool) {
	n := 0
	for _, s := range states {
		if !s.Running || s.Paused {
			continue
		}
		if s.Status != "normal" || n > 0 && (s.Leader != leader || s.Epoch != epoch) {
			return "", 0, false
		}
		leader, epoch = s.Leader, s.Epoch
		n++
	}
	return leader, epoch, n > 0
}

// Close tears every share down and ends the agents and connections.
func (sp *Span) Close() error {
	var errs []error
	for k := range sp.agents {
		errs = append(errs, sp.closeHost(k, true))
	}
	return errors.Join(errs...)
}

// CloseHost drops host k's SSH connection without asking its agent to tear
// down first, as a lost connection would: the agent's input ends, and it
// tears its share down itself.
func (sp *Span) CloseHost(k int) error {
	if k < 0 || k >= len(sp.agents) {
		return fmt.Errorf("no host %d in a span of %d", k, len(sp.agents))
	}
	return sp.closeHost(k, false)
}

func (sp *Span) closeHost(k int, down bool) error {
	a, c := sp.agents[k], sp.clients[k]
	sp.agents[k], sp.clients[k] = nil, nil
	var err error
	if a != nil && down {
		// Torn down, then its input closed: it exits by itself.
		err = errors.Join(a.Down(), a.Close())
	}
	if c != nil {
		c.Close()
	}
	if a != nil && !down {
		a.Close() // reaps the session the connection's end ended
	}
	return err
}
