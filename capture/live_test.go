//go:build linux

package capture_test

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/capture/capturetest"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inNamespace runs fn on a thread switched into the named namespace.
func inNamespace(t testing.TB, name string, fn func() error) error {
	t.Helper()
	ns, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	defer ns.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- err
			return // the thread stays locked and dies
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// liveTestbed is a running testbed with a capture into a file.
type liveTestbed struct {
	tb    *netem.Testbed
	nodes []capture.NodeInfo
	path  string
	file  *os.File
	w     *capture.Writer
	live  *capture.Live
}

// startLiveTestbed builds a star of n nodes and starts capturing it.
func startLiveTestbed(t *testing.T, n int, dir string) *liveTestbed {
	t.Helper()
	tb := netemtest.Star(t, n)
	run := tb.Run()
	var nodes []capture.NodeInfo
	ports := map[int]capture.NodePort{}
	for i, sn := range tb.Nodes() {
		addr := netip.MustParseAddr(sn.Addr)
		nodes = append(nodes, capture.NodeInfo{Name: sn.Name, Index: sn.Index, ID: capture.SynthNodes(n, 0)[i].ID, Addr: addr, Port: tb.Topology().Port})
		var mac net.HardwareAddr
		err := inNamespace(t, sn.Namespace, func() error {
			h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
			if err != nil {
				return err
			}
			defer h.Close()
			l, err := h.LinkByName(netem.NodeVeth)
			if err != nil {
				return err
			}
			mac = l.Attrs().HardwareAddr
			return nil
		})
		if err != nil {
			t.Fatalf("MAC of %s: %v", sn.Name, err)
		}
		ports[sn.Index] = capture.NodePort{Veth: sn.SwitchVeth, MAC: mac}
	}
	path := filepath.Join(dir, run+".pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := capture.NewWriter(f, capture.WriterOptions{Testbed: capture.TestbedInfo{Topology: tb.Topology().Name, Run: run, Nodes: nodes}})
	if err != nil {
		t.Fatal(err)
	}
	swNS, err := netns.GetFromName(netem.SwitchNamespace(run))
	if err != nil {
		t.Fatal(err)
	}
	defer swNS.Close()
	live, err := capture.StartLive(t.Context(), swNS, ports, w)
	if err != nil {
		t.Fatal(err)
	}
	lt := &liveTestbed{tb: tb, nodes: nodes, path: path, file: f, w: w, live: live}
	t.Cleanup(func() { lt.stop(t) })
	return lt
}

// stop ends the capture and closes the file; it returns the counters.
func (lt *liveTestbed) stop(t *testing.T) capture.Stats {
	t.Helper()
	if lt.live == nil {
		return capture.Stats{}
	}
	st, err := lt.live.Stop()
	lt.live = nil
	if err != nil {
		t.Errorf("capture: %v", err)
	}
	if err := lt.w.Close(); err != nil {
		t.Errorf("closing writer: %v", err)
	}
	if err := lt.file.Close(); err != nil {
		t.Error(err)
	}
	return st
}

// traffic opens a one-way connection from every node to every other and
// sends frames over it, as bullylab nodes do; it returns the frames sent
// per (from, to) node pair, by type.
func (lt *liveTestbed) traffic(t *testing.T, rounds int) map[[2]int]*counts {
	t.Helper()
	got := lt.listen(t)
	sent := map[[2]int]*counts{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for a := range lt.nodes {
		for b := range lt.nodes {
			if a == b {
				continue
			}
			c := lt.dial(t, a, b)
			cnt := &counts{}
			sent[[2]int{a, b}] = cnt
			wg.Go(func() {
				defer c.Close()
				lt.send(t, c, a, b, rounds, func(typ wire.Type) {
					mu.Lock()
					cnt.add(typ)
					mu.Unlock()
				})
			})
		}
	}
	wg.Wait()
	awaitReceivers(t, got, len(lt.nodes)*(len(lt.nodes)-1), rep0(sent))
	return sent
}

// listen starts a listener on every node, closed when the test ends, that
// accepts connections and reads frames from them; it returns the channel
// on which each connection's frame count arrives when it closes.
func (lt *liveTestbed) listen(t *testing.T) <-chan int {
	t.Helper()
	port := lt.tb.Topology().Port
	got := make(chan int, len(lt.nodes)*len(lt.nodes))
	for _, n := range lt.nodes {
		ns, _ := lt.tb.Namespace(n.Name)
		var ln net.Listener
		err := inNamespace(t, ns, func() (err error) {
			ln, err = net.Listen("tcp4", netip.AddrPortFrom(n.Addr, uint16(port)).String())
			return err
		})
		if err != nil {
			t.Fatalf("listening on %s: %v", n.Name, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					rd := wire.NewReader(c, 0)
					var m wire.Message
					k := 0
					for rd.Read(&m) == nil {
						k++
					}
					got <- k
				}()
			}
		}()
	}
	return got
}

// dial connects node a to node b's listener.
func (lt *liveTestbed) dial(t *testing.T, a, b int) net.Conn {
	t.Helper()
	na, nb := lt.nodes[a], lt.nodes[b]
	ns, _ := lt.tb.Namespace(na.Name)
	var c net.Conn
	// Retried: a fresh testbed's links may take a moment to pass
	// traffic (the kernel's linkwatch defers carrier changes).
	var err error
	for try := 0; try < 10; try++ {
		err = inNamespace(t, ns, func() (err error) {
			c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(nb.Addr, uint16(lt.tb.Topology().Port)).String(), time.Second)
			return err
		})
		if err == nil {
			return c
		}
	}
	t.Fatalf("dialing %s from %s: %v", nb.Name, na.Name, err)
	return nil
}

// send writes rounds rounds of frames from node a to node b on c, every
// type in turn, and counts each frame with sent.
func (lt *liveTestbed) send(t *testing.T, c net.Conn, a, b, rounds int, sent func(wire.Type)) {
	na, nb := lt.nodes[a], lt.nodes[b]
	members := lt.members()
	var buf []byte
	for r := range rounds {
		buf = buf[:0]
		for _, typ := range roundTypes(r) {
			m := wire.Message{Type: typ, Epoch: uint64(r), From: na.ID, Flags: uint8(wire.ReasonManual)}
			switch typ {
			case wire.TypeMembers:
				m.Payload = wire.AppendMembers(nil, members)
			case wire.TypeReject:
				m.Payload = wire.AppendID(nil, nb.ID)
			case wire.TypeJoin:
				m.Payload = wire.AppendAddr(nil, "10.77.0.9:7946")
			}
			buf = wire.Append(buf, &m)
			sent(typ)
		}
		// Several frames per write now and then, one at a time
		// otherwise, as a node's writer does.
		if err := write(c, buf, r%3 == 0); err != nil {
			t.Errorf("write %s->%s: %v", na.Name, nb.Name, err)
			return
		}
		if r%50 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// members is a membership list of the testbed's nodes and made-up ones: a
// MEMBERS frame of some 12 KB, several segments.
func (lt *liveTestbed) members() []wire.Member {
	port := lt.tb.Topology().Port
	var members []wire.Member
	for _, n := range lt.nodes {
		members = append(members, wire.Member{ID: n.ID, Addr: fmt.Sprintf("%s:%d", n.Addr, port)})
	}
	for len(members) < 300 {
		members = append(members, wire.Member{ID: uuid.New(), Addr: "10.77.200.200:7946"})
	}
	return members
}

// roundTypes are the types of the frames of round r.
func roundTypes(r int) []wire.Type {
	switch r % 4 {
	case 0:
		return []wire.Type{wire.TypeElection, wire.TypeAnswer, wire.TypeHalt}
	case 1:
		return []wire.Type{wire.TypeHaltAck, wire.TypeCoordinator}
	case 2:
		return []wire.Type{wire.TypeHeartbeat}
	default:
		return []wire.Type{wire.TypeMembers, wire.TypeReject, wire.TypeJoin}
	}
}

// write writes the frames in buf to c, at once or one frame per write.
func write(c net.Conn, buf []byte, atOnce bool) error {
	if atOnce {
		_, err := c.Write(buf)
		return err
	}
	for len(buf) > 0 {
		n, _ := wire.FrameLen(buf)
		if _, err := c.Write(buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}

// awaitReceivers checks that the receivers of conns connections got want
// frames in all: every frame arrived, counted before the FINs.
func awaitReceivers(t *testing.T, got <-chan int, conns int, want int64) {
	t.Helper()
	var received int64
	for range conns {
		select {
		case k := <-got:
			received += int64(k)
		case <-time.After(10 * time.Second):
			t.Fatal("receivers did not finish")
		}
	}
	if received != want {
		t.Fatalf("receivers got %d frames, senders sent %d", received, want)
	}
}

// counts counts frames by wire.Type; 0 holds unknown types.
type counts [16]int64

func (c *counts) add(t wire.Type) {
	if t.Valid() {
		c[t]++
	} else {
		c[0]++
	}
}

// typeCounts returns c as the report counts it.
func (c *counts) typeCounts() capture.TypeCounts {
	return capture.TypeCounts{
		Election: c[wire.TypeElection], Answer: c[wire.TypeAnswer], Halt: c[wire.TypeHalt],
		HaltAck: c[wire.TypeHaltAck], Reject: c[wire.TypeReject], Coordinator: c[wire.TypeCoordinator],
		Heartbeat: c[wire.TypeHeartbeat], Join: c[wire.TypeJoin], Leave: c[wire.TypeLeave],
		Members: c[wire.TypeMembers], Hello: c[wire.TypeHello], Unknown: c[0],
	}
}

// rep0 sums the frames sent.
func rep0(sent map[[2]int]*counts) int64 {
	var n int64
	for _, c := range sent {
		for _, v := range c {
			n += v
		}
	}
	return n
}

// checkHandler checks every frame's interface against its sender.
type checkHandler struct {
	t      *testing.T
	ifaces []*capture.Interface
	byAddr map[netip.Addr]int
	got    map[[2]int]*counts
	errs   int
}

func (h *checkHandler) Frame(f *capture.Frame) {
	a, b := h.byAddr[f.Src.Addr()], h.byAddr[f.Dst.Addr()]
	if f.Iface >= len(h.ifaces) || h.ifaces[f.Iface].Node == nil || h.ifaces[f.Iface].Node.Addr != f.Src.Addr() {
		h.t.Errorf("frame %s from %s captured on interface %d", f.Msg.Type, f.Src, f.Iface)
	}
	c := h.got[[2]int{a, b}]
	if c == nil {
		c = &counts{}
		h.got[[2]int{a, b}] = c
	}
	c.add(f.Msg.Type)
}

func (h *checkHandler) StreamError(e *capture.StreamError) {
	h.errs++
	h.t.Errorf("stream error: %v", e)
}

func TestLiveCapture(t *testing.T) {
	netemtest.RequireRoot(t)
	lt := startLiveTestbed(t, 3, t.TempDir())
	sent := lt.traffic(t, 400)
	// No wait before stopping: every frame has reached its receiver, so it
	// crossed the switch and sits in the ring, which Stop drains.
	st := lt.stop(t)
	t.Logf("capture: %d packets, %d drops, %d freezes, %d unmatched, %d wrong source, %d late",
		st.Packets, st.Drops, st.Freezes, st.Unmatched, st.WrongSource, st.Late)
	if st.Drops != 0 || st.Packets == 0 {
		t.Errorf("socket counters: %+v", st)
	}

	data, err := os.ReadFile(lt.path)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := capture.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	h := &checkHandler{t: t, byAddr: map[netip.Addr]int{}, got: map[[2]int]*counts{}}
	for i, n := range lt.nodes {
		h.byAddr[n.Addr] = i
	}
	d := capture.NewDissector(h, capture.DissectorOptions{})
	type segKey struct {
		iface int
		data  string
	}
	seen := map[segKey]bool{}
	dups := 0
	var last time.Time
	for {
		p, err := rd.Next()
		if err != nil {
			break
		}
		if p.CI.Timestamp.Before(last) {
			t.Errorf("packet %d is older than the one before", p.Num)
		}
		last = p.CI.Timestamp
		if p.Record != nil || p.Iface.Events {
			continue
		}
		if h.ifaces == nil {
			h.ifaces = rd.Interfaces()
		}
		// A frame seen twice would repeat its IP header (ID) and TCP
		// header byte for byte.
		k := segKey{p.CI.InterfaceIndex, string(p.Data[14:min(len(p.Data), 54)])}
		if seen[k] {
			dups++
		}
		seen[k] = true
		d.Packet(p.Num, p.Iface.LinkType, p.Data, &p.CI)
	}
	d.Flush()
	if dups != 0 {
		t.Errorf("%d packets captured twice", dups)
	}
	for k, want := range sent {
		got := h.got[k]
		if got == nil || *got != *want {
			t.Errorf("%s -> %s: captured %v, sent %v", lt.nodes[k[0]].Name, lt.nodes[k[1]].Name, got, *want)
		}
	}
	ds := d.Stats()
	// Retransmitted may be non-zero: Linux's tail loss probe resends a
	// segment the receiver's delayed ACK left unacknowledged for a while.
	t.Logf("dissector: %+v", ds)
	if ds.Corrupt != 0 || ds.Gaps != 0 || ds.Frames != rep0(sent) {
		t.Errorf("dissector: %+v", ds)
	}

	rep, err := capture.AnalyzeFile(lt.path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var total counts
	for _, c := range sent {
		for ty, v := range c {
			total[ty] += v
		}
	}
	if rep.Messages != total.typeCounts() {
		t.Errorf("analyze: %+v, sent %+v", rep.Messages, total.typeCounts())
	}
	if rep.Capture == nil || rep.Capture.Drops != 0 {
		t.Errorf("end record: %+v", rep.Capture)
	}
}

// luaScript is the Wireshark dissector, relative to this package.
var luaScript = filepath.Join("..", "scripts", "bullylab.lua")

// TestTsharkLive compares tshark's counts with the analyzer's on a capture
// of real TCP connections between testbed nodes.
func TestTsharkLive(t *testing.T) {
	tshark := capturetest.RequireTshark(t)
	lt := startLiveTestbed(t, 3, t.TempDir())
	lt.traffic(t, 200)
	lt.stop(t)
	rep, err := capture.AnalyzeFile(lt.path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byType, _ := capturetest.Types(t, tshark, luaScript, lt.path, capturetest.TsharkOptions...)
	var got counts
	for ty, n := range byType {
		if ty.Valid() {
			got[ty] += n
		} else {
			got[0] += n
		}
	}
	if got.typeCounts() != rep.Messages || rep.Frames == 0 {
		t.Errorf("tshark found %+v\nanalyzer found %+v", got.typeCounts(), rep.Messages)
	}
	t.Logf("%d frames; analyzer and tshark agree: %+v", rep.Frames, rep.Messages)
}
