//go:build linux

package netem

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/topologies"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// buildWorkers is how many goroutines create nodes. The kernel serialises
// namespace and link creation (rtnl and net namespace locks), so on the
// 2-core, 6.18 machines measured more workers only add contention: 250
// nodes built in 0.32-0.52 s with one worker, 0.37-0.82 s with two and
// 0.65-1.14 s with four. The pool stays for kernels where that changes.
const buildWorkers = 1

// Testbed is one run's switch and node namespaces and the processes in them.
// Its methods are safe for concurrent use.
type Testbed struct {
	run   string
	topo  *topologies.Topology // nil when attached
	owned bool                 // built by this process; false after Attach

	byName    map[string]int // node name -> position in state.Nodes
	vethIndex []int          // switch-side ifindex per node, 0 if unknown

	swNs netns.NsHandle
	sw   *netlink.Handle // switch namespace; Handle serialises requests per socket

	// The nodes' TCP timestamps (see TCPTimestampUnit) are settled during
	// the build. usecMu is held by the node that tries the route feature
	// first, so that the others wait for its answer rather than each
	// asking a kernel that refuses it.
	usecMu      sync.Mutex
	usecTried   bool
	usecRefused bool
	tsOffsetErr atomic.Pointer[error] // the first node whose timestamps keep a random offset

	// life is held (shared) by operations that create things, and taken
	// exclusively by Close, so nothing starts once Close has begun.
	life   sync.RWMutex
	closed bool

	mu      sync.Mutex
	state   RunState
	stored  bool   // state.json exists and is ours to rewrite
	version uint64 // bumped with every change to state
	nodeNs  []netns.NsHandle
	procs   map[*Process]struct{}

	// saveMu serialises writes of state.json; saved is the version last
	// written. Held by Close while it removes the state directory.
	saveMu sync.Mutex
	saved  uint64
	// Guarded by mu: saving is set while a saver goroutine runs (see
	// saveLater); savedV is the version it last wrote and saveErr the
	// error of its last write; savedCond is signalled after each write.
	saving    bool
	lastSave  time.Time // when saveLater's goroutine last began a write
	savedV    uint64
	saveErr   error
	savedCond *sync.Cond
	savers    sync.WaitGroup
}

// Build creates the testbed of topo for run in-process through netlink: a
// switch namespace that routes between the nodes (routed.go) and, per node,
// a named namespace linked to it by a veth whose node end is eth0 with the
// node's address. It records everything in StateDir(run)/state.json before
// creating it. On error it removes what it created.
func Build(ctx context.Context, topo *topologies.Topology, run string) (*Testbed, error) {
	tb, err := NewTestbed(topo, run)
	if err != nil {
		return nil, err
	}
	if err := tb.Construct(ctx, nil, nil); err != nil {
		return nil, errors.Join(err, tb.Close())
	}
	return tb, nil
}

