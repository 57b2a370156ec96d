package netem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/bullylab/bullylab/netem/fault"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// needsQueue reports whether the NFQUEUE backend must hand packets to the
// delayer; loss alone is done in the kernel (see lossQueue) at no userspace
// cost.
func needsQueue(imp fault.Impairment) bool {
	return imp.Delay > 0 || imp.Jitter > 0 || imp.Duplicate > 0 || imp.Reorder > 0
}

// ImpairerOptions tunes NewImpairer.
type ImpairerOptions struct {
	// Backend forces BackendNetem or BackendNFQueue; "" picks netem when
	// Probe finds it, else nfqueue.
	Backend string
}

// Impairer applies impairments to what one node sends through its link,
// either to all destinations (Set) or to one peer (SetPair, which takes
// precedence over Set for that peer). It works with netem qdiscs where the
// kernel has them and falls back to NFQUEUE and an in-process delayer.
// Impairing the sender's egress, as netem does, back-pressures the sending
// socket; impair both ends for symmetric link delay. The NFQUEUE backend
// spends CPU on every delayed packet (about 20k packets/s per node is the
// ceiling), and the sender never sees an error for a lost packet.
type Impairer struct {
	mu      sync.Mutex
	backend impairBackend
	name    string
	why     string
	link    fault.Impairment
	pairs   map[netip.Addr]fault.Impairment
	closed  bool
}

// impairBackend turns the desired state into kernel objects. apply receives
// the whole state each time, so a backend can rebuild instead of patching.
type impairBackend interface {
	apply(link fault.Impairment, pairs map[netip.Addr]fault.Impairment) error
	stats() DelayerStats
	close() error
}

// NewImpairer prepares impairments on interface link (normally NodeVeth) in
// namespace ns. Nothing is impaired until Set or SetPair. The handle may be
// closed after the call.
func NewImpairer(ns netns.NsHandle, run, link string, opts ImpairerOptions) (*Impairer, error) {
	if !ValidRunID(run) {
		return nil, fmt.Errorf("impairer: invalid run ID %q", run)
	}
	caps, err := Probe()
	if err != nil {
		return nil, fmt.Errorf("impairer: %w", err)
	}
	name, why := opts.Backend, ""
	switch name {
	case "":
		name = caps.Backend()
		if name == "" {
			return nil, fmt.Errorf("impairer: %s: %w", caps.Reason, ErrNotSupported)
		}
		why = caps.Reason
	case BackendNetem, BackendNFQueue:
		why = "backend " + name + " forced by caller; probe: " + caps.Reason
	default:
		return nil, fmt.Errorf("impairer: unknown backend %q", name)
	}

	own, err := faultsDupNS(ns)
	if err != nil {
		return nil, fmt.Errorf("impairer: %w", err)
	}
	var b impairBackend
	if name == BackendNetem {
		b, err = newNetemBackend(own, link)
		if !caps.HTB {
			why += "; per-peer impairments unavailable: kernel has no sch_htb"
		}
	} else {
		b, err = newNFQBackend(own, run, link)
		why += "; impairs only IPv4 TCP and UDP leaving " + link + " (ICMP and ARP pass untouched)" +
			"; duplicates are copies re-sent through a raw socket after the delay, exempt from loss"
	}
	if err != nil {
		own.Close()
		return nil, fmt.Errorf("impairer (%s): %w", name, err)
	}
	return &Impairer{backend: b, name: name, why: why, pairs: map[netip.Addr]fault.Impairment{}}, nil
}

// Backend returns BackendNetem or BackendNFQueue.
func (im *Impairer) Backend() string { return im.name }

// Why says in one line why this backend was chosen and what it cannot do.
func (im *Impairer) Why() string { return im.why }

// Stats returns the delayer's counters (zero for the netem backend).
func (im *Impairer) Stats() DelayerStats {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.backend.stats()
}

// Current returns the impairments in force.
func (im *Impairer) Current() (link fault.Impairment, pairs map[netip.Addr]fault.Impairment) {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.link, maps.Clone(im.pairs)
}

