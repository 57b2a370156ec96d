//go:build linux

package netem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/bullylab/bullylab/topologies/fault"
	"maps"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The netem backend: netem qdiscs on the node's eth0, under an htb root
// when pairs need their own.

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