// NewTestbed checks topo and claims run for it, recording it in state.json
// before anything is created; Construct then builds it. Build does both;
// a caller that starts work on each node as soon as it is built (the lab
// boots nodes while the rest of the testbed is built) calls them itself.
func NewTestbed(topo *topologies.Topology, run string) (*Testbed, error) {
	if err := CheckRunName(run); err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	if topo == nil || len(topo.Nodes) == 0 {
		return nil, fmt.Errorf("build %s: topology has no nodes", run)
	}
	if err := checkTopology(topo); err != nil {
		return nil, fmt.Errorf("build %s: %w", run, err)
	}
	// The state directory first: a live run has namespaces too, and the
	// error should say that the name is taken, not that they are left over.
	if _, err := os.Lstat(StateDir(run)); err == nil {
		return nil, fmt.Errorf("build %s: %w: %s exists, of a testbed that is up or that a killed run left (`bullylab clean` removes those); pick another run name", run, ErrRunExists, StateDir(run))
	}
	if left, err := listNamespaces(run); err != nil {
		return nil, fmt.Errorf("build %s: listing %s: %w", run, NetnsDir, err)
	} else if len(left) > 0 {
		return nil, fmt.Errorf("build %s: %w: %d namespaces such as %s exist, left from an earlier run (`bullylab clean` removes those) or not bullylab's (pick another run name)", run, ErrRunExists, len(left), left[0])
	}

	tb := &Testbed{
		run:       run,
		topo:      topo,
		owned:     true,
		byName:    make(map[string]int, len(topo.Nodes)),
		vethIndex: make([]int, len(topo.Nodes)),
		swNs:      netns.None(),
		nodeNs:    make([]netns.NsHandle, len(topo.Nodes)),
		procs:     map[*Process]struct{}{},
	}
	tb.savedCond = sync.NewCond(&tb.mu)
	user := CurrentUser()
	tb.state = RunState{
		Run:             run,
		Topology:        topo.Name,
		Created:         time.Now().UTC(),
		Owner:           self(),
		User:            &user,
		Subnet:          topo.Subnet.String(),
		Port:            topo.Port,
		SwitchNamespace: SwitchNamespace(run),
		Switch:          RoutedSwitch,
		Nodes:           make([]StateNode, len(topo.Nodes)),
	}
	for i, n := range topo.Nodes {
		tb.byName[n.Name] = i
		tb.nodeNs[i] = netns.None()
		tb.state.Nodes[i] = StateNode{
			Name:       n.Name,
			Index:      n.Index,
			Addr:       n.Addr.String(),
			Namespace:  NodeNamespace(run, n.Name),
			SwitchVeth: SwitchVeth(run, n.Index),
		}
	}
	if err := claimRun(&tb.state); err != nil {
		return nil, fmt.Errorf("build %s: %w", run, err)
	}
	tb.stored = true
	return tb, nil
}

// Construct builds the switch and the nodes, in order when it is not nil,
// calls nodeBuilt(i) once node i's namespace and links are configured (they
// may not be up yet: see WaitLinksUp), and returns once every link is up and
// the record says the testbed is complete. On error the caller closes tb.
func (tb *Testbed) Construct(ctx context.Context, order []int, nodeBuilt func(i int)) error {
	if err := tb.build(ctx, order, nodeBuilt); err != nil {
		return fmt.Errorf("build %s: %w", tb.run, err)
	}
	all := make([]int, len(tb.topo.Nodes))
	for i := range all {
		all[i] = i
	}
	if err := tb.WaitLinksUp(ctx, all); err != nil {
		return fmt.Errorf("build %s: %w", tb.run, err)
	}
	// Through the saver, as every other write: nodes may be starting, and
	// Flush must be able to wait for this version too.
	tb.mu.Lock()
	tb.state.Complete = true
	tb.state.TCPTimestampUnitNS = int64(tb.builtTimestampUnit())
	v := tb.changedLocked()
	tb.saveLater()
	err := tb.waitSavedLocked(v)
	tb.mu.Unlock()
	if err != nil {
		return fmt.Errorf("build %s: %w", tb.run, err)
	}
	return nil
}

// checkTopology rejects what would break the build half-way, for
// topologies assembled in code rather than parsed.
func checkTopology(topo *topologies.Topology) error {
	if len(topo.Nodes) > topologies.MaxNodes {
		return fmt.Errorf("topology %s: %d nodes, more than the %d a testbed holds", topo.Name, len(topo.Nodes), topologies.MaxNodes)
	}
	if !topo.Subnet.IsValid() || !topo.Subnet.Addr().Is4() {
		return fmt.Errorf("topology %s: subnet %s is not IPv4", topo.Name, topo.Subnet)
	}
	if topo.Subnet.Contains(SwitchGateway) {
		return fmt.Errorf("topology %s: subnet %s holds the switch's gateway %s", topo.Name, topo.Subnet, SwitchGateway)
	}
	names := make(map[string]bool, len(topo.Nodes))
	indexes := make(map[int]bool, len(topo.Nodes))
	for _, n := range topo.Nodes {
		ok := len(n.Name) >= 1 && len(n.Name) <= 16 && n.Name != "sw"
		for _, c := range n.Name {
			ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-')
		}
		switch {
		case !ok:
			return fmt.Errorf("topology %s: invalid node name %q", topo.Name, n.Name)
		case names[n.Name]:
			return fmt.Errorf("topology %s: node %s is repeated", topo.Name, n.Name)
		case n.Index < 1 || n.Index > 9999 || indexes[n.Index]:
			// The index names the switch-side veth, which has 4 digits.
			return fmt.Errorf("topology %s: node %s has index %d, want unique 1..9999", topo.Name, n.Name, n.Index)
		case !n.Addr.Is4() || !topo.Subnet.Contains(n.Addr):
			return fmt.Errorf("topology %s: node %s address %s is not in %s", topo.Name, n.Name, n.Addr, topo.Subnet)
		}
		names[n.Name], indexes[n.Index] = true, true
	}
	return nil
}

