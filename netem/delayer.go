//go:build linux

package netem

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/florianl/go-nfqueue/v2"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

const (
	// delayerQueue is the NFQUEUE number every delayer binds. Queues are per
	// network namespace, so each node namespace can use the same number
	// without clashing with other nodes or other testbeds.
	delayerQueue = 0

	// lossQueue is never bound. Sending a packet to an unbound queue without
	// the bypass flag frees it and reports success to the sender, which is
	// how loss must look: an nftables drop on the output path makes
	// sendto fail with EPERM, and a real network never tells the sender.
	lossQueue = 0xffff

	// delayerMaxQueueLen must cover packets/s × delay; the kernel default
	// (1024) drops beyond 20k pps at 50 ms.
	delayerMaxQueueLen = 65536

	// delayerCopyLen copies whole packets: the IPv4 destination selects the
	// pair impairment and duplicates are re-sent from the copy. Without the
	// GSO flag the kernel segments GSO packets before queueing, so no copy
	// exceeds the MTU.
	delayerCopyLen = 0xffff

	// delayerRcvBuf absorbs bursts while the reader goroutine is descheduled;
	// a full socket makes the kernel drop queued packets.
	delayerRcvBuf = 8 << 20

	// dupMark is the fwmark of duplicates sent through the raw socket; the
	// impairment chain accepts marked packets first so a duplicate is not
	// queued (and duplicated) again.
	dupMark = 0x626c6475 // "bldu"

	// Close waits for a pause of delayerQuiet in queued traffic, at most
	// delayerDrainMax, so packets the kernel queued before the rules went
	// away are accepted instead of dropped by the unbind.
	delayerQuiet    = 5 * time.Millisecond
	delayerDrainMax = 200 * time.Millisecond

	// delayerMaxErrRun consecutive receive errors end the receive loop
	// rather than spinning on a broken socket.
	delayerMaxErrRun = 1000
)

// DelayerStats counts what the NFQUEUE delayer did. The netem backend
// reports zeros.
type DelayerStats struct {
	Queued        uint64 // packets received from the kernel
	Released      uint64 // ACCEPT verdicts issued
	Duplicated    uint64 // copies re-sent through the raw socket
	DupErrors     uint64 // copies the raw socket refused
	VerdictErrors uint64 // verdicts the kernel refused
	Held          int    // packets waiting for their release time now
	LastError     string // last receive or verdict error, if any

	// Wake says how the release loop wakes (see delayer_wake.go), with
	// why it fell back when it did.
	Wake string
	// Lateness of the releases due so far, over every delayer the
	// Impairer ran: verdict time minus release time. LateCount releases
	// were measured; percentiles are read from a log-scale histogram
	// (within 25%, never below the true value); LateOver1ms and
	// LateOver2ms count releases more than 1 and 2 ms late, the latter
	// enough alone to fail the capture's delay check.
	LateCount                 uint64
	LateP50, LateP99, LateMax time.Duration
	LateOver1ms, LateOver2ms  uint64
}

// LateText is the lateness in one line for logs and failure messages,
// "" when nothing was measured.
func (s DelayerStats) LateText() string {
	if s.LateCount == 0 {
		return ""
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return fmt.Sprintf("delayer late p50 %.2f ms, p99 %.2f ms, max %.2f ms; %d of %d releases over 1 ms, %d over 2 ms",
		ms(s.LateP50), ms(s.LateP99), ms(s.LateMax), s.LateOver1ms, s.LateCount, s.LateOver2ms)
}

// nfqueueTarget is the xt NFQUEUE target (revision 3) sending packets to
// queue num. With bypass, traffic passes undelayed rather than being dropped
// while no delayer listens. nft's native queue expression is not used:
// kernels without NFT_QUEUE reject it.
func nfqueueTarget(num uint16, bypass bool) *expr.Target {
	// struct xt_NFQ_info_v3 { __u16 queuenum, queues_total, flags, pad; },
	// native endian as the kernel reads it.
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1) // queues_total
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
	}
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}

// held is one queued packet waiting for its verdict.
type held struct {
	at  time.Time
	seq uint64 // FIFO among equal release times
	id  uint32
	dst [4]byte
	dup []byte // copy to re-send after the original, or nil
}

type heldHeap []held

func (h heldHeap) Len() int { return len(h) }
func (h heldHeap) Less(i, j int) bool {
	if c := h[i].at.Compare(h[j].at); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h heldHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *heldHeap) Push(x any)   { *h = append(*h, x.(held)) }
