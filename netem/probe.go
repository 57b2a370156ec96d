//go:build linux

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

// fault.Impairment backends.
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

// probed caches Probe's result. An error is not cached: the probe runs
// again at the next call.
var probed struct {
	sync.Mutex
	done bool
	caps Capabilities
}

// probeScratchNS creates the probe's scratch namespace; tests replace it to
// make the probe fail.
var probeScratchNS = newScratchNS

// Probe reports what this kernel supports. A feature the kernel lacks is a
// false field, with why in Reason. An error means that the probe could not
// run, so that nothing is known: it wraps ErrNotPermitted when this process
// may not create network namespaces and ErrNotSupported when the kernel
// has none; any other error is a failure, such as a netlink request that
// failed for a reason other than a missing feature. A result is kept for
// the process and later calls return it; after an error the next call
// probes again.
func Probe() (Capabilities, error) {
	probed.Lock()
	defer probed.Unlock()
	if probed.done {
		return probed.caps, nil
	}
	caps, err := probeKernel()
	if err != nil {
		return Capabilities{}, fmt.Errorf("probing the kernel for fault injection: %w", err)
	}
	probed.done, probed.caps = true, caps
	return caps, nil
}

func probeKernel() (Capabilities, error) {
	// An unnamed namespace vanishes with its last fd, so a crash in the
	// middle of probing leaves nothing to clean up.
	scratch, err := probeScratchNS()
	if err != nil {
		return Capabilities{}, fmt.Errorf("creating a scratch network namespace: %w", classify(err))
	}
	defer scratch.Close()

	var caps Capabilities
	netemWhy, err := probeQdiscs(scratch, &caps)
	if err != nil {
		return Capabilities{}, err
	}
	var nfqWhy string
	caps.NFQueue, nfqWhy, err = probeNFQueue(scratch)
	if err != nil {
		return Capabilities{}, err
	}

	switch {
	case caps.Netem:
		caps.Reason = "netem qdisc available; using netem"
	case caps.NFQueue:
		caps.Reason = netemWhy + "; using the NFQUEUE delayer"
	default:
		caps.Reason = netemWhy + "; " + nfqWhy + "; no impairment backend"
	}
	return caps, nil
}

// lacks reports whether err is what a kernel answers when it lacks the
// module or option a request needs: an unknown qdisc, link or nftables
// expression kind (ENOENT, EOPNOTSUPP), netlink family (EPROTONOSUPPORT)
// or nftables table family (EAFNOSUPPORT).
func lacks(err error) bool {
	for _, e := range []error{unix.ENOENT, unix.EOPNOTSUPP, unix.EPROTONOSUPPORT, unix.EAFNOSUPPORT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// probeQdiscs tries netem and htb on a dummy (or, lacking the dummy driver,
// veth) link in the scratch namespace, setting caps.Netem and caps.HTB. why
// says whether netem is available, and why not.
func probeQdiscs(scratch netns.NsHandle, caps *Capabilities) (why string, err error) {
	h, err := netlink.NewHandleAt(scratch)
	if err != nil {
		return "", fmt.Errorf("netem qdisc: opening netlink in the scratch namespace: %w", err)
	}
	defer h.Close()

	name := RunPrefix + "probe0"
	la := netlink.NewLinkAttrs()
	la.Name = name
	if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: la}); err != nil {
		verr := h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: RunPrefix + "probe1"})
		switch {
		case verr != nil && lacks(err) && lacks(verr):
			return fmt.Sprintf("netem qdisc: kernel has neither dummy nor veth links to try it on (%v; %v)", err, verr), nil
		case verr != nil:
			return "", fmt.Errorf("netem qdisc: creating a scratch link: dummy: %w; veth: %w", err, verr)
		}
	}
	link, err := h.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("netem qdisc: scratch link vanished: %w", err)
	}
	idx := link.Attrs().Index

	nq := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{Latency: 1000})
	switch err := h.QdiscAdd(nq); {
	case err == nil:
		caps.Netem = true
		why = "netem qdisc available"
		_ = h.QdiscDel(nq)
	case errors.Is(err, syscall.ENOENT):
		why = "netem qdisc: kernel has no sch_netem (adding one returned ENOENT)"
	default:
		return "", fmt.Errorf("netem qdisc: adding one to a scratch link: %w", err)
	}

	hq := netlink.NewHtb(netlink.QdiscAttrs{LinkIndex: idx, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	switch err := h.QdiscAdd(hq); {
	case err == nil:
		caps.HTB = true
		_ = h.QdiscDel(hq)
	case errors.Is(err, syscall.ENOENT): // no sch_htb
	default:
		return "", fmt.Errorf("htb qdisc: adding one to a scratch link: %w", err)
	}
	return why, nil
}

// probeNFQueue installs an NFQUEUE rule and binds a queue in the scratch
// namespace. why says why not when the kernel lacks what that needs. The
// native nft queue expression is not tried: kernels built without
// NFT_QUEUE reject it and roll back the whole batch.
func probeNFQueue(scratch netns.NsHandle) (ok bool, why string, err error) {
	conn, err := nftables.New(nftables.WithNetNSFd(int(scratch)))
	if err != nil {
		return false, "", fmt.Errorf("NFQUEUE: opening nftables: %w", err)
	}
	t := conn.AddTable(&nftables.Table{Name: RunPrefix + "probe", Family: nftables.TableFamilyINet})
	c := conn.AddChain(&nftables.Chain{Name: "out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter})
	conn.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: []expr.Any{nfqueueTarget(0, true)}})
	if err := conn.Flush(); lacks(err) {
		return false, fmt.Sprintf("NFQUEUE: the kernel lacks nftables or the xt NFQUEUE target: %v", err), nil
	} else if err != nil {
		return false, "", fmt.Errorf("NFQUEUE: installing a rule with the xt NFQUEUE target: %w", err)
	}

	q, err := nfqueue.Open(&nfqueue.Config{NetNS: int(scratch), NfQueue: 0, Copymode: nfqueue.NfQnlCopyMeta,
		AfFamily: unix.AF_INET})
	if lacks(err) {
		return false, fmt.Sprintf("NFQUEUE: the kernel lacks nfnetlink: %v", err), nil
	} else if err != nil {
		return false, "", fmt.Errorf("NFQUEUE: opening nfnetlink_queue: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = q.RegisterWithErrorFunc(ctx, func(nfqueue.Attribute) int { return 0 }, func(error) int { return 1 })
	cancel()
	q.Close()
	// nfnetlink answers EINVAL to a request for a subsystem it lacks, here
	// nfnetlink_queue.
	if lacks(err) || errors.Is(err, unix.EINVAL) {
		return false, fmt.Sprintf("NFQUEUE: the kernel lacks nfnetlink_queue: %v", err), nil
	} else if err != nil {
		return false, "", fmt.Errorf("NFQUEUE: binding a queue: %w", err)
	}
	return true, "NFQUEUE available", nil
}

// newScratchNS creates an unnamed network namespace and returns a
// handle to it, leaving the calling thread where it was.
func newScratchNS() (netns.NsHandle, error) {
	var scratch netns.NsHandle
	err := onLockedThread(func() error {
		var err error
		scratch, err = netns.New()
		return err
	})
	return scratch, err
}

// dupNS duplicates a namespace handle so the caller may close its own.
func dupNS(ns netns.NsHandle) (netns.NsHandle, error) {
	fd, err := unix.FcntlInt(uintptr(ns), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return netns.None(), fmt.Errorf("duplicating namespace handle: %w", err)
	}
	return netns.NsHandle(fd), nil
}
