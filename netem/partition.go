//go:build linux

package netem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Names of the objects a Firewall keeps in a node's NftTable(run).
const (
	firewallSet       = "blocked"
	firewallResetSet  = "rejected"
	firewallChain     = "partition_in"
	firewallLossChain = "loss_in"
)

// nftTableMu serializes creating and deleting the shared per-namespace
// table, so that a Firewall closing cannot delete the table under an
// Impairer that is adding its chain to it (or the other way round).
var nftTableMu sync.Mutex

// Firewall cuts a node off from chosen peers by dropping, in the node's own
// namespace, every IPv4 packet whose source is in a set of blocked addresses.
// Dropping on input rather than refusing on output means the sender sees no
// error, as on a real network; a one-way cut A→B is B's Firewall blocking A,
// a symmetric cut is both Firewalls blocking each other.
//
// Sources rejected rather than blocked are in a second set: a TCP segment
// from one is answered with a TCP reset (a SYN is refused, an established
// connection resets at its next segment), anything else from it is
// dropped. Resets from such a source pass, so that in a symmetric cut each
// side's refusal reaches the other.
//
// Partitioning and healing only add and remove set elements (about a
// millisecond), never recreate the table or its rules, so established
// connections see a clean cut rather than a flush of state.
type Firewall struct {
	mu       sync.Mutex
	ns       netns.NsHandle // our own duplicate, closed by Close
	conn     *nftables.Conn
	table    *nftables.Table
	set      *nftables.Set // sources dropped
	resetSet *nftables.Set // sources rejected
	chain    *nftables.Chain
	// blocked holds every source cut, true for those rejected.
	blocked map[netip.Addr]bool
	// lossChain holds one rule per lossy source; nil until SetLoss
	// first needs it.
	lossChain *nftables.Chain
	loss      map[netip.Addr]float64
	closed    bool
}

// NewFirewall installs empty sets of dropped and rejected sources and their
// input rules in table NftTable(run) of namespace ns. The handle may be
// closed after the call. Opening a Firewall again on the same namespace
// resets it.
func NewFirewall(ns netns.NsHandle, run string) (*Firewall, error) {
	if err := CheckRunName(run); err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	own, err := dupNS(ns)
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(own)), nftables.AsLasting())
	if err != nil {
		own.Close()
		return nil, fmt.Errorf("firewall: opening nftables in namespace: %w", err)
	}
	f := &Firewall{ns: own, conn: conn, blocked: map[netip.Addr]bool{}}
	f.table = &nftables.Table{Name: NftTable(run), Family: nftables.TableFamilyINet}
	f.set = &nftables.Set{Table: f.table, Name: firewallSet, KeyType: nftables.TypeIPAddr}
	f.resetSet = &nftables.Set{Table: f.table, Name: firewallResetSet, KeyType: nftables.TypeIPAddr}
	f.chain = &nftables.Chain{Name: firewallChain, Table: f.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter}

	nftTableMu.Lock()
	defer nftTableMu.Unlock()
	conn.AddTable(f.table)
	conn.AddChain(f.chain)
	// Flushing what a previous Firewall left keeps the rules as below.
	conn.FlushChain(f.chain)
	for _, set := range []*nftables.Set{f.set, f.resetSet} {
		if err := conn.AddSet(set, nil); err != nil {
			f.abort()
			return nil, fmt.Errorf("firewall: adding set %s: %w", set.Name, err)
		}
		conn.FlushSet(set)
	}
	from := func(set *nftables.Set, more ...expr.Any) []expr.Any {
		return append([]expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		}, more...)
	}
	tcp := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
	rstFlag := []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpFlagRST}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0}},
	}
	for _, exprs := range [][]expr.Any{
		from(f.set, &expr.Verdict{Kind: expr.VerdictDrop}),
		// A reset is never answered (the kernel would drop it): let it
		// end the connection it belongs to.
		from(f.resetSet, slices.Concat(tcp, rstFlag, []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}})...),
		from(f.resetSet, append(slices.Clone(tcp), &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})...),
		from(f.resetSet, &expr.Verdict{Kind: expr.VerdictDrop}),
	} {
		conn.AddRule(&nftables.Rule{Table: f.table, Chain: f.chain, Exprs: exprs})
	}
	if err := conn.Flush(); err != nil {
		f.abort()
		return nil, fmt.Errorf("firewall: installing table %s: %w", f.table.Name, err)
	}
	return f, nil
}

