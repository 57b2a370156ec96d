package netem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/florianl/go-nfqueue/v2"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Impairment backends.
const (
	// BackendNetem impairs with netem qdiscs on the node's egress interface.
	BackendNetem = "netem"
	// BackendNFQueue impairs with nftables rules and an in-process delayer
	// fed through NFQUEUE, for kernels built without sch_netem.
	BackendNFQueue = "nfqueue"
)

// Capabilities is what the running kernel offers for fault injection, found
// by really creating the objects in a scratch namespace: listing qdiscs or
// reading /proc proves nothing about which qdisc kinds can be added.
type Capabilities struct {
	Netem   bool // a netem qdisc can be added
	HTB     bool // an htb qdisc can be added (netem per-pair impairments need it)
	NFQueue bool // the xt NFQUEUE target is accepted and a queue can be bound

	// Reason says in one line which backend impairments use and why.
	Reason string
}

// Backend names the impairment backend these capabilities call for, or ""
// when neither works.
func (c Capabilities) Backend() string {
	switch {
	case c.Netem:
		return BackendNetem
	case c.NFQueue:
		return BackendNFQueue
	}
	return ""
}

var (
	probeOnce sync.Once
	probeCaps Capabilities
)

// Probe reports what this kernel supports. It runs once per process; later
// calls return the cached result.
func Probe() Capabilities {
	probeOnce.Do(func() { probeCaps = probeKernel() })
	return probeCaps
}

func probeKernel() Capabilities {
	// An unnamed namespace vanishes with its last fd, so a crash in the
	// middle of probing leaves nothing to clean up.
	scratch, err := faultsNewScratchNS()
	if err != nil {
		return Capabilities{Reason: fmt.Sprintf("cannot probe: creating a scratch network namespace failed: %v", err)}
	}
	defer scratch.Close()

	var caps Capabilities
	var netemWhy, nfqWhy string
	caps.Netem, caps.HTB, netemWhy = probeQdiscs(scratch)
	caps.NFQueue, nfqWhy = probeNFQueue(scratch)

	switch {
	case caps.Netem:
		caps.Reason = "netem qdisc available; using netem"
	case caps.NFQueue:
		caps.Reason = netemWhy + "; using the NFQUEUE delayer"
	default:
		caps.Reason = netemWhy + "; " + nfqWhy + "; no impairment backend"
	}
	return caps
}

// probeQdiscs tries netem and htb on a dummy (or, lacking the dummy driver,
// veth) link in the scratch namespace.
func probeQdiscs(scratch netns.NsHandle) (hasNetem, hasHTB bool, why string) {
	h, err := netlink.NewHandleAt(scratch)
	if err != nil {
		return false, false, fmt.Sprintf("netem qdisc: cannot open netlink in the scratch namespace: %v", err)
	}
	defer h.Close()

	name := RunPrefix + "probe0"
	la := netlink.NewLinkAttrs()
	la.Name = name
	if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: la}); err != nil {
		if err := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: RunPrefix + "probe1"}); err != nil {
			return false, false, fmt.Sprintf("netem qdisc: cannot create a scratch link: %v", err)
		}
	}
	link, err := h.LinkByName(name)
	if err != nil {
		return false, false, fmt.Sprintf("netem qdisc: scratch link vanished: %v", err)
	}
	idx := link.Attrs().Index

	nq := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{Latency: 1000})
	if err := h.QdiscAdd(nq); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			why = "netem qdisc: kernel has no sch_netem (adding one returned ENOENT)"
		} else {
			why = fmt.Sprintf("netem qdisc: adding one failed: %v", err)
		}
	} else {
		hasNetem = true
		why = "netem qdisc available"
		_ = h.QdiscDel(nq)
	}

	hq := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	if err := h.QdiscAdd(hq); err == nil {
		hasHTB = true
		_ = h.QdiscDel(hq)
	}
	return hasNetem, hasHTB, why
}

// probeNFQueue installs an NFQUEUE rule and binds a queue in the scratch
// namespace. The native nft queue expression is not tried: kernels built
// without NFT_QUEUE reject it and roll back the whole batch.
func probeNFQueue(scratch netns.NsHandle) (bool, string) {
	conn, err := nftables.New(nftables.WithNetNSFd(int(scratch)))
	if err != nil {
		return false, fmt.Sprintf("NFQUEUE: cannot open nftables: %v", err)
	}
	t := conn.AddTable(&nftables.Table{Name: RunPrefix + "probe", Family: nftables.TableFamilyINet})
	c := conn.AddChain(&nftables.Chain{Name: "out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	conn.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: []expr.Any{nfqueueTarget(0, true)}})
	if err := conn.Flush(); err != nil {
		return false, fmt.Sprintf("NFQUEUE: the xt NFQUEUE target was rejected: %v", err)
	}

	q, err := nfqueue.Open(&nfqueue.Config{NetNS: int(scratch), NfQueue: 0, Copymode: nfqueue.NfQnlCopyMeta,
		AfFamily: unix.AF_INET})
	if err != nil {
		return false, fmt.Sprintf("NFQUEUE: cannot open nfnetlink_queue: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = q.RegisterWithErrorFunc(ctx, func(nfqueue.Attribute) int { return 0 }, func(error) int { return 1 })
	cancel()
	q.Close()
	if err != nil {
		return false, fmt.Sprintf("NFQUEUE: cannot bind a queue: %v", err)
	}
	return true, "NFQUEUE available"
}

// faultsNewScratchNS creates an unnamed network namespace and returns a
// handle to it, leaving the calling thread where it was.
func faultsNewScratchNS() (netns.NsHandle, error) {
	var scratch netns.NsHandle
	err := onLockedThread(func() error {
		var err error
		scratch, err = netns.New()
		return err
	})
	return scratch, err
}

// faultsDupNS duplicates a namespace handle so the caller may close its own.
func faultsDupNS(ns netns.NsHandle) (netns.NsHandle, error) {
	fd, err := unix.FcntlInt(uintptr(ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return netns.None(), fmt.Errorf("duplicating namespace handle: %w", err)
	}
	return netns.NsHandle(fd), nil
}
