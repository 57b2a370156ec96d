//go:build linux

package netem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/bullylab/bullylab/topologies/fault"
	"maps"
	"math"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The NFQUEUE backend: nftables rules that drop a share of packets in the
// kernel and queue the rest to the delayer (delayer.go).

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
	tsUnit  time.Duration // ImpairerOptions.TCPTimestampUnit
	delayer *nfqDelayer   // running only while some rule queues packets
	late    lateness      // of every delayer's releases, for stats
	wake    string        // how the last delayer woke
}

func newNFQBackend(ns netns.NsHandle, run, link string, tsUnit time.Duration) (*nfqBackend, error) {
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
	b := &nfqBackend{ns: ns, conn: conn, link: link, tsUnit: tsUnit}
	b.table = &nftables.Table{Name: NftTable(run), Family: nftables.TableFamilyINet}
	b.chain = &nftables.Chain{Name: impairChain, Table: b.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter}
	b.l4 = &nftables.Set{Table: b.table, Name: impairL4Set, KeyType: nftables.TypeInetProto, Constant: true}

	nftTableMu.Lock()
	defer nftTableMu.Unlock()
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
		s := DelayerStats{Wake: b.wake}
		b.late.fill(&s)
		return s
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
		d, err := startDelayer(b.ns, b.tsUnit, &b.late)
		if err != nil {
			return err
		}
		b.delayer, b.wake = d, d.wakeHow
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

	nftTableMu.Lock()
	defer nftTableMu.Unlock()
	b.conn.DelChain(b.chain)
	b.conn.DelSet(b.l4)
	if err := b.conn.Flush(); err != nil && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("removing chain %s: %w", impairChain, err))
	}
	if err := dropTableIfEmpty(b.conn, b.table); err != nil {
		errs = append(errs, err)
	}
	return joinErrors(errs)
}