func (tb *Testbed) build(ctx context.Context, order []int, nodeBuilt func(i int)) error {
	if err := tb.buildSwitch(); err != nil {
		return err
	}
	if order == nil {
		order = make([]int, len(tb.state.Nodes))
		for i := range order {
			order[i] = i
		}
	}
	jobs := make(chan int, len(order))
	for _, i := range order {
		jobs <- i
	}
	close(jobs)
	var (
		wg       sync.WaitGroup
		failed   atomic.Bool
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		failed.Store(true)
	}
	for range min(buildWorkers, len(tb.state.Nodes)) {
		wg.Go(func() {
			if err := tb.buildNodes(ctx, jobs, &failed, nodeBuilt); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return firstErr
}

// buildSwitch creates the switch namespace, makes it a router and gives it
// the blackhole route for the subnet.
func (tb *Testbed) buildSwitch() error {
	// The switch namespace is created on a goroutine of its own so that a
	// thread that cannot be restored dies with it, not with the caller.
	type result struct {
		ns  netns.NsHandle
		err error
	}
	resc := make(chan result, 1)
	go func() {
		c, err := newNSCreator()
		if err != nil {
			resc <- result{netns.None(), err}
			return
		}
		var serr error
		ns, broken, err := c.create(SwitchNamespace(tb.run), func() { serr = routerSysctls() })
		c.close(broken)
		if err == nil && serr != nil {
			err = fmt.Errorf("making %s a router: %w", SwitchNamespace(tb.run), serr)
		}
		resc <- result{ns, err}
	}()
	res := <-resc
	if res.err != nil {
		return res.err
	}
	tb.swNs = res.ns
	sw, err := netlink.NewHandleAt(tb.swNs, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", SwitchNamespace(tb.run), err)
	}
	tb.sw = sw
	if err := addSwitchBlackhole(tb.sw, tb.topo.Subnet); err != nil {
		return fmt.Errorf("%s: %w", SwitchNamespace(tb.run), err)
	}
	return nil
}

// buildNodes is one build worker: it builds the nodes it takes from jobs
// until they run out, failed is set or ctx ends.
func (tb *Testbed) buildNodes(ctx context.Context, jobs <-chan int, failed *atomic.Bool, nodeBuilt func(i int)) error {
	// Each worker has its own switch socket: requests on one socket are
	// serialised for their whole round trip.
	h, err := netlink.NewHandleAt(tb.swNs, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", SwitchNamespace(tb.run), err)
	}
	defer h.Close()
	c, err := newNSCreator()
	if err != nil {
		return err
	}
	broken := false
	defer func() { c.close(broken) }()
	for i := range jobs {
		if failed.Load() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var ns netns.NsHandle
		var tsErr error
		ns, broken, err = c.create(tb.state.Nodes[i].Namespace, func() { tsErr = timestampsWithoutOffset() })
		if err != nil {
			return fmt.Errorf("node %s: %w", tb.state.Nodes[i].Name, err)
		}
		if tsErr != nil {
			// The testbed still works; only its captures lose send times.
			tsErr = fmt.Errorf("node %s: setting %s in %s: %w", tb.state.Nodes[i].Name, tcpTimestampsSysctl, tb.state.Nodes[i].Namespace, tsErr)
			tb.tsOffsetErr.CompareAndSwap(nil, &tsErr)
		}
		tb.nodeNs[i] = ns // each i has one writer; read after wg.Wait
		if err := tb.addNode(h, i, ns); err != nil {
			return err
		}
		if nodeBuilt != nil {
			nodeBuilt(i)
		}
	}
	return nil
}

// addNode links node i's namespace to the switch, routes to it there, and
// configures eth0 with the node's address, its one neighbour entry (the
// switch's gateway) and its subnet route through the gateway.
func (tb *Testbed) addNode(sw *netlink.Handle, i int, ns netns.NsHandle) error {
	sn := tb.state.Nodes[i]
	// The peer is created directly in the node namespace: moving a link
	// between namespaces afterwards costs several times more.
	n := &tb.topo.Nodes[i]
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: sn.SwitchVeth, HardwareAddr: SwitchMAC, Flags: net.FlagUp},
		PeerName:         NodeVeth,
		PeerNamespace:    netlink.NsFd(ns),
		PeerHardwareAddr: NodeMAC(n.Addr),
	}
	if err := sw.LinkAdd(veth); err != nil {
		return fmt.Errorf("node %s: creating veth %s: %w", sn.Name, sn.SwitchVeth, err)
	}
	tb.vethIndex[i] = veth.Index
	if err := addSwitchRoute(sw, veth.Index, n.Addr); err != nil {
		return fmt.Errorf("node %s: on %s: %w", sn.Name, sn.SwitchVeth, err)
	}

	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("node %s: netlink in %s: %w", sn.Name, sn.Namespace, err)
	}
	defer h.Close()
	eth0, err := h.LinkByName(NodeVeth)
	if err != nil {
		return fmt.Errorf("node %s: finding %s in %s: %w", sn.Name, NodeVeth, sn.Namespace, err)
	}
	if err := h.NeighSet(gatewayNeighbour(eth0.Attrs().Index)); err != nil {
		return fmt.Errorf("node %s: neighbour entry for %s on %s: %w", sn.Name, SwitchGateway, NodeVeth, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: n.Addr.AsSlice(), Mask: net.CIDRMask(tb.topo.Subnet.Bits(), 32)}}
	if err := h.AddrAdd(eth0, addr); err != nil {
		return fmt.Errorf("node %s: adding %s to %s: %w", sn.Name, addr.IPNet, NodeVeth, err)
	}
	if err := h.LinkSetUp(eth0); err != nil {
		return fmt.Errorf("node %s: setting %s up: %w", sn.Name, NodeVeth, err)
	}
	// lo is interface 1 in every network namespace.
	if err := h.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1}}); err != nil {
		return fmt.Errorf("node %s: setting lo up: %w", sn.Name, err)
	}
	if err := tb.microsecondTimestamps(h, eth0.Attrs().Index, n.Addr); err != nil {
		return fmt.Errorf("node %s: subnet route on %s in %s: %w", sn.Name, NodeVeth, sn.Namespace, err)
	}
	return nil
}