// tcpFlagRST is the RST bit of the TCP header's flags byte.
const tcpFlagRST = 0x04

func (f *Firewall) abort() {
	_ = f.conn.CloseLasting()
	f.ns.Close()
}

// firewallVerdict is what a Firewall does with a source's packets.
type firewallVerdict int

const (
	firewallPass   firewallVerdict = iota
	firewallDrop                   // dropped silently
	firewallReject                 // TCP answered with a reset, the rest dropped
)

// Block drops from now on every IPv4 packet arriving from srcs, rejected
// ones included.
func (f *Firewall) Block(srcs ...netip.Addr) error {
	return f.change(srcs, firewallDrop)
}

// Reject answers from now on every TCP segment arriving from srcs with a
// TCP reset and drops what else they send, blocked ones included.
func (f *Firewall) Reject(srcs ...netip.Addr) error {
	return f.change(srcs, firewallReject)
}

// Unblock lets packets from srcs through again, blocked or rejected.
func (f *Firewall) Unblock(srcs ...netip.Addr) error {
	return f.change(srcs, firewallPass)
}

// change moves srcs to the set of verdict v in one batch, so that a source
// moving from one set to the other is never let through between them.
func (f *Firewall) change(srcs []netip.Addr, v firewallVerdict) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("firewall: closed")
	}
	sets := map[firewallVerdict]*nftables.Set{firewallDrop: f.set, firewallReject: f.resetSet}
	add := map[firewallVerdict][]nftables.SetElement{}
	del := map[firewallVerdict][]nftables.SetElement{}
	moved := map[netip.Addr]bool{}
	for _, a := range srcs {
		a = a.Unmap()
		if !a.Is4() {
			return fmt.Errorf("firewall: %v is not an IPv4 address", a)
		}
		if f.verdict(a) == v || moved[a] {
			continue // deleting an absent element fails the whole batch
		}
		moved[a] = true
		b := a.As4()
		e := nftables.SetElement{Key: b[:]}
		if cur := f.verdict(a); cur != firewallPass {
			del[cur] = append(del[cur], e)
		}
		if v != firewallPass {
			add[v] = append(add[v], e)
		}
	}
	if len(moved) == 0 {
		return nil
	}
	var err error
	for _, k := range []firewallVerdict{firewallDrop, firewallReject} {
		if len(del[k]) > 0 && err == nil {
			err = f.conn.SetDeleteElements(sets[k], del[k])
		}
	}
	for _, k := range []firewallVerdict{firewallDrop, firewallReject} {
		if len(add[k]) > 0 && err == nil {
			err = f.conn.SetAddElements(sets[k], add[k])
		}
	}
	if err == nil {
		err = f.conn.Flush()
	}
	if err != nil {
		return fmt.Errorf("firewall: updating sets %s and %s: %w", f.set.Name, f.resetSet.Name, err)
	}
	for a := range moved {
		if v == firewallPass {
			delete(f.blocked, a)
		} else {
			f.blocked[a] = v == firewallReject
		}
	}
	return nil
}

// verdict is what f does now with packets from a; callers hold f.mu.
func (f *Firewall) verdict(a netip.Addr) firewallVerdict {
	reject, cut := f.blocked[a]
	switch {
	case !cut:
		return firewallPass
	case reject:
		return firewallReject
	}
	return firewallDrop
}

// Blocked returns the sources cut, blocked or rejected, sorted.
func (f *Firewall) Blocked() []netip.Addr {
	return f.sources(func(bool) bool { return true })
}

// Rejected returns the sources rejected, sorted.
func (f *Firewall) Rejected() []netip.Addr {
	return f.sources(func(reject bool) bool { return reject })
}

