//go:build linux

package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/gopacket/gopacket/afpacket"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Live capture in the switch namespace.
//
// One AF_PACKET socket, not bound to an interface, sees every frame the
// switch routes twice: incoming on the sender's port and outgoing on the
// receiver's. The socket's classic BPF filter keeps only frames that are
// not outgoing (SKF_AD_PKTTYPE != PACKET_OUTGOING): exactly one copy of
// each frame, on the port of the node that sent it.
//
// The filter can only be attached once the socket exists, and gopacket's
// afpacket binds and maps the ring first, so frames arriving in between
// are not filtered. Start therefore also filters in user space what it can
// tell without the packet type: frames from an interface that is no node's
// port are dropped (Unmatched), and, for ports whose node MAC is known,
// frames whose source MAC is not the node's are dropped (WrongSource): an
// outgoing copy on a port carries the switch's MAC. Start the capture
// before the nodes to make the window moot.

// Live is a running capture.
type Live struct {
	tp       *afpacket.TPacket
	w        *Writer
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	err      error
	stats    Stats
	stopOnce sync.Once
}

// liveBlockTimeout is how long TPACKET_V3 keeps a block open before
// handing it over; it bounds how late a packet is read on a quiet network.
const liveBlockTimeout = 10 * time.Millisecond

// StartLive captures in the switch namespace switchNS into w. ports maps a
// node's topology index to its switch port; w must have an interface for
// each of those nodes. The capture runs until ctx is done or Stop. Live
// capture needs Linux: elsewhere Start returns ErrNotSupported.
func StartLive(ctx context.Context, switchNS netns.NsHandle, ports map[int]NodePort, w *Writer, opts ...LiveOptions) (*Live, error) {
	if len(ports) == 0 {
		return nil, errors.New("capture: no ports to capture")
	}
	h, err := netlink.NewHandleAt(switchNS, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("capture: netlink in the switch namespace: %w", err)
	}
	defer h.Close()
	type portInfo struct {
		iface int
		mac   net.HardwareAddr
	}
	byIfindex := map[int]portInfo{}
	for index, p := range ports {
		link, err := h.LinkByName(p.Veth)
		if err != nil {
			return nil, fmt.Errorf("capture: switch port %s of node %d: %w", p.Veth, index, err)
		}
		iface, ok := w.NodeInterface(index)
		if !ok {
			return nil, fmt.Errorf("capture: the writer has no interface for node %d", index)
		}
		if m := link.Attrs().MasterIndex; m != 0 {
			// A switch built by an older version, a bridge: the filter
			// would keep the bridge device's copy of every frame too.
			return nil, fmt.Errorf("capture: switch port %s is on a bridge (ifindex %d): the run was built by an older bullylab", p.Veth, m)
		}
		byIfindex[link.Attrs().Index] = portInfo{iface, p.MAC}
	}
	prog := []bpf.Instruction{
		bpf.LoadExtension{Num: bpf.ExtType},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.PACKET_OUTGOING, SkipTrue: 1},
		bpf.RetConstant{Val: DefaultSnapLen},
		bpf.RetConstant{Val: 0},
	}
	var exclude []uint32
	for _, o := range opts {
		for _, name := range o.Exclude {
			link, err := h.LinkByName(name)
			if err != nil {
				return nil, fmt.Errorf("capture: excluded device %s: %w", name, err)
			}
			exclude = append(exclude, uint32(link.Attrs().Index))
		}
	}
	if len(exclude) > 0 {
		// Before the rest: frames on an excluded device go nowhere.
		head := []bpf.Instruction{bpf.LoadExtension{Num: bpf.ExtInterfaceIndex}}
		for i, idx := range exclude {
			// Past the remaining tests and the final load, to the drop.
			head = append(head, bpf.JumpIf{Cond: bpf.JumpEqual, Val: idx, SkipTrue: uint8(len(exclude) - i + len(prog) - 2)})
		}
		prog = append(head, prog...)
	}
	filter, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("capture: assembling the filter: %w", err)
	}
	tp, err := openInNamespace(switchNS, filter)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Live{tp: tp, w: w, cancel: cancel, done: make(chan struct{})}
	go l.run(ctx, func(ifindex int) (int, net.HardwareAddr, bool) {
		p, ok := byIfindex[ifindex]
		return p.iface, p.mac, ok
	})
	return l, nil
}