// usecTimestampsFeature is RTAX_FEATURE_TCP_USEC_TS; tests put a bit no
// kernel knows in its place to build as on a kernel that predates it.
var usecTimestampsFeature = unix.RTAX_FEATURE_TCP_USEC_TS

// microsecondTimestamps replaces the subnet route the kernel made for the
// node's address, once eth0 was up, with the route through the switch's
// gateway, asking for microsecond TCP timestamps (the route feature
// tcp_usec_ts, Linux 6.7): TSval in milliseconds cannot order messages
// sent within a millisecond, and a connection uses the unit its own end's
// route asks for, so every node gets it or none does. Kernels that predate
// the feature refuse the bit with EINVAL: then the first node's answer
// keeps every node on the gateway route without it, in milliseconds.
func (tb *Testbed) microsecondTimestamps(h *netlink.Handle, ifindex int, addr netip.Addr) error {
	route := gatewayRoute(tb.topo.Subnet, ifindex, addr)
	route.Features = usecTimestampsFeature
	fallback := func() error { return h.RouteReplace(gatewayRoute(tb.topo.Subnet, ifindex, addr)) }
	tb.usecMu.Lock()
	if tb.usecTried {
		refused := tb.usecRefused
		tb.usecMu.Unlock()
		if refused {
			return fallback()
		}
		return h.RouteReplace(route)
	}
	defer tb.usecMu.Unlock()
	err := h.RouteReplace(route)
	if errors.Is(err, unix.EINVAL) {
		tb.usecTried, tb.usecRefused = true, true
		return fallback()
	}
	if err != nil {
		return err
	}
	tb.usecTried = true
	return nil
}