// Set impairs everything the node sends through its link, except to peers
// with their own SetPair impairment. A zero Impairment removes it.
func (im *Impairer) Set(imp fault.Impairment) error {
	if err := imp.Validate(); err != nil {
		return err
	}
	return im.update(func(link *fault.Impairment, _ map[netip.Addr]fault.Impairment) { *link = imp })
}

// SetPair impairs what the node sends to dst, replacing any link-wide
// impairment for that peer. A zero Impairment removes the pair entry, so
// the link-wide impairment applies to dst again.
func (im *Impairer) SetPair(dst netip.Addr, imp fault.Impairment) error {
	if err := imp.Validate(); err != nil {
		return err
	}
	dst = dst.Unmap()
	if !dst.Is4() {
		return fmt.Errorf("impairer: %v is not an IPv4 address", dst)
	}
	return im.update(func(_ *fault.Impairment, pairs map[netip.Addr]fault.Impairment) {
		if imp.IsZero() {
			delete(pairs, dst)
		} else {
			pairs[dst] = imp
		}
	})
}

// Clear removes every impairment. Packets the delayer holds are released at
// once.
func (im *Impairer) Clear() error {
	return im.update(func(link *fault.Impairment, pairs map[netip.Addr]fault.Impairment) {
		*link = fault.Impairment{}
		clear(pairs)
	})
}

func (im *Impairer) update(change func(*fault.Impairment, map[netip.Addr]fault.Impairment)) error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.closed {
		return errors.New("impairer: closed")
	}
	link, pairs := im.link, maps.Clone(im.pairs)
	change(&link, pairs)
	if err := im.backend.apply(link, pairs); err != nil {
		return fmt.Errorf("impairer (%s): %w", im.name, err)
	}
	im.link, im.pairs = link, pairs
	return nil
}

// Close removes every kernel object the Impairer made and stops the delayer,
// waiting for its goroutines.
func (im *Impairer) Close() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.closed {
		return nil
	}
	im.closed = true
	if err := im.backend.close(); err != nil {
		return fmt.Errorf("impairer (%s): %w", im.name, err)
	}
	return nil
}

// ---- netem backend ----

// Handles of the qdiscs the netem backend owns on the link: the root (netem
// alone, or htb when there are pair impairments), htb class minor 1 as the
// default class, one class per peer from minor 2, and netem leaves with
// majors from netemLeafMajor.
const (
	netemRootMajor = 0xb1
	netemLeafMajor = 0x100
	htbRate        = 10_000_000_000 // bits/s: high enough never to shape
	htbQuantum     = 60000
	netemLimit     = 65536 // packets; the default 1000 caps 20k pps at 50 ms
)

type netemMode int

const (
	netemNone netemMode = iota
	netemRoot
	netemHTB
)

type netemBackend struct {
	ns   netns.NsHandle
	h    *netlink.Handle
	link string
	mode netemMode

	// leaf builds the qdisc under each class; tests swap in another kind to
	// check classification on kernels without sch_netem.
	leaf func(netlink.QdiscAttrs, fault.Impairment) netlink.Qdisc
}

func newNetemBackend(ns netns.NsHandle, link string) (*netemBackend, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in namespace: %w", err)
	}
	if _, err := h.LinkByName(link); err != nil {
		h.Close()
		return nil, fmt.Errorf("link %s: %w", link, err)
	}
	return &netemBackend{ns: ns, h: h, link: link, leaf: netemQdisc}, nil
}

func netemQdisc(attrs netlink.QdiscAttrs, imp fault.Impairment) netlink.Qdisc {
	return netlink.NewNetem(attrs, netlink.NetemQdiscAttrs{
		Latency:     uint32(imp.Delay / time.Microsecond),
		Jitter:      uint32(imp.Jitter / time.Microsecond),
		Loss:        float32(imp.Loss),
		Duplicate:   float32(imp.Duplicate),
		ReorderProb: float32(imp.Reorder),
		Limit:       netemLimit,
	})
}

