package remote

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// OverlayBits is the prefix length of the overlay's switch addresses:
// host k's switch is 169.254.1.1 + k, clear of the nodes' gateway,
// 169.254.0.1, which no interface holds.
const OverlayBits = 16

// overlayBase is host 0's switch address on the overlay.
var overlayBase = netip.MustParseAddr("169.254.1.1")

// Span is a testbed across hosts: each host's share of the topology, a
// lab (lab.Share) built by the agent the controller started there over
// SSH.
type Span struct {
	// run is the testbed's name; host k's share is Runs[k].
	run  string
	Runs []string
	VNI  uint32

	topo  *topologies.Topology
	times SpanTimes
	ids   []uuid.UUID // by topology index - 1
	key   wire.Key
	// memberKeys are the nodes' member keys, by topology index - 1.
	memberKeys []ed25519.PrivateKey
	hostOf     map[string]int // node name -> host index

	clients []*Client
	agents  []*Agent
	// built are what the agents said of their shares; clocks the hosts'
	// offsets measured once they were built.
	built  []ShareBuilt
	clocks []ClockOffset
	// capture is where the merged capture goes, "" without one.
	capture     string
	captureMode os.FileMode

	faultMu sync.Mutex // held while a fault is applied
	mu      sync.Mutex // guards the fields below
	// observers hear of every fault; records are the faults for the
	// merged capture.
	observers []func(fault.Fault)
	records   []capture.Record
	// Read from the hosts before their shares are torn down: what
	// Failed and DelayerStats report after Close.
	failed   [][]ShareFailure // by host
	delayers map[string]netem.DelayerStats
	captured *SpanCapture

	logMu   sync.Mutex
	logs    []map[string][]byte // by host, fetched once
	logErrs []error
}

// SpanTimes are the milestones of BuildSpan, on this machine's clock.
type SpanTimes struct {
	Begin     time.Time // BuildSpan was called
	Connected time.Time // every host's agent answered
	Built     time.Time // every host's share was built: namespaces, overlay, capture
	Started   time.Time // every host's nodes answered, held in a shared topology
	// Ready is when BuildSpan returned: every node booted, in a shared
	// topology the highest's election won and every host settled.
	Ready time.Time
}

// Times returns the milestones of BuildSpan.
func (sp *Span) Times() SpanTimes { return sp.times }

// SpanOptions configure BuildSpan.
type SpanOptions struct {
	CheckOptions
	// Seed, when not 0, draws the node IDs reproducibly (node.NewIDs).
	Seed int64
	// Backend forces every host's impairment backend.
	Backend string
	// Capture, when not "", has every host capture its own nodes' ports
	// from before any host's first node starts; StopCapture merges the
	// captures into this file, with CaptureMode (0: what the umask
	// leaves).
	Capture     string
	CaptureMode os.FileMode
}