func (h *heldHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = held{}
	*h = old[:len(old)-1]
	return x
}

// nfqDelayer holds queued packets and accepts each after its delay. One
// goroutine issues all verdicts from a min-heap of release times, so a fixed
// delay keeps packet order and only jitter or reordering changes it, as with
// netem's time-sorted queue.
type nfqDelayer struct {
	q      *nfqueue.Nfqueue
	cancel context.CancelFunc
	rawFD  int // IPPROTO_RAW socket in the node namespace, for duplicates
	late   *lateness

	// wakeFile is the release loop's timerfd and wakeFD its descriptor;
	// nil and -1 when the loop waits on a Go timer and d.wake instead
	// (delayer_wake.go).
	wakeFile *os.File
	wakeFD   int

	mu      sync.Mutex
	pending heldHeap
	seq     uint64
	rng     *rand.Rand
	link    fault.Impairment
	pairs   map[netip.Addr]fault.Impairment
	busy    int  // packets popped for release whose verdicts are not sent yet
	closing bool // release everything now and delay nothing new
	stop    bool // exit once nothing is pending
	lastErr string
	errRun  int    // receive errors since the last packet
	wakeHow string // DelayerStats.Wake

	// tsUnit is the tick of the namespace's TCP timestamps, which count
	// CLOCK_MONOTONIC; 0: they do not (see ImpairerOptions).
	tsUnit time.Duration

	lastRecv atomic.Int64 // UnixNano of the last packet received
	wake     chan struct{}
	done     chan struct{}

	queued, released, duplicated, dupErrs, verdictErrs atomic.Uint64
}

// startDelayer binds queue delayerQueue in namespace ns and starts serving
// it, recording the lateness of its releases in late.
func startDelayer(ns netns.NsHandle, tsUnit time.Duration, late *lateness) (*nfqDelayer, error) {
	var rawFD int
	err := inNamespace(ns, func() error {
		var err error
		rawFD, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		if err != nil {
			return fmt.Errorf("raw socket for duplicates: %w", err)
		}
		if err := unix.SetsockoptInt(rawFD, unix.SOL_SOCKET, unix.SO_MARK, dupMark); err != nil {
			unix.Close(rawFD)
			return fmt.Errorf("marking duplicates: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	q, err := nfqueue.Open(&nfqueue.Config{
		NetNS:        int(ns), // without it the queue binds in our own namespace and nothing is delayed
		NfQueue:      delayerQueue,
		MaxQueueLen:  delayerMaxQueueLen,
		MaxPacketLen: delayerCopyLen,
		Copymode:     nfqueue.NfQnlCopyPacket,
		AfFamily:     unix.AF_INET,
	})
	if err != nil {
		unix.Close(rawFD)
		return nil, fmt.Errorf("opening nfqueue: %w", err)
	}
	// NoENOBUFS: an overrun has already cost the packets the kernel dropped;
	// reporting it as an error would only interrupt serving the rest.
	if err := q.SetOption(mdnetlink.NoENOBUFS, true); err != nil {
		q.Close()
		unix.Close(rawFD)
		return nil, fmt.Errorf("nfqueue NoENOBUFS: %w", err)
	}
	// SO_RCVBUFFORCE: as root we may exceed rmem_max, which is too small for
	// bursts at high packet rates; failing that, SO_RCVBUF up to rmem_max.
	if raw, err := q.Con.SyscallConn(); err == nil {
		var serr error
		_ = raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, delayerRcvBuf)
		})
		if serr != nil {
			_ = q.Con.SetReadBuffer(delayerRcvBuf)
		}
	}

	wakeFile, wakeFD, wakeHow := newWakeTimer()
	seed := uint64(time.Now().UnixNano())
	ctx, cancel := context.WithCancel(context.Background())
	d := &nfqDelayer{
		q:        q,
		cancel:   cancel,
		rawFD:    rawFD,
		late:     late,
		wakeFile: wakeFile,
		wakeFD:   wakeFD,
		wakeHow:  wakeHow,
		rng:      rand.New(rand.NewPCG(seed, seed^0x626c6c62)),
		tsUnit:   tsUnit,
		pairs:    map[netip.Addr]fault.Impairment{},
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if err := q.RegisterWithErrorFunc(ctx, d.onPacket, func(err error) int { return d.onError(ctx, err) }); err != nil {
		cancel()
		q.Close()
		unix.Close(rawFD)
		if wakeFile != nil {
			wakeFile.Close()
		}
		return nil, fmt.Errorf("binding nfqueue %d: %w", delayerQueue, err)
	}
	go d.releaseLoop()
	return d, nil
}