// builtTimestampUnit is what TCPTimestampUnit reports once every node is
// built.
func (tb *Testbed) builtTimestampUnit() time.Duration {
	if tb.tsOffsetErr.Load() != nil {
		return 0
	}
	tb.usecMu.Lock()
	defer tb.usecMu.Unlock()
	if tb.usecTried && !tb.usecRefused {
		return time.Microsecond
	}
	return time.Millisecond
}

// TCPTimestampUnit returns the tick of the TCP timestamps (TSval) the
// nodes send: time.Microsecond where the kernel takes the route feature
// tcp_usec_ts, else time.Millisecond. TSval is then CLOCK_MONOTONIC in
// that unit modulo 2^32, without a per-connection offset. It returns 0
// while the testbed is being built, when a node namespace kept the random
// offset (its kernel has no per-namespace net.ipv4.tcp_timestamps; see
// TimestampOffsetError), and for runs recorded by versions that did not
// say.
func (tb *Testbed) TCPTimestampUnit() time.Duration {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return time.Duration(tb.state.TCPTimestampUnitNS)
}

// TimestampOffsetError says why TCPTimestampUnit is 0 for a testbed this
// process built: the first node whose namespace kept random timestamp
// offsets. nil when none did.
func (tb *Testbed) TimestampOffsetError() error {
	if p := tb.tsOffsetErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Attach opens the testbed another process built, to run commands in it or
// isolate nodes. Closing an attached testbed only releases its handles; the
// run stays until its owner closes it or `bullylab clean` runs.
func Attach(run string) (*Testbed, error) {
	if err := CheckRunName(run); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	st, err := ReadState(run)
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", run, err)
	}
	tb := &Testbed{
		run:       run,
		state:     *st,
		byName:    make(map[string]int, len(st.Nodes)),
		vethIndex: make([]int, len(st.Nodes)),
		nodeNs:    make([]netns.NsHandle, len(st.Nodes)),
		procs:     map[*Process]struct{}{},
	}
	if st.Switch != RoutedSwitch {
		// Its ports are a bridge's, whose addresses and routes this
		// version would get wrong; deleting its namespaces still works.
		return nil, fmt.Errorf("attach %s: built by an older bullylab with a bridge for a switch; `bullylab clean` removes it", run)
	}
	tb.savedCond = sync.NewCond(&tb.mu)
	for i, n := range st.Nodes {
		tb.byName[n.Name] = i
		tb.nodeNs[i] = netns.None()
	}
	if tb.swNs, err = netns.GetFromName(st.SwitchNamespace); err != nil {
		return nil, fmt.Errorf("attach %s: opening namespace %s: %w", run, st.SwitchNamespace, err)
	}
	if tb.sw, err = netlink.NewHandleAt(tb.swNs, unix.NETLINK_ROUTE); err != nil {
		tb.swNs.Close()
		return nil, fmt.Errorf("attach %s: netlink in %s: %w", run, st.SwitchNamespace, err)
	}
	return tb, nil
}

// Run returns the run ID.
func (tb *Testbed) Run() string { return tb.run }

// Topology returns the topology the testbed was built from; nil when
// attached.
func (tb *Testbed) Topology() *topologies.Topology { return tb.topo }

// Nodes returns the nodes' names, addresses and kernel objects.
func (tb *Testbed) Nodes() []StateNode {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]StateNode(nil), tb.state.Nodes...)
}

// Namespace returns the name of node's namespace (under /run/netns).
func (tb *Testbed) Namespace(node string) (string, error) {
	i, err := tb.NodeIndex(node)
	if err != nil {
		return "", err
	}
	return tb.state.Nodes[i].Namespace, nil
}

// NodeIndex returns node's position in the topology and state.Nodes.
func (tb *Testbed) NodeIndex(node string) (int, error) {
	i, ok := tb.byName[node]
	if !ok {
		return 0, fmt.Errorf("run %s has no node %q", tb.run, node)
	}
	return i, nil
}