// BuildSpan builds topo, parsed from file source whose contents are
// topoFile, across its hosts: it reaches each (as Check does), has every
// agent build its host's share (and start its capture), and once all are
// built, has them start their nodes at once, members of one cluster: no
// node's frames, its boot election's and its connections' HELLOs, go
// before every host captures. On error what was built is torn down.
func BuildSpan(ctx context.Context, topo *topologies.Topology, source string, topoFile []byte, sopts SpanOptions) (*Span, error) {
	opts := sopts.CheckOptions
	if len(topo.Hosts) == 0 {
		return nil, fmt.Errorf("topology %s has no hosts", topo.Name)
	}
	remoteBin, err := HostBinary(opts)
	if err != nil {
		return nil, err
	}
	sp, err := newSpan(topo, sopts.Seed)
	if err != nil {
		return nil, err
	}
	sp.capture, sp.captureMode, sp.times.Begin = sopts.Capture, sopts.CaptureMode, time.Now()
	switches, err := sp.connect(ctx, topo.Hosts, opts, remoteBin)
	if err != nil {
		sp.Close()
		return nil, err
	}
	sp.times.Connected = time.Now()
	cluster := SpanCluster{Key: sp.key.Encode()}
	for i, id := range sp.ids {
		cluster.IDs = append(cluster.IDs, id.String())
		cluster.PublicKeys = append(cluster.PublicKeys, wire.EncodePublicKey(sp.memberKeys[i].Public().(ed25519.PublicKey)))
	}
	sp.built = make([]ShareBuilt, len(topo.Hosts))
	sp.clocks = make([]ClockOffset, len(topo.Hosts))
	errs := make([]error, len(topo.Hosts))
	var wg sync.WaitGroup
	for k, h := range topo.Hosts {
		req := ShareRequest{Run: sp.Runs[k], Topology: topoFile, Source: source, Algorithm: topo.Algorithm, Host: h.Name, VNI: sp.VNI,
			Switches: switches, Cluster: cluster, Backend: sopts.Backend, Capture: sopts.Capture != "",
			MemberKeys: map[int]string{}}
		for i, n := range topo.Nodes {
			if n.Host == h.Name {
				req.MemberKeys[i] = wire.EncodeMemberKey(sp.memberKeys[i])
			}
		}
		wg.Go(func() { sp.built[k], errs[k] = sp.agents[k].Build(req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		sp.Close()
		return nil, err
	}
	sp.times.Built = time.Now()
	for k := range topo.Hosts {
		wg.Go(func() {
			var started ShareBuilt
			if started, errs[k] = sp.agents[k].Start(); errs[k] == nil {
				sp.built[k].Ready = started.Ready
				sp.clocks[k], errs[k] = sp.agents[k].ClockOffset(clockSamples)
			}
		})
	}
	wg.Wait()
	sp.times.Started = time.Now()
	if err := errors.Join(errs...); err == nil && topo.Hosting == topologies.HostingShared {
		errs = sp.bootHeld()
	}
	if err := errors.Join(errs...); err != nil {
		sp.Close()
		return nil, err
	}
	sp.times.Ready = time.Now()
	return sp, nil
}

// bootHeld boots a shared topology's nodes, every one started held by its
// host (lab.Share.SpanBoot), in one election, as a lab does on one host:
// the highest node, the last in topology order, boots alone once every
// host's nodes listen, and HALTs all the others, 3(N-1) frames in all; then
// every host releases those of its nodes that do not follow it. It
// returns each host's error.
func (sp *Span) bootHeld() []error {
	errs := make([]error, len(sp.agents))
	top := sp.topo.Nodes[len(sp.topo.Nodes)-1]
	k := sp.hostOf[top.Name]
	if errs[k] = sp.agents[k].Lead(); errs[k] != nil {
		return errs
	}
	var wg sync.WaitGroup
	for k := range sp.agents {
		wg.Go(func() {
			var settled ShareBuilt
			if settled, errs[k] = sp.agents[k].Settle(); errs[k] == nil {
				sp.built[k].Ready = settled.Ready
			}
		})
	}
	wg.Wait()
	return errs
}

// newSpan draws a run name, the overlay's VNI from it, the nodes' IDs
// and the cluster key.
func newSpan(topo *topologies.Topology, seed int64) (*Span, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	sp := &Span{run: "bl" + hex.EncodeToString(b[:]), VNI: 1<<16 | uint32(b[0])<<8 | uint32(b[1]), topo: topo, hostOf: map[string]int{}}
	for k, h := range topo.Hosts {
		sp.Runs = append(sp.Runs, ShareRun(sp.run, k))
		for _, n := range h.Nodes {
			sp.hostOf[n] = k
		}
	}
	var err error
	if sp.ids, err = node.NewIDs(len(topo.Nodes), seed); err != nil {
		return nil, err
	}
	if sp.key, err = wire.NewKey(); err != nil {
		return nil, err
	}
	sp.memberKeys = make([]ed25519.PrivateKey, len(topo.Nodes))
	for i := range sp.memberKeys {
		if sp.memberKeys[i], err = wire.NewMemberKey(); err != nil {
			return nil, err
		}
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

// Topology is the topology the span runs.
func (sp *Span) Topology() *topologies.Topology { return sp.topo }

// Key is the nodes' cluster key.
func (sp *Span) Key() wire.Key { return sp.key }

// ID returns a node's ID.
func (sp *Span) ID(name string) (uuid.UUID, bool) {
	n, ok := sp.topo.Node(name)
	if !ok {
		return uuid.Nil, false
	}
	return sp.ids[n.Index-1], true
}

// Started is when BuildSpan began.
func (sp *Span) Started() time.Time { return sp.times.Begin }

// Clocks are the hosts' clock offsets, measured once they were built.
func (sp *Span) Clocks() []ClockOffset { return slices.Clone(sp.clocks) }

// HostOf returns the index of the host that runs node.
func (sp *Span) HostOf(node string) (int, bool) {
	k, ok := sp.hostOf[node]
	return k, ok
}

// Apply applies f across the span and returns its record on this
// machine's clock: a fault on processes (crash, restart, pause, resume,
// isolate, unisolate, campaign, leave, join) by the hosts that run its
// nodes, the others (partition, cut, heal, delay, loss, clear) by every host,
// each acting at its own nodes. A host's name stands for its nodes
// wherever f names nodes, so that a partition or a delay can be between
// whole hosts.
func (sp *Span) Apply(ctx context.Context, f fault.Fault) (fault.Fault, error) {
	if err := ctx.Err(); err != nil {
		return fault.Fault{}, err
	}
	sp.faultMu.Lock()
	defer sp.faultMu.Unlock()
	f = sp.expandHosts(f)
	type applied struct {
		k   int
		rec fault.Fault
	}
	var done []applied
	var mu sync.Mutex
	err := sp.each(func(k int, a *Agent) error {
		hf, ok := sp.hostFault(k, f)
		if !ok {
			return nil
		}
		rec, err := a.Apply(hf)
		if err == nil {
			mu.Lock()
			done = append(done, applied{k, rec})
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return fault.Fault{}, err
	}
	if len(done) == 0 {
		return fault.Fault{}, fmt.Errorf("%s: no host runs %v", f.Kind, f.Nodes)
	}
	// One record: begun when the first host began, in force once the last
	// one's part was, each on this machine's clock.
	rec := f
	rec.Time, rec.InForce, rec.Detail = time.Time{}, time.Time{}, ""
	var healed []string
	for _, d := range done {
		begun, inForce := sp.local(d.k, d.rec.Time), sp.local(d.k, d.rec.InForce)
		if rec.Time.IsZero() || begun.Before(rec.Time) {
			rec.Time = begun
		}
		if inForce.After(rec.InForce) {
			rec.InForce = inForce
		}
		if rec.Detail == "" {
			rec.Detail, rec.Impair = d.rec.Detail, d.rec.Impair
		}
		healed = append(healed, d.rec.Nodes...)
	}
	if f.Kind == fault.Heal {
		slices.SortFunc(healed, sp.cmpNodes)
		rec.Nodes = slices.Compact(healed)
	}
	sp.emit(rec)
	return rec, nil
}

// Crash SIGKILLs the nodes on their hosts (Apply).
func (sp *Span) Crash(names ...string) (fault.Fault, error) {
	return sp.Apply(context.Background(), fault.Fault{Kind: fault.Crash, Nodes: names})
}

// OnFault registers f to be called with every fault's record once it is
// applied, in order, on the goroutine that applied it.
func (sp *Span) OnFault(f func(fault.Fault)) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.observers = append(sp.observers, f)
}

func (sp *Span) emit(f fault.Fault) {
	sp.mu.Lock()
	sp.records = append(sp.records, lab.FaultRecord(f))
	obs := slices.Clone(sp.observers)
	sp.mu.Unlock()
	for _, o := range obs {
		o(f)
	}
}

// local puts a time read on host k's clock on this machine's.
func (sp *Span) local(k int, t time.Time) time.Time {
	if t.IsZero() || k >= len(sp.clocks) {
		return t
	}
	return t.Add(-sp.clocks[k].Offset)
}

func (sp *Span) cmpNodes(a, b string) int {
	na, _ := sp.topo.Node(a)
	nb, _ := sp.topo.Node(b)
	if na == nil || nb == nil {
		return strings.Compare(a, b)
	}
	return na.Index - nb.Index
}

// hostFault is the part of f host k applies, and whether it has one.
func (sp *Span) hostFault(k int, f fault.Fault) (fault.Fault, bool) {
	if f.Kind.Everywhere() {
		return f, true
	}
	var mine []string
	for _, n := range f.Nodes {
		if h, ok := sp.hostOf[n]; ok && h == k {
			mine = append(mine, n)
		}
	}
	f.Nodes = mine
	return f, len(mine) > 0
}

// expandHosts replaces each host name f gives where it names nodes with
// that host's nodes, in topology order.
func (sp *Span) expandHosts(f fault.Fault) fault.Fault {
	expand := func(names []string) []string {
		if names == nil {
			return nil
		}
		var out []string
		hosts := false
		for _, name := range names {
			k := slices.IndexFunc(sp.topo.Hosts, func(h topologies.Host) bool { return h.Name == name })
			if _, isNode := sp.topo.Node(name); isNode || k < 0 {
				out = append(out, name)
				continue
			}
			hosts = true
			out = append(out, sp.topo.Hosts[k].Nodes...)
		}
		if hosts {
			slices.SortStableFunc(out, sp.cmpNodes)
		}
		return out
	}
	f.Nodes, f.Peers = expand(f.Nodes), expand(f.Peers)
	if f.Groups != nil {
		groups := make([][]string, len(f.Groups))
		for i, g := range f.Groups {
			groups[i] = expand(g)
		}
		f.Groups = groups
	}
	return f
}

// each calls fn on every agent at once, with its host's index.
func (sp *Span) each(fn func(k int, a *Agent) error) error {
	agents := sp.hosts()
	errs := make([]error, len(agents))
	var wg sync.WaitGroup
	for k, a := range agents {
		if a != nil {
			wg.Go(func() { errs[k] = fn(k, a) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// closed reports whether every host's share is gone.
func (sp *Span) closed() bool {
	return !slices.ContainsFunc(sp.hosts(), func(a *Agent) bool { return a != nil })
}

// host returns host k's agent and SSH connection, nil once it is closed.
func (sp *Span) host(k int) (*Agent, *Client) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.agents[k], sp.clients[k]
}

// hosts returns every host's agent, nil for those closed.
func (sp *Span) hosts() []*Agent {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Clone(sp.agents)
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
	sp.mu.Lock()
	a, c := sp.agents[k], sp.clients[k]
	sp.agents[k], sp.clients[k] = nil, nil
	sp.mu.Unlock()
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