// setPolicy replaces the impairments applied to packets queued from now on;
// packets already held keep their release time.
func (d *nfqDelayer) setPolicy(link fault.Impairment, pairs map[netip.Addr]fault.Impairment) {
	d.mu.Lock()
	d.link = link
	d.pairs = maps.Clone(pairs)
	d.mu.Unlock()
}

// onError keeps the receive loop alive through the errors the kernel sends
// back on the same socket, such as ENOENT for a verdict on a packet it
// already dropped (it drops every queued packet when any base chain in the
// namespace is deleted). Only a closed socket, or an error repeating with no
// packet in between, ends the loop.
func (d *nfqDelayer) onError(ctx context.Context, err error) int {
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrClosed) {
		return 1
	}
	if errors.Is(err, syscall.ENOBUFS) {
		return 0 // the kernel dropped queued packets; keep serving the rest
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lastErr = "receive: " + err.Error()
	if d.errRun++; d.errRun > delayerMaxErrRun {
		return 1
	}
	return 0
}

func (d *nfqDelayer) onPacket(a nfqueue.Attribute) int {
	if a.PacketID == nil {
		return 0
	}
	now := time.Now()
	d.lastRecv.Store(now.UnixNano())
	d.queued.Add(1)
	h := held{at: now, id: *a.PacketID}
	var pkt []byte
	if a.Payload != nil {
		pkt = *a.Payload
	}
	// The rule only queues IPv4, but a short copy must not index out of range.
	ok4 := len(pkt) >= 20 && pkt[0]>>4 == 4
	if ok4 {
		copy(h.dst[:], pkt[16:20])
	}

	d.mu.Lock()
	d.errRun = 0
	if !d.closing && ok4 {
		imp, found := d.pairs[netip.AddrFrom4(h.dst)]
		if !found {
			imp = d.link
		}
		delay := d.sampleDelay(imp)
		h.at = now.Add(delay - min(delay, queuedFor(pkt, d.tsUnit)))
		if imp.Duplicate > 0 && d.rng.Float64()*100 < imp.Duplicate {
			h.dup = append([]byte(nil), pkt...)
		}
	}
	h.seq = d.seq
	d.seq++
	// A packet already due (no delay, reordered, closing, or built longer
	// ago than its delay) goes at once from here when nothing due is
	// waiting or being released before it: waking the release loop for it
	// costs a thread switch per packet, which in a burst of reordered
	// packets slowed this reader enough to hold them back 15 ms. Holding
	// d.mu through the verdict keeps the loop from releasing anything
	// meanwhile, so order is kept.
	if !h.at.After(now) && d.busy == 0 && (len(d.pending) == 0 || d.pending[0].at.After(now)) {
		if err := d.releaseNow(&h); err != "" {
			d.lastErr = err
		}
		d.mu.Unlock()
		return 0
	}
	heap.Push(&d.pending, h)
	if d.pending[0].seq == h.seq {
		d.wakeLocked(h.at.Sub(now))
	}
	d.mu.Unlock()
	return 0
}

// sampleDelay follows netem: uniform jitter around the delay, clamped at
// zero, and a Reorder share of packets sent at once so they overtake the
// delayed ones. Callers hold d.mu (the generator is not safe for concurrency).
func (d *nfqDelayer) sampleDelay(imp fault.Impairment) time.Duration {
	if imp.Reorder > 0 && d.rng.Float64()*100 < imp.Reorder {
		return 0
	}
	delay := imp.Delay
	if imp.Jitter > 0 {
		delay += time.Duration((d.rng.Float64()*2 - 1) * float64(imp.Jitter))
	}
	return max(delay, 0)
}

// wakeLocked has the release loop look at the heap again in after (at
// once when after <= 0): a new packet became the first to release, or the
// delayer is closing. Callers hold d.mu, which orders this with the loop's
// own arming.
func (d *nfqDelayer) wakeLocked(after time.Duration) {
	if d.wakeFD < 0 {
		select {
		case d.wake <- struct{}{}:
		default:
		}
		return
	}
	if err := armWake(d.wakeFD, after, false); err != nil {
		d.lastErr = err.Error()
	}
}