func (b *netemBackend) stats() DelayerStats { return DelayerStats{} }

func (b *netemBackend) apply(link fault.Impairment, pairs map[netip.Addr]fault.Impairment) error {
	l, err := b.h.LinkByName(b.link)
	if err != nil {
		return fmt.Errorf("link %s: %w", b.link, err)
	}
	idx := l.Attrs().Index
	root := netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(netemRootMajor, 0)}

	switch {
	case len(pairs) == 0 && link.IsZero():
		b.mode = netemNone
		return b.removeRoot(idx)
	case len(pairs) == 0:
		if b.mode == netemRoot {
			// Changing in place keeps packets already delayed.
			if err := b.h.QdiscChange(b.leaf(root, link)); err != nil {
				return qdiscErr("changing", "netem", b.link, err)
			}
			return nil
		}
		if err := b.removeRoot(idx); err != nil {
			return err
		}
		b.mode = netemNone
		if err := b.h.QdiscAdd(b.leaf(root, link)); err != nil {
			return qdiscErr("adding", "netem", b.link, err)
		}
		b.mode = netemRoot
		return nil
	}

	// Pair impairments: rebuilt whole, as classes and filters are cheap and
	// patching them in place would need per-peer bookkeeping.
	if err := b.removeRoot(idx); err != nil {
		return err
	}
	b.mode = netemNone
	if err := b.buildHTB(idx, link, pairs); err != nil {
		_ = b.removeRoot(idx)
		return err
	}
	b.mode = netemHTB
	return nil
}

func (b *netemBackend) buildHTB(idx int, link fault.Impairment, pairs map[netip.Addr]fault.Impairment) error {
	rootHandle := netlink.MakeHandle(netemRootMajor, 0)
	htb := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Parent: netlink.HANDLE_ROOT, Handle: rootHandle})
	htb.Defcls = 1
	if err := b.h.QdiscAdd(htb); err != nil {
		return qdiscErr("adding", "htb", b.link, err)
	}
	addClass := func(minor uint16, leafMajor uint16, imp fault.Impairment) error {
		classID := netlink.MakeHandle(netemRootMajor, minor)
		class := netlink.NewHtbClass(
			netlink.ClassAttrs{LinkIndex: idx, Parent: rootHandle, Handle: classID},
			netlink.HtbClassAttrs{Rate: htbRate, Ceil: htbRate, Quantum: htbQuantum})
		if err := b.h.ClassAdd(class); err != nil {
			return fmt.Errorf("adding htb class %x:%x on %s: %w", netemRootMajor, minor, b.link, err)
		}
		if imp.IsZero() {
			return nil
		}
		leaf := b.leaf(netlink.QdiscAttrs{LinkIndex: idx, Parent: classID, Handle: netlink.MakeHandle(leafMajor, 0)}, imp)
		if err := b.h.QdiscAdd(leaf); err != nil {
			return qdiscErr("adding", leaf.Type(), b.link, err)
		}
		return nil
	}
	if err := addClass(1, netemLeafMajor, link); err != nil {
		return err
	}
	dsts := slices.SortedFunc(maps.Keys(pairs), netip.Addr.Compare)
	for i, dst := range dsts {
		minor := uint16(2 + i)
		if err := addClass(minor, netemLeafMajor+minor, pairs[dst]); err != nil {
			return err
		}
		a := dst.As4()
		filter := &netlink.U32{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: idx, Parent: rootHandle, Priority: 1, Protocol: unix.ETH_P_IP},
			ClassId:     netlink.MakeHandle(netemRootMajor, minor),
			Sel: &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Keys: []netlink.TcU32Key{
				{Mask: 0xffffffff, Val: binary.BigEndian.Uint32(a[:]), Off: 16}, // IPv4 destination
			}},
		}
		if err := b.h.FilterAdd(filter); err != nil {
			return fmt.Errorf("adding u32 filter for %v on %s: %w", dst, b.link, err)
		}
	}
	return nil
}