func (f *Firewall) sources(keep func(reject bool) bool) []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]netip.Addr, 0, len(f.blocked))
	for a, reject := range f.blocked {
		if keep(reject) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Clear heals every cut this Firewall made.
func (f *Firewall) Clear() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("firewall: closed")
	}
	f.conn.FlushSet(f.set)
	f.conn.FlushSet(f.resetSet)
	if err := f.conn.Flush(); err != nil {
		return fmt.Errorf("firewall: flushing sets %s and %s: %w", f.set.Name, f.resetSet.Name, err)
	}
	clear(f.blocked)
	return nil
}

// SetLoss makes the node drop, on arrival, the given share (percent) of the
// IPv4 packets from each source, replacing the shares set before; sources
// not listed lose nothing. Loss is applied by the receiver rather than at
// the sender's egress for the same reason as the cut: the packet has
// crossed the switch before it is lost, so a capture there sees every frame
// a node wrote once, and TCP still retransmits what was dropped.
func (f *Firewall) SetLoss(loss map[netip.Addr]float64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("firewall: closed")
	}
	want := map[netip.Addr]float64{}
	for a, pct := range loss {
		a = a.Unmap()
		if !a.Is4() {
			return fmt.Errorf("firewall: %v is not an IPv4 address", a)
		}
		if !(pct >= 0 && pct <= 100) {
			return fmt.Errorf("firewall: loss %g%% from %v is not a percentage", pct, a)
		}
		if pct > 0 {
			want[a] = pct
		}
	}
	if maps.Equal(want, f.loss) {
		return nil
	}
	if f.lossChain == nil {
		if len(want) == 0 {
			return nil
		}
		f.lossChain = &nftables.Chain{Name: firewallLossChain, Table: f.table, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityFilter + 1)}
		f.conn.AddChain(f.lossChain)
	}
	f.conn.FlushChain(f.lossChain)
	for _, a := range slices.SortedFunc(maps.Keys(want), netip.Addr.Compare) {
		src := a.As4()
		threshold := make([]byte, 4)
		binary.BigEndian.PutUint32(threshold, uint32(math.Round(want[a]*lossScale/100)))
		f.conn.AddRule(&nftables.Rule{Table: f.table, Chain: f.lossChain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: src[:]},
			&expr.Numgen{Register: 1, Modulus: lossScale, Type: unix.NFT_NG_RANDOM},
			// numgen writes host order but cmp compares bytes: swap first.
			&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
			&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: threshold},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
	}
	if err := f.conn.Flush(); err != nil {
		return fmt.Errorf("firewall: updating chain %s: %w", firewallLossChain, err)
	}
	f.loss = want
	return nil
}

// Close removes the Firewall's chain and set, and the table once nothing
// else of ours is left in it. Deleting a base chain makes the kernel drop
// every packet an Impairer's delayer holds in this namespace, so close the
// Impairer first when delayed packets matter. Objects already removed by someone else (for
// example `bullylab clean`) are not an error.
func (f *Firewall) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	defer f.ns.Close()
	defer f.conn.CloseLasting()

	nftTableMu.Lock()
	defer nftTableMu.Unlock()
	f.conn.DelChain(f.chain)
	if f.lossChain != nil {
		f.conn.DelChain(f.lossChain)
	}
	f.conn.DelSet(f.set)
	f.conn.DelSet(f.resetSet)
	err := f.conn.Flush()
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("firewall: removing chain and sets: %w", err)
	}
	return dropTableIfEmpty(f.conn, f.table)
}

// dropTableIfEmpty deletes table when it holds no chains and no sets,
// i.e. when neither a Firewall nor an Impairer uses it any more. Callers hold
// nftTableMu.
func dropTableIfEmpty(conn *nftables.Conn, table *nftables.Table) error {
	chains, err := conn.ListChainsOfTableFamily(table.Family)
	if err != nil {
		return fmt.Errorf("listing chains: %w", err)
	}
	for _, c := range chains {
		if c.Table != nil && c.Table.Name == table.Name {
			return nil
		}
	}
	sets, err := conn.GetSets(table)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil // table already gone
		}
		return fmt.Errorf("listing sets: %w", err)
	}
	if len(sets) > 0 {
		return nil
	}
	conn.DelTable(table)
	if err := conn.Flush(); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("removing table %s: %w", table.Name, err)
	}
	return nil
}