// NamespaceHandle returns an open handle to node's namespace, owned by tb.
func (tb *Testbed) NamespaceHandle(node string) (netns.NsHandle, error) {
	i, err := tb.NodeIndex(node)
	if err != nil {
		return netns.None(), err
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if !tb.nodeNs[i].IsOpen() {
		ns, err := netns.GetFromName(tb.state.Nodes[i].Namespace)
		if err != nil {
			return netns.None(), fmt.Errorf("node %s: opening namespace %s: %w", node, tb.state.Nodes[i].Namespace, err)
		}
		tb.nodeNs[i] = ns
	}
	return tb.nodeNs[i], nil
}

// SetNodeLink isolates node (up false) or reconnects it by setting the
// switch-side end of its veth down or up. The node keeps its address and
// routes, so its sockets see silence, as on a real network; taking eth0
// itself down would delete the node's routes and fail its sends at once.
func (tb *Testbed) SetNodeLink(node string, up bool) error {
	i, err := tb.NodeIndex(node)
	if err != nil {
		return err
	}
	tb.life.RLock()
	defer tb.life.RUnlock()
	if tb.closed {
		return fmt.Errorf("node %s: testbed %s is closed", node, tb.run)
	}
	name := tb.state.Nodes[i].SwitchVeth
	var link netlink.Link = &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: tb.vethIndex[i]}}
	if tb.vethIndex[i] == 0 {
		if link, err = tb.sw.LinkByName(name); err != nil {
			return fmt.Errorf("node %s: finding %s: %w", node, name, err)
		}
	}
	if up {
		err = tb.sw.LinkSetUp(link)
	} else {
		err = tb.sw.LinkSetDown(link)
	}
	if err != nil {
		return fmt.Errorf("node %s: setting %s up=%v: %w", node, name, up, err)
	}
	if up {
		// Taking the port down deleted the switch's route and neighbour
		// entry through it.
		addr, err := netip.ParseAddr(tb.state.Nodes[i].Addr)
		if err != nil {
			return fmt.Errorf("node %s: address %q: %w", node, tb.state.Nodes[i].Addr, err)
		}
		if err := addSwitchRoute(tb.sw, link.Attrs().Index, addr); err != nil {
			return fmt.Errorf("node %s: on %s: %w", node, name, err)
		}
	}
	if up {
		// Reconnected only once the carrier is through: until then the
		// port drops everything, and a caller timing recovery from here
		// would count the kernel's delay as the election's.
		return tb.WaitLinksUp(context.Background(), []int{i})
	}
	return nil
}

// Carrier changes reach a device's operational state through the kernel's
// linkwatch, which may defer them by up to a second; until then a veth
// transmits through the noop qdisc and drops everything. Measured when the
// switch was a bridge: the first ARP request of a fresh node vanished and
// cost its first connection a one-second retry.
const (
	linkUpTimeout = 10 * time.Second
	linkUpPoll    = 2 * time.Millisecond
)

// WaitLinksUp waits until both ends of the veths of nodes (positions in
// state.Nodes) are operationally up. The switch ends are read with one
// dump per poll; the node ends, which come up in the same linkwatch pass,
// are then checked one namespace at a time.
func (tb *Testbed) WaitLinksUp(ctx context.Context, nodes []int) error {
	deadline := time.Now().Add(linkUpTimeout)
	wait := func(what string) error {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not operationally up after %v", what, linkUpTimeout)
		}
		t := time.NewTimer(linkUpPoll)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}

	pending := make(map[string]int, len(nodes))
	for _, i := range nodes {
		pending[tb.state.Nodes[i].SwitchVeth] = i
	}
	if len(nodes) == 1 && tb.vethIndex[nodes[0]] != 0 {
		// One node booting while the rest is built: ask for its port
		// alone rather than dump every link.
		i := nodes[0]
		for {
			l, err := tb.sw.LinkByIndex(tb.vethIndex[i])
			if err != nil {
				return fmt.Errorf("node %s: finding %s: %w", tb.state.Nodes[i].Name, tb.state.Nodes[i].SwitchVeth, err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				clear(pending)
				break
			}
			if err := wait(fmt.Sprintf("switch port %s is", tb.state.Nodes[i].SwitchVeth)); err != nil {
				return err
			}
		}
	}
	for len(pending) > 0 {
		links, err := tb.sw.LinkList()
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			// Links were added while the kernel dumped them: nodes boot
			// while the rest of the testbed is built. Ask again.
			if err := wait("switch ports"); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("listing links in %s: %w", tb.state.SwitchNamespace, err)
		}
		for _, l := range links {
			if a := l.Attrs(); a.OperState == netlink.OperUp {
				delete(pending, a.Name)
			}
		}
		if len(pending) == 0 {
			break
		}
		var first string
		for name := range pending {
			first = name
			break
		}
		if err := wait(fmt.Sprintf("%d switch ports such as %s are", len(pending), first)); err != nil {
			return err
		}
	}

	for _, i := range nodes {
		sn := tb.state.Nodes[i]
		ns, err := tb.NamespaceHandle(sn.Name)
		if err != nil {
			return err
		}
		h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("node %s: netlink in %s: %w", sn.Name, sn.Namespace, err)
		}
		for {
			l, err := h.LinkByName(NodeVeth)
			if err != nil {
				h.Close()
				return fmt.Errorf("node %s: finding %s: %w", sn.Name, NodeVeth, err)
			}
			if l.Attrs().OperState == netlink.OperUp {
				break
			}
			if err := wait(fmt.Sprintf("node %s: %s is", sn.Name, NodeVeth)); err != nil {
				h.Close()
				return err
			}
		}
		h.Close()
	}
	return nil
}