// removeRoot deletes our root qdisc (and with it classes, leaves and
// filters), leaving the interface's default qdisc alone.
func (b *netemBackend) removeRoot(idx int) error {
	qs, err := b.h.QdiscList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: idx}})
	if err != nil {
		return fmt.Errorf("listing qdiscs on %s: %w", b.link, err)
	}
	for _, q := range qs {
		a := q.Attrs()
		if a.Parent == netlink.HANDLE_ROOT && a.Handle == netlink.MakeHandle(netemRootMajor, 0) {
			if err := b.h.QdiscDel(q); err != nil && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("deleting %s qdisc on %s: %w", q.Type(), b.link, err)
			}
		}
	}
	return nil
}

func (b *netemBackend) close() error {
	defer b.ns.Close()
	defer b.h.Close()
	l, err := b.h.LinkByName(b.link)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil // link gone, and its qdiscs with it
		}
		return fmt.Errorf("link %s: %w", b.link, err)
	}
	return b.removeRoot(l.Attrs().Index)
}

// qdiscErr names the missing qdisc when the kernel lacks its kind: ENOENT is
// what adding an unknown kind returns (the text only says so with extended
// acks on).
func qdiscErr(verb, kind, link string, err error) error {
	if errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("%s %s qdisc on %s: kernel has no sch_%s: %w (%w)", verb, kind, link, kind, ErrNotSupported, err)
	}
	return fmt.Errorf("%s %s qdisc on %s: %w", verb, kind, link, err)
}

// ---- NFQUEUE backend ----

// Names of the objects the NFQUEUE backend keeps in NftTable(run).
const (
	impairChain = "impair_out"
	impairL4Set = "impair_l4"
	lossScale   = 10000 // numgen modulus: loss resolution 0.01%
)

type nfqBackend struct {
	ns      netns.NsHandle
	conn    *nftables.Conn
	table   *nftables.Table
	chain   *nftables.Chain
	l4      *nftables.Set
	link    string
	delayer *nfqDelayer // running only while some rule queues packets
}

func newNFQBackend(ns netns.NsHandle, run, link string) (*nfqBackend, error) {
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns)), nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("opening nftables in namespace: %w", err)
	}
	// The rules match the interface by name, so a typo would silently
	// impair nothing: check it exists.
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		_ = conn.CloseLasting()
		return nil, fmt.Errorf("netlink in namespace: %w", err)
	}
	_, err = h.LinkByName(link)
	h.Close()
	if err != nil {
		_ = conn.CloseLasting()
		return nil, fmt.Errorf("link %s: %w", link, err)
	}
	b := &nfqBackend{ns: ns, conn: conn, link: link}
	b.table = &nftables.Table{Name: NftTable(run), Family: nftables.TableFamilyINet}
	b.chain = &nftables.Chain{Name: impairChain, Table: b.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter}
	b.l4 = &nftables.Set{Table: b.table, Name: impairL4Set, KeyType: nftables.TypeInetProto, Constant: true}

	faultsTableMu.Lock()
	defer faultsTableMu.Unlock()
	conn.AddTable(b.table)
	conn.AddChain(b.chain)
	conn.FlushChain(b.chain)
	err = conn.AddSet(b.l4, []nftables.SetElement{{Key: []byte{unix.IPPROTO_TCP}}, {Key: []byte{unix.IPPROTO_UDP}}})
	if err == nil {
		err = conn.Flush()
	}
	if err != nil {
		_ = conn.CloseLasting()
		return nil, fmt.Errorf("installing chain %s in table %s: %w", impairChain, b.table.Name, err)
	}
	return b, nil
}

func (b *nfqBackend) stats() DelayerStats {
	if b.delayer == nil {
		return DelayerStats{}
	}
	return b.delayer.stats()
}

