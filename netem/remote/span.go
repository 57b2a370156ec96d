package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path"
	"strconv"
	"sync"

	"github.com/bullylab/bullylab/topologies"
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

// BuildSpan builds topo, parsed from file source whose contents are
// topoFile, across its hosts: it reaches each (as Check does), then has
// every agent build its host's share at once. On error what was built is
// torn down.
func BuildSpan(ctx context.Context, topo *topologies.Topology, source string, topoFile []byte, opts CheckOptions) (*Span, error) {
	if len(topo.Hosts) == 0 {
		return nil, fmt.Errorf("topology %s has no hosts", topo.Name)
	}
	if opts.BinaryDir == "" {
		opts.BinaryDir = DefaultBinaryDir
	}
	sum, err := fileSHA256(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("the controller's binary: %w", err)
	}
	remoteBin := path.Join(opts.BinaryDir, "bullylab-"+sum[:16])
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
		req := ShareRequest{Run: sp.Runs[k], Topology: topoFile, Source: source, Host: h.Name, VNI: sp.VNI, Switches: switches}
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
