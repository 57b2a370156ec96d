//go:build linux

package netem

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/vishvananda/netns"
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
	// TCPTimestampUnit is the tick of the node's TCP timestamps when they
	// count CLOCK_MONOTONIC (Testbed.TCPTimestampUnit), 0 when they do not.
	// With it the NFQUEUE delayer counts a TCP segment's delay from when
	// the kernel built it, not from when the delayer read it off the queue,
	// so a busy host does not lengthen the delay.
	TCPTimestampUnit time.Duration
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
	if err := CheckRunName(run); err != nil {
		return nil, fmt.Errorf("impairer: %w", err)
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

	own, err := dupNS(ns)
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
		b, err = newNFQBackend(own, run, link, opts.TCPTimestampUnit)
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

// joinErrors combines errors on one line, still matching errors.Is for each.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w; %w", errs[0], joinErrors(errs[1:]))
}