func (b *nfqBackend) apply(link fault.Impairment, pairs map[netip.Addr]fault.Impairment) error {
	queue := needsQueue(link)
	for _, imp := range pairs {
		queue = queue || needsQueue(imp)
	}
	// The delayer starts before the rules so that no packet meets the
	// bypass path while the queue is still unbound.
	if queue && b.delayer == nil {
		d, err := startDelayer(b.ns)
		if err != nil {
			return err
		}
		b.delayer = d
	}
	if b.delayer != nil {
		b.delayer.setPolicy(link, pairs)
	}

	b.conn.FlushChain(b.chain)
	for _, r := range b.rules(link, pairs) {
		b.conn.AddRule(&nftables.Rule{Table: b.table, Chain: b.chain, Exprs: r})
	}
	if err := b.conn.Flush(); err != nil {
		return fmt.Errorf("updating chain %s: %w", impairChain, err)
	}

	if !queue && b.delayer != nil {
		d := b.delayer
		b.delayer = nil
		if err := d.close(); err != nil {
			return err
		}
	}
	return nil
}

// rules lists the chain's rules: duplicates pass first, then each peer's
// loss (a random share sent to the unbound lossQueue) and queueing (or an accept that exempts the peer from the link-wide
// rules), then the link-wide ones.
func (b *nfqBackend) rules(link fault.Impairment, pairs map[netip.Addr]fault.Impairment) [][]expr.Any {
	var out [][]expr.Any
	mark := make([]byte, 4)
	binary.NativeEndian.PutUint32(mark, dupMark)
	out = append(out, []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: mark},
		&expr.Verdict{Kind: expr.VerdictAccept},
	})

	match := func(dst *netip.Addr) []expr.Any {
		ifname := make([]byte, unix.IFNAMSIZ)
		copy(ifname, b.link)
		m := []expr.Any{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname},
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Lookup{SourceRegister: 1, SetName: b.l4.Name, SetID: b.l4.ID},
		}
		if dst != nil {
			a := dst.As4()
			m = append(m,
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a[:]})
		}
		return m
	}
	add := func(dst *netip.Addr, imp fault.Impairment, exempt bool) {
		if imp.Loss > 0 {
			threshold := make([]byte, 4)
			binary.BigEndian.PutUint32(threshold, uint32(math.Round(imp.Loss*lossScale/100)))
			out = append(out, append(match(dst),
				&expr.Numgen{Register: 1, Modulus: lossScale, Type: unix.NFT_NG_RANDOM},
				// numgen writes host order but cmp compares bytes: swap first.
				&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
				&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: threshold},
				nfqueueTarget(lossQueue, false)))
		}
		switch {
		case needsQueue(imp):
			out = append(out, append(match(dst), nfqueueTarget(delayerQueue, true)))
		case exempt:
			out = append(out, append(match(dst), &expr.Verdict{Kind: expr.VerdictAccept}))
		}
	}
	for _, dst := range slices.SortedFunc(maps.Keys(pairs), netip.Addr.Compare) {
		add(&dst, pairs[dst], !link.IsZero())
	}
	if !link.IsZero() {
		add(nil, link, false)
	}
	return out
}

func (b *nfqBackend) close() error {
	defer b.ns.Close()
	defer b.conn.CloseLasting()

	var errs []error
	// Empty the chain but keep it until the delayer has drained: deleting a
	// base chain unregisters its hook, and the kernel then drops every
	// packet queued in the namespace instead of waiting for verdicts.
	b.conn.FlushChain(b.chain)
	if err := b.conn.Flush(); err != nil && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("flushing chain %s: %w", impairChain, err))
	}
	if b.delayer != nil {
		if err := b.delayer.close(); err != nil {
			errs = append(errs, err)
		}
		b.delayer = nil
	}

	faultsTableMu.Lock()
	defer faultsTableMu.Unlock()
	b.conn.DelChain(b.chain)
	b.conn.DelSet(b.l4)
	if err := b.conn.Flush(); err != nil && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("removing chain %s: %w", impairChain, err))
	}
	if err := faultsDropTableIfEmpty(b.conn, b.table); err != nil {
		errs = append(errs, err)
	}
	return faultsJoin(errs)
}

// faultsJoin combines errors on one line, still matching errors.Is for each.
func faultsJoin(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], faultsJoin(errs[1:]))
}