// changedLocked records a change to the state and returns its version, to
// pass to save once tb.mu is released; tb.mu must be held.
func (tb *Testbed) changedLocked() uint64 {
	tb.version++
	return tb.version
}

// saveInterval is the least time between two writes of state.json.
const saveInterval = 50 * time.Millisecond

// saveLater has state.json rewritten soon, by a goroutine that runs while
// changes keep coming, so that one write covers all the changes made while
// the previous one was under way; tb.mu must be held. Starting 250 node
// processes used to rewrite a growing file once per process with the
// testbed's lock held, and with the machine busy booting the nodes, those
// writes were half of the start time. The record lags by a write at most:
// a process missing from it is still found and killed by Clean and Close,
// which sweep the run's namespaces.
func (tb *Testbed) saveLater() {
	if tb.saving || !tb.stored {
		return
	}
	tb.saving = true
	tb.savers.Add(1)
	go func() {
		defer tb.savers.Done()
		for {
			// Changes that keep coming are written at most every
			// saveInterval: during a 250-node boot, a rewrite of the
			// growing record per process started was a sixth of the lab's
			// CPU.
			tb.mu.Lock()
			wait := saveInterval - time.Since(tb.lastSave)
			tb.mu.Unlock()
			if wait > 0 {
				time.Sleep(wait)
			}
			tb.mu.Lock()
			tb.lastSave = time.Now()
			v := tb.version
			tb.mu.Unlock()
			err := tb.save(v)
			tb.mu.Lock()
			tb.saveErr = err
			if err == nil {
				tb.savedV = max(tb.savedV, v)
			}
			tb.savedCond.Broadcast()
			if tb.version == v || !tb.stored {
				tb.saving = false
				tb.mu.Unlock()
				return
			}
			tb.mu.Unlock()
		}
	}()
}

// waitSavedLocked waits until state.json holds version v or later, and
// returns the error that kept it from doing so; tb.mu must be held.
func (tb *Testbed) waitSavedLocked(v uint64) error {
	for tb.savedV < v && tb.stored && tb.saving {
		tb.savedCond.Wait()
	}
	if tb.savedV >= v || !tb.stored {
		return nil
	}
	if tb.saveErr != nil {
		return tb.saveErr
	}
	return errors.New("state not written")
}

// Flush waits until state.json records every change made so far.
func (tb *Testbed) Flush() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.waitSavedLocked(tb.version)
}

// save makes sure state.json holds version v of the state or a later one.
func (tb *Testbed) save(v uint64) error {
	tb.saveMu.Lock()
	defer tb.saveMu.Unlock()
	if tb.saved >= v {
		return nil
	}
	tb.mu.Lock()
	if !tb.stored {
		tb.mu.Unlock()
		return nil
	}
	data, err := marshalState(&tb.state)
	cur := tb.version
	tb.mu.Unlock()
	if err != nil {
		return err
	}
	if err := writeStateData(StateDir(tb.run), data); err != nil {
		return err
	}
	tb.saved = cur
	return nil
}