func (d *nfqDelayer) signal() {
	d.mu.Lock()
	d.wakeLocked(0)
	d.mu.Unlock()
}

func (d *nfqDelayer) releaseLoop() {
	defer close(d.done)
	var timer *time.Timer
	if d.wakeFile != nil {
		defer d.wakeFile.Close()
	} else {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
	}
	var due []held
	for {
		d.mu.Lock()
		now := time.Now()
		due = due[:0]
		for len(d.pending) > 0 && (d.closing || !d.pending[0].at.After(now)) {
			due = append(due, heap.Pop(&d.pending).(held))
		}
		next := time.Duration(-1)
		if len(d.pending) > 0 {
			next = d.pending[0].at.Sub(now)
		}
		stop := d.stop
		d.busy = len(due)
		if d.wakeFD >= 0 && !(stop && next < 0) {
			if err := armWake(d.wakeFD, next, next < 0); err != nil {
				d.lastErr = err.Error()
			}
		}
		d.mu.Unlock()

		for i := range due {
			d.release(&due[i])
			due[i] = held{}
		}
		d.mu.Lock()
		d.busy = 0
		d.mu.Unlock()
		if stop && next < 0 {
			return
		}
		if d.wakeFD >= 0 {
			if err := waitWake(d.wakeFile); err != nil {
				d.mu.Lock()
				d.lastErr = err.Error()
				d.mu.Unlock()
				time.Sleep(time.Millisecond) // not a busy loop on a broken timerfd
			}
			continue
		}
		if next >= 0 {
			timer.Reset(next)
		}
		select {
		case <-timer.C:
		case <-d.wake:
		}
		timer.Stop()
	}
}

func (d *nfqDelayer) release(h *held) {
	if err := d.releaseNow(h); err != "" {
		d.mu.Lock()
		d.lastErr = err
		d.mu.Unlock()
	}
}

// releaseNow issues h's verdict and sends its duplicate, returning the
// verdict's error for d.lastErr, "" when it had none. It takes no lock.
func (d *nfqDelayer) releaseNow(h *held) string {
	d.late.record(time.Since(h.at))
	if err := d.q.SetVerdict(h.id, nfqueue.NfAccept); err != nil {
		d.verdictErrs.Add(1)
		return "verdict: " + err.Error()
	}
	d.released.Add(1)
	if h.dup == nil {
		return ""
	}
	// MSG_DONTWAIT: a full socket loses the copy instead of stalling every
	// other release behind it.
	if err := unix.Sendto(d.rawFD, h.dup, unix.MSG_DONTWAIT, &unix.SockaddrInet4{Addr: h.dst}); err != nil {
		d.dupErrs.Add(1)
		return ""
	}
	d.duplicated.Add(1)
	return ""
}

// drained reports whether every packet received has its verdict and the
// queue has been quiet for delayerQuiet.
func (d *nfqDelayer) drained() bool {
	d.mu.Lock()
	idle := len(d.pending) == 0 && d.busy == 0
	d.mu.Unlock()
	return idle && time.Since(time.Unix(0, d.lastRecv.Load())) >= delayerQuiet
}

func (d *nfqDelayer) stats() DelayerStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := DelayerStats{
		Queued:        d.queued.Load(),
		Released:      d.released.Load(),
		Duplicated:    d.duplicated.Load(),
		DupErrors:     d.dupErrs.Load(),
		VerdictErrors: d.verdictErrs.Load(),
		Held:          len(d.pending),
		LastError:     d.lastErr,
		Wake:          d.wakeHow,
	}
	d.late.fill(&s)
	return s
}

// close accepts every held packet at once, keeps accepting stragglers until
// all verdicts are out and the queue has been quiet for a moment, then
// unbinds the queue (which drops whatever is still queued) and waits for
// both goroutines. Callers remove the queueing rules first.
func (d *nfqDelayer) close() error {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	d.signal()

	deadline := time.Now().Add(delayerDrainMax)
	for time.Now().Before(deadline) && !d.drained() {
		time.Sleep(time.Millisecond)
	}

	d.cancel()
	err := d.q.Close() // waits for the receive goroutine

	// One critical section: once the loop sees stop it closes its
	// timerfd, which must not be armed after that.
	d.mu.Lock()
	d.stop = true
	d.wakeLocked(0)
	d.mu.Unlock()
	<-d.done

	if cerr := unix.Close(d.rawFD); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("closing nfqueue: %w", err)
	}
	return nil
}