// openInNamespace opens the socket on a thread switched into ns: a socket
// belongs to the namespace it was created in, whatever thread reads it.
// A thread that cannot be switched back is left locked, so Go discards it.
func openInNamespace(ns netns.NsHandle, filter []bpf.RawInstruction) (*afpacket.TPacket, error) {
	type result struct {
		tp  *afpacket.TPacket
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{nil, fmt.Errorf("capture: this thread's namespace: %w", err)}
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			c <- result{nil, fmt.Errorf("capture: entering the switch namespace: %w", err)}
			return
		}
		tp, err := afpacket.NewTPacket(
			afpacket.TPacketVersion3,
			afpacket.OptFrameSize(1<<16),
			// 64 MiB in 512 blocks. The kernel hands a block over when it
			// is full or liveBlockTimeout after its first packet, so on a
			// slow trickle every block holds a few packets and the ring
			// lasts blocks x liveBlockTimeout while this reader waits for a
			// core: 64 blocks of 1 MiB lasted 640 ms and dropped 14,192 of
			// 54,654 packets behind 64 busy node processes; 512 last 5 s,
			// and at full rate hold as much (0 drops at 40k segments/s).
			afpacket.OptBlockSize(1<<17),
			afpacket.OptNumBlocks(512),
			afpacket.OptBlockTimeout(liveBlockTimeout),
			afpacket.OptPollTimeout(50*time.Millisecond),
		)
		if err == nil {
			if err = tp.SetBPF(filter); err != nil {
				tp.Close()
				tp, err = nil, fmt.Errorf("capture: attaching the filter: %w", err)
			}
		} else {
			err = fmt.Errorf("capture: opening AF_PACKET socket: %w", err)
		}
		if rerr := netns.Set(orig); rerr != nil {
			if tp != nil {
				tp.Close()
			}
			c <- result{nil, errors.Join(err, fmt.Errorf("capture: restoring the thread's namespace: %w", rerr))}
			return // still locked: the thread dies with the goroutine
		}
		runtime.UnlockOSThread()
		c <- result{tp, err}
	}()
	r := <-c
	return r.tp, r.err
}

func (l *Live) run(ctx context.Context, port func(int) (int, net.HardwareAddr, bool)) {
	defer close(l.done)
	var unmatched, wrong uint64
	var stopAt time.Time
	for {
		if stopAt.IsZero() && ctx.Err() != nil {
			stopAt = time.Now()
		}
		data, ci, err := l.tp.ZeroCopyReadPacketData()
		if err != nil {
			if errors.Is(err, afpacket.ErrTimeout) {
				// The poll timeout exceeds the block timeout, so the ring
				// now holds nothing that arrived before the stop.
				if !stopAt.IsZero() {
					break
				}
				// Nothing in the ring: everything up to one block timeout
				// ago has been read, so the writer may move on.
				if err := l.w.Advance(time.Now().Add(-liveBlockTimeout)); err != nil {
					l.fail(err)
					return
				}
				continue
			}
			if errors.Is(err, unix.EINTR) {
				continue
			}
			l.fail(fmt.Errorf("capture: reading: %w", err))
			return
		}
		if !stopAt.IsZero() && ci.Timestamp.After(stopAt) {
			break
		}
		iface, mac, ok := port(ci.InterfaceIndex)
		if !ok {
			unmatched++
			continue
		}
		if mac != nil && len(data) >= 12 && string(data[6:12]) != string(mac) {
			wrong++
			continue
		}
		if err := l.w.WriteFrame(iface, ci.Timestamp, data, ci.Length); err != nil {
			l.fail(err)
			return
		}
	}
	l.mu.Lock()
	l.stats.Unmatched, l.stats.WrongSource = unmatched, wrong
	l.mu.Unlock()
}

func (l *Live) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// Stop ends the capture once the frames that arrived before it are read,
// reads the socket's counters (packets accepted by
// the filter, drops for lack of ring space, queue freezes), hands them to
// the Writer for its end record and returns them with the first error the
// capture met. It does not close the Writer.
func (l *Live) Stop() (Stats, error) {
	l.stopOnce.Do(func() {
		l.cancel()
		<-l.done
		_, v3, err := l.tp.SocketStats()
		l.tp.Close()
		l.mu.Lock()
		if err != nil && l.err == nil {
			l.err = fmt.Errorf("capture: reading socket statistics: %w", err)
		}
		l.stats.Packets, l.stats.Drops, l.stats.Freezes = uint64(v3.Packets()), uint64(v3.Drops()), uint64(v3.QueueFreezes())
		l.mu.Unlock()
		l.w.noteCapture(l.stats)
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats, l.err
}