// Close tears the testbed down: its processes first (a live process keeps
// its namespace and veth alive), then the namespaces, whose deletion takes
// their veths along, then the state directory with the default logs.
// Further calls return nil. An attached testbed only releases its handles.
func (tb *Testbed) Close() error {
	tb.life.Lock()
	if tb.closed {
		tb.life.Unlock()
		return nil
	}
	tb.closed = true
	tb.life.Unlock()

	var errs []error
	if tb.owned {
		tb.mu.Lock()
		// The record stops here: rewriting it as each killed process is
		// reaped would cost one write per node, and a teardown cut short
		// leaves a record that still lists them, which is what clean needs.
		tb.stored = false
		procs := make([]*Process, 0, len(tb.procs))
		for p := range tb.procs {
			procs = append(procs, p)
		}
		tb.mu.Unlock()
		errs = append(errs, KillAll(procs))
		_, err := killInNamespaces(context.Background(), tb.run)
		errs = append(errs, err)
	}
	tb.savers.Wait() // stored is false: a running saver stops after its write

	tb.saveMu.Lock() // no state.json write races the removal below
	defer tb.saveMu.Unlock()
	tb.mu.Lock()
	tb.stored = false
	if tb.sw != nil {
		tb.sw.Close()
	}
	if tb.swNs.IsOpen() {
		tb.swNs.Close()
	}
	for i, ns := range tb.nodeNs {
		if ns.IsOpen() {
			ns.Close()
			tb.nodeNs[i] = netns.None()
		}
	}
	tb.mu.Unlock()
	if !tb.owned {
		return errors.Join(errs...)
	}

	if _, err := deleteRunNamespaces(tb.run); err != nil {
		// The record stays, so that clean finds what is left by the name.
		errs = append(errs, err)
	} else if err := os.RemoveAll(StateDir(tb.run)); err != nil {
		errs = append(errs, fmt.Errorf("removing %s: %w", StateDir(tb.run), err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close %s: %w", tb.run, err)
	}
	return nil
}

// KillAll SIGKILLs the processes' groups and reaps them.
func KillAll(procs []*Process) error {
	for _, p := range procs {
		_ = p.Signal(syscall.SIGKILL)
	}
	var errs []error
	deadline := time.After(10 * time.Second)
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-deadline:
			errs = append(errs, fmt.Errorf("node %s: process %d did not exit after SIGKILL", p.Node, p.PID()))
		}
	}
	return errors.Join(errs...)
}

// deleteRunNamespaces unmounts and removes every namespace of run, and
// then those of its mounts that a later mount on NetnsDir hid, whose names
// could not be removed before. Mount operations serialise on a kernel
// lock, so one goroutine is as fast.
func deleteRunNamespaces(run string) ([]string, error) {
	names, err := listNamespaces(run)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", NetnsDir, err)
	}
	failed := map[string]error{}
	deleted := map[string]bool{}
	if len(names) > 0 {
		unlock, err := lockNetnsDir(false)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if err := deleteNamed(name); err != nil {
				failed[name] = err
				continue
			}
			deleted[name] = true
		}
		unlock()
	}
	hidden, err := hiddenRunNamespaces(run)
	errs := []error{err}
	if err == nil && len(hidden) > 0 {
		removed, err := removeHiddenNamespaces(hidden)
		errs = append(errs, err)
		for _, name := range removed {
			deleted[name] = true
			delete(failed, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(failed)) {
		errs = append(errs, failed[name])
	}
	return slices.Sorted(maps.Keys(deleted)), errors.Join(errs...)
}

// killInNamespaces SIGKILLs every process left in run's namespaces and
// waits until they are gone.
func killInNamespaces(ctx context.Context, run string) ([]ProcRef, error) {
	ids, err := runNamespaceIDs(run)
	if err != nil {
		return nil, err
	}
	var killed []ProcRef
	for _, pid := range processesIn(ids) {
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		ref := ProcRef{PID: pid, StartTime: st.startTime}
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			killed = append(killed, ref)
		}
	}
	return killed, waitGone(ctx, killed)
}

// waitGone waits until none of refs is alive.
func waitGone(ctx context.Context, refs []ProcRef) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []string
		for _, r := range refs {
			if r.Alive() {
				alive = append(alive, fmt.Sprint(r.PID))
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %s still alive 10s after SIGKILL", strings.Join(alive, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
