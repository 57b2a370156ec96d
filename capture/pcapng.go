package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/google/uuid"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// LinkTypeEvents is the link type of the events interface: DLT_USER0,
// which Wireshark shows as raw data with the packet comment, or, with
// scripts/bullylab.lua, as the record's fields (bullylab.record.*).
const LinkTypeEvents layers.LinkType = 147

// EventsInterfaceName names the events interface.
const EventsInterfaceName = "bullylab-events"

// RecordVersion is the version of Record this package writes.
const RecordVersion = 1

// DefaultSnapLen is the snap length recorded and captured: veth frames are
// GSO super-frames of up to 64 KiB plus headers, so 65536 is not quite
// enough; 262144 is tcpdump's default.
const DefaultSnapLen = 262144

// The kinds of the records a capture adds around the faults' (see Records
// in the package doc): they are no faults, and a testbed never suffers
// them. A Record's Kind is one of these or a fault kind; the kinds are
// open: readers keep kinds they do not know.
const (
	KindTestbed fault.Kind = "testbed" // first record: topology, run, nodes
	KindEnd     fault.Kind = "end"     // last record: the capture's counters
)

// RecordKinds lists every kind of record this package writes: the
// testbed record, the fault kinds, the end record.
func RecordKinds() []fault.Kind {
	return slices.Concat([]fault.Kind{KindTestbed}, fault.Kinds, []fault.Kind{KindEnd})
}

// NodeInfo is one testbed node as a capture describes it, in the testbed
// record and in its interface's description.
type NodeInfo struct {
	Name  string     `json:"name"`  // its name in the topology, such as "n5"; no spaces
	Index int        `json:"index"` // its 1-based position in the topology
	ID    uuid.UUID  `json:"id"`    // its node ID, canonical UUID text; the higher wins elections
	Addr  netip.Addr `json:"addr"`  // its IP address
	Port  int        `json:"port"`  // its election port (TCP)
}

// TestbedInfo is the payload of the testbed record: the testbed the
// capture was taken on.
type TestbedInfo struct {
	Topology string     `json:"topology"` // the topology's name
	Run      string     `json:"run"`      // the run's ID
	Nodes    []NodeInfo `json:"nodes"`    // in interface order
	// Election timings of the nodes in nanoseconds, 0 (omitted) when
	// unknown; the analyzer derives its quiet gap from ElectionTimeoutNS.
	HeartbeatNS       int64 `json:"heartbeat_ns,omitempty"`
	FailureTimeoutNS  int64 `json:"failure_timeout_ns,omitempty"`
	ElectionTimeoutNS int64 `json:"election_timeout_ns,omitempty"`
	// Clock relates the nodes' TCP timestamps to the capture's time line;
	// nil when the testbed did not say (then messages have no send times).
	Clock *ClockInfo `json:"clock,omitempty"`
	// Hosts, in a capture merged from the hosts of a testbed that spans
	// them (Merge), say how each host's timestamps were put on the file's
	// clock; ClockErrorNS bounds the error of the time between any two
	// items of the file.
	Hosts        []HostClock `json:"hosts,omitempty"`
	ClockErrorNS int64       `json:"clock_error_ns,omitempty"`
}

// ClockInfo says how to read the nodes' TCP timestamp options (TSval) as
// the time their kernels sent a segment: the testbed turns off the
// per-connection random offset (net.ipv4.tcp_timestamps = 2 in each node's
// namespace), so TSval counts TSUnitNS units of CLOCK_MONOTONIC modulo
// 2^32, and adding MonotonicOffsetNS (CLOCK_REALTIME minus CLOCK_MONOTONIC,
// read back to back on the testbed host) puts it on the capture's clock.
type ClockInfo struct {
	MonotonicOffsetNS int64 `json:"monotonic_offset_ns"`
	// OffsetErrorNS bounds the error of MonotonicOffsetNS: the gap between
	// the two clock readings it came from.
	OffsetErrorNS int64 `json:"offset_error_ns"`
	// TSUnitNS is a TSval tick: 1000 where the kernel sends microsecond
	// timestamps (the route feature tcp_usec_ts, Linux 6.7 and later),
	// else 1000000.
	TSUnitNS int64 `json:"ts_unit_ns"`
}

// CaptureStats are a capture's counters, carried by the end record: the
// Writer's (Written, Late) and those of the live captures that wrote to it
// (the others, summed; 0 without one).
type CaptureStats struct {
	Packets     uint64 `json:"packets"`      // frames the socket's filter passed, dropped ones included (the kernel's tp_packets)
	Drops       uint64 `json:"drops"`        // frames the kernel dropped for lack of ring space
	Freezes     uint64 `json:"freezes"`      // TPACKET_V3 queue freezes
	Written     uint64 `json:"written"`      // packets written to the file, records (the end record too) included
	Late        uint64 `json:"late"`         // items older than one already written, written at once, out of order
	Unmatched   uint64 `json:"unmatched"`    // frames from an interface that is no node's port, not written
	WrongSource uint64 `json:"wrong_source"` // frames on a node's port with another source MAC, not written
}

// Record is a fault or lifecycle event in a capture (see Records in the
// package doc, which says which kinds use which fields). Version is
// RecordVersion; readers accept any version from 1 and ignore fields they
// do not know.
type Record struct {
	Version int        `json:"version"`
	Time    time.Time  `json:"time"` // when it happened; also the packet's timestamp
	Kind    fault.Kind `json:"kind"`
	Nodes   []string   `json:"nodes,omitempty"`   // node names
	Groups  [][]string `json:"groups,omitempty"`  // partition: node names
	OneWay  bool       `json:"one_way,omitempty"` // partition, cut
	// Links are the node pairs a cut separates (OneWay: only what the
	// first sends to the second).
	Links [][2]string `json:"links,omitempty"`
	// Mode is how a partition, isolate or cut severs; empty: drop.
	Mode   fault.CutMode `json:"mode,omitempty"`
	Detail string        `json:"detail,omitempty"` // what changed, in words for people
	// InForce is when the change was known to be in force (the process
	// gone or stopped, the rules installed), the zero time when unknown.
	InForce time.Time `json:"in_force,omitzero"`
	// Peers are the destinations a delay or loss applies to; empty: all.
	Peers []string `json:"peers,omitempty"`
	// Impair is, for delay and loss, the impairment the change asked for
	// on what Nodes send (to Peers).
	Impair *RecordImpairment `json:"impair,omitempty"`
	// Clock is, for clock, the skew asked of Nodes' clocks.
	Clock   *RecordClock  `json:"clock,omitempty"`
	Testbed *TestbedInfo  `json:"testbed,omitempty"` // testbed record
	Capture *CaptureStats `json:"capture,omitempty"` // end record
}

// RecordImpairment is a delay or loss a record asked for; the JSON names
// are those of fault.Impairment, whose other impairments no record holds
// (the analysis and its documented JSON see these three).
type RecordImpairment struct {
	DelayNS  int64   `json:"delay_ns,omitempty"`
	JitterNS int64   `json:"jitter_ns,omitempty"`
	Loss     float64 `json:"loss,omitempty"` // percent
}

// RecordClock is the skew a clock record asked: the nodes' wall clocks
// read their host's plus OffsetNS from the record's in_force, drifting at
// RatePPM from then (fault.ClockSkew); zero puts them back on the host's.
type RecordClock struct {
	OffsetNS int64   `json:"offset_ns"`
	RatePPM  float64 `json:"rate_ppm"`
}

// Comment is the record's one-line summary, written as its packet comment.
func (r *Record) Comment() string {
	var b strings.Builder
	b.WriteString("bullylab: ")
	b.WriteString(string(r.Kind))
	switch {
	case r.Testbed != nil:
		fmt.Fprintf(&b, " %s run %s, %d nodes", r.Testbed.Topology, r.Testbed.Run, len(r.Testbed.Nodes))
	case len(r.Groups) > 0:
		sep := " | "
		if r.OneWay {
			sep = " -> "
		}
		for i, g := range r.Groups {
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteString(sep)
			}
			b.WriteString(strings.Join(g, ","))
		}
	case len(r.Links) > 0:
		sep := "<->"
		if r.OneWay {
			sep = "->"
		}
		for i, l := range r.Links {
			if i == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteByte(',')
			}
			b.WriteString(l[0] + sep + l[1])
		}
	case len(r.Nodes) > 0:
		b.WriteByte(' ')
		b.WriteString(strings.Join(r.Nodes, ","))
	}
	if r.Mode == fault.ModeReset {
		b.WriteString(" [reset]")
	}
	if r.Capture != nil {
		fmt.Fprintf(&b, " (%d packets, %d dropped, %d late)", r.Capture.Packets, r.Capture.Drops, r.Capture.Late)
	}
	if r.Detail != "" {
		b.WriteString(" (")
		b.WriteString(r.Detail)
		b.WriteByte(')')
	}
	return b.String()
}

// nodeDescription is the interface description of node n.
func nodeDescription(n *NodeInfo) string {
	return fmt.Sprintf("bullylab node %s index=%d id=%s addr=%s port=%d", n.Name, n.Index, n.ID, n.Addr, n.Port)
}

// parseNodeDescription reads back nodeDescription; ok is false for other
// descriptions.
func parseNodeDescription(s string) (NodeInfo, bool) {
	f := strings.Fields(s)
	if len(f) < 3 || f[0] != "bullylab" || f[1] != "node" {
		return NodeInfo{}, false
	}
	n := NodeInfo{Name: f[2]}
	for _, kv := range f[3:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "index":
			n.Index, _ = strconv.Atoi(v)
		case "id":
			n.ID, _ = uuid.Parse(v)
		case "addr":
			n.Addr, _ = netip.ParseAddr(v)
		case "port":
			n.Port, _ = strconv.Atoi(v)
		}
	}
	return n, true
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// Testbed describes the nodes: each gets an interface, in this order,
	// and it is written as the first record.
	Testbed TestbedInfo
	// Window is the reorder window: an item is written once the capture
	// has reached a timestamp Window past it. 0 means DefaultWindow; a
	// negative Window writes items as they come, for callers that deliver
	// them in timestamp order already.
	Window time.Duration
	// Start is the testbed record's time; zero means now.
	Start time.Time
	// SnapLen is recorded in the interface descriptions; 0 means DefaultSnapLen.
	SnapLen int
	// Comments are the comments of nodes' interfaces, by topology index:
	// in a merged capture, how the node's host's timestamps were shifted.
	Comments map[int]string
}

// DefaultWindow is the default reorder window. TPACKET_V3 hands packets
// over a block at a time, when the block fills or its timeout (10 ms in
// Live) expires, so a packet may be read some tens of milliseconds after
// its timestamp on a loaded machine; records are written when they happen.
const DefaultWindow = 250 * time.Millisecond

type item struct {
	ts    int64
	seq   uint64
	iface int
	olen  int
	data  []byte
	note  string // packet comment (records)
}

// Writer writes a bullylab capture. Frames come from the capture, records
// from whoever causes faults; both are buffered and written in timestamp
// order. Its methods are safe for concurrent use.
//
// Reordering: the capture's progress is the watermark, the latest frame
// timestamp seen or the time given to Advance (records never move it,
// since they are stamped when they happen while the capture lags). An
// item is written once its timestamp is at least Window older than the
// watermark; Flush and Close write everything. An item that arrives older
// than the last one written is written at once, out of order, and counted
// in Late: readers must tolerate it (the analyzer does).
type Writer struct {
	mu       sync.Mutex
	ng       *pcapgo.NgWriter
	nodes    []NodeInfo
	byIndex  map[int]int
	events   int
	window   int64
	pending  []item // sorted by (ts, seq)
	head     int
	seq      uint64
	water    int64
	lastOut  int64
	stats    CaptureStats
	perIface []uint64
	ended    bool
	closed   bool
	// afterTheFact: the file is written after the capture (Merge), so
	// its end record takes its last item's time, not the time of Close.
	afterTheFact bool
	err          error
}

// NewWriter writes the section header, every interface and the testbed
// record to w.
func NewWriter(w io.Writer, opts WriterOptions) (*Writer, error) {
	snap := opts.SnapLen
	if snap <= 0 {
		snap = DefaultSnapLen
	}
	wr := &Writer{
		nodes:   slices.Clone(opts.Testbed.Nodes),
		byIndex: map[int]int{},
		window:  int64(opts.Window),
		lastOut: -1 << 63,
		water:   -1 << 63,
	}
	if opts.Window == 0 {
		wr.window = int64(DefaultWindow)
	}
	ifaces := make([]pcapgo.NgInterface, 0, len(wr.nodes)+1)
	for i := range wr.nodes {
		n := &wr.nodes[i]
		if _, dup := wr.byIndex[n.Index]; dup {
			return nil, fmt.Errorf("capture: node index %d appears twice", n.Index)
		}
		wr.byIndex[n.Index] = i
		ifaces = append(ifaces, pcapgo.NgInterface{
			Name:        n.Name,
			Comment:     opts.Comments[n.Index],
			Description: nodeDescription(n),
			OS:          runtime.GOOS,
			LinkType:    layers.LinkTypeEthernet,
			SnapLength:  uint32(snap),
		})
	}
	wr.events = len(ifaces)
	ifaces = append(ifaces, pcapgo.NgInterface{
		Name:        EventsInterfaceName,
		Description: "bullylab fault and lifecycle records (JSON, one per packet; summary in the packet comment)",
		OS:          runtime.GOOS,
		LinkType:    LinkTypeEvents,
		SnapLength:  uint32(snap),
	})
	wr.perIface = make([]uint64, len(ifaces))
	ng, err := pcapgo.NewNgWriterInterface(w, ifaces[0], pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Hardware:    runtime.GOARCH,
		OS:          runtime.GOOS,
		Application: "bullylab",
	}})
	if err != nil {
		return nil, fmt.Errorf("capture: writing pcapng header: %w", err)
	}
	for _, ifc := range ifaces[1:] {
		if _, err := ng.AddInterface(ifc); err != nil {
			return nil, fmt.Errorf("capture: writing pcapng interface %s: %w", ifc.Name, err)
		}
	}
	wr.ng = ng
	start := opts.Start
	if start.IsZero() {
		start = time.Now()
	}
	tb := opts.Testbed
	tb.Nodes = slices.Clone(tb.Nodes)
	if err := wr.WriteRecord(Record{Time: start, Kind: KindTestbed, Testbed: &tb}); err != nil {
		return nil, err
	}
	return wr, nil
}

// Nodes returns the nodes, in interface order.
func (w *Writer) Nodes() []NodeInfo { return slices.Clone(w.nodes) }

// NodeInterface returns the interface of the node with the given topology
// index.
func (w *Writer) NodeInterface(index int) (int, bool) {
	i, ok := w.byIndex[index]
	return i, ok
}

// EventsInterface returns the interface of the records.
func (w *Writer) EventsInterface() int { return w.events }

// WriteFrame buffers a captured frame: iface is a node's interface,
// origLen its length on the wire (0: len(data)). data is copied.
func (w *Writer) WriteFrame(iface int, ts time.Time, data []byte, origLen int) error {
	if iface < 0 || iface >= w.events {
		return fmt.Errorf("capture: frame for interface %d, which is no node's (%d nodes)", iface, w.events)
	}
	if origLen < len(data) {
		origLen = len(data)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := ts.UnixNano()
	if t > w.water {
		w.water = t
	}
	return w.add(item{ts: t, iface: iface, olen: origLen, data: slices.Clone(data)})
}

// WriteRecord buffers a record; a zero Time means now. Version is set.
func (w *Writer) WriteRecord(r Record) error {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Version = RecordVersion
	data, err := json.Marshal(&r)
	if err != nil {
		return fmt.Errorf("capture: encoding %s record: %w", r.Kind, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Kind == KindEnd {
		w.ended = true
	}
	return w.add(item{ts: r.Time.UnixNano(), iface: w.events, olen: len(data), data: data, note: r.Comment()})
}

// Advance tells the Writer the capture has seen everything up to t, so
// that items older than t-Window can be written.
func (w *Writer) Advance(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := t.UnixNano(); n > w.water {
		w.water = n
	}
	return w.release(w.limit())
}

// limit is the newest timestamp that may be written: Window behind the
// watermark (which starts at the minimum int64, so this must not wrap).
func (w *Writer) limit() int64 {
	if w.water < -1<<63+w.window {
		return -1 << 63
	}
	return w.water - w.window
}

func (w *Writer) add(it item) error {
	if w.closed {
		return errors.New("capture: writer is closed")
	}
	if w.err != nil {
		return w.err
	}
	if w.window < 0 || it.ts < w.lastOut {
		if it.ts < w.lastOut {
			w.stats.Late++
		}
		if err := w.release(it.ts); err != nil {
			return err
		}
		return w.write(&it)
	}
	w.seq++
	it.seq = w.seq
	// Items come nearly in order: search from the end.
	p := w.pending
	i := len(p)
	if i > w.head && p[i-1].ts > it.ts {
		i = w.head + sort.Search(len(p)-w.head, func(k int) bool { return p[w.head+k].ts > it.ts })
	}
	w.pending = slices.Insert(w.pending, i, it)
	return w.release(w.limit())
}

// release writes the pending items stamped at or before t.
func (w *Writer) release(t int64) error {
	for w.head < len(w.pending) && w.pending[w.head].ts <= t {
		if err := w.write(&w.pending[w.head]); err != nil {
			return err
		}
		w.pending[w.head] = item{}
		w.head++
	}
	if w.head == len(w.pending) {
		w.pending, w.head = w.pending[:0], 0
	} else if w.head > 1024 && w.head*2 > len(w.pending) {
		n := copy(w.pending, w.pending[w.head:])
		clear(w.pending[n:])
		w.pending, w.head = w.pending[:n], 0
	}
	return nil
}

func (w *Writer) write(it *item) error {
	ci := gopacket.CaptureInfo{
		Timestamp:      time.Unix(0, it.ts),
		CaptureLength:  len(it.data),
		Length:         it.olen,
		InterfaceIndex: it.iface,
	}
	var err error
	if it.note != "" {
		err = w.ng.WritePacketWithOptions(ci, it.data, pcapgo.NgPacketOptions{Comments: []string{it.note}})
	} else {
		err = w.ng.WritePacket(ci, it.data)
	}
	if err != nil {
		w.err = fmt.Errorf("capture: writing packet: %w", err)
		return w.err
	}
	if it.ts > w.lastOut {
		w.lastOut = it.ts
	}
	w.stats.Written++
	w.perIface[it.iface]++
	return nil
}

// Flush writes every buffered item and flushes the file's buffer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.err != nil {
		return w.err
	}
	if err := w.release(1<<63 - 1); err != nil {
		return err
	}
	if err := w.ng.Flush(); err != nil {
		w.err = fmt.Errorf("capture: flushing: %w", err)
	}
	return w.err
}

// noteCapture merges a live capture's counters into the end record.
func (w *Writer) noteCapture(s CaptureStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stats.Packets += s.Packets
	w.stats.Drops += s.Drops
	w.stats.Freezes += s.Freezes
	w.stats.Unmatched += s.Unmatched
	w.stats.WrongSource += s.WrongSource
}

// Stats returns the counters so far: what was written, and what live
// captures writing here reported when they stopped.
func (w *Writer) Stats() CaptureStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Close writes an end record (unless one was written) with the counters,
// every buffered item, and one interface statistics block per interface
// (packets written), and flushes. It does not close the underlying writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	closed, ended := w.closed, w.ended
	last := w.lastOut
	if len(w.pending) > w.head {
		last = max(last, w.pending[len(w.pending)-1].ts)
	}
	w.mu.Unlock()
	if closed {
		return nil
	}
	if !ended {
		end := time.Now()
		if w.afterTheFact {
			// The capture ended with its last item, not now.
			end = time.Unix(0, last)
		}
		if last > end.UnixNano() {
			end = time.Unix(0, last)
		}
		w.mu.Lock()
		st := w.stats
		// What is still buffered is written below, with the end record.
		st.Written += uint64(len(w.pending)-w.head) + 1
		w.mu.Unlock()
		if err := w.WriteRecord(Record{Time: end, Kind: KindEnd, Capture: &st}); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.flushLocked()
	w.closed = true
	if err != nil {
		return err
	}
	now := time.Now()
	for i, n := range w.perIface {
		st := pcapgo.NgInterfaceStatistics{LastUpdate: now, PacketsReceived: n, PacketsDropped: pcapgo.NgNoValue64}
		if i == w.events && w.stats.Packets > 0 {
			st.PacketsDropped = w.stats.Drops
		}
		if err := w.ng.WriteInterfaceStats(i, st); err != nil {
			return fmt.Errorf("capture: writing interface statistics: %w", err)
		}
	}
	if err := w.ng.Flush(); err != nil {
		return fmt.Errorf("capture: flushing: %w", err)
	}
	return nil
}

// --- reading ---------------------------------------------------------------

// Interface is one interface of a capture file.
type Interface struct {
	Name        string
	Description string
	LinkType    layers.LinkType
	Node        *NodeInfo // the node whose port it is, from the description
	Events      bool      // the records interface
}

// Packet is one packet of a capture file, as Reader.Next returns it.
type Packet struct {
	Num   int64 // 1-based position in the file
	Iface *Interface
	CI    gopacket.CaptureInfo
	// Data is valid until the next call to Next.
	Data []byte
	// Record is the decoded record of an events packet, else nil.
	Record   *Record
	Comments []string
}

// FileReader reads a capture file: frames with their interface and node, and
// records. It reads any pcapng file; what is bullylab-specific is optional.
type FileReader struct {
	ng     *ngReader
	in     *countingReader
	ifaces []*Interface
	num    int64
	pkt    Packet
	// whole is how many bytes of the input were read as whole blocks:
	// up to the end of the last packet Next returned.
	whole int64
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TruncatedError is Next's error for input that ends inside a block, as
// the capture of a writer killed before it flushed does. Every packet
// before it was read whole. Offsets are in the input as given (of a
// gzip-compressed capture, the compressed bytes, and Whole only roughly).
type TruncatedError struct {
	Packets int64 // the packets read whole
	Whole   int64 // bytes read as whole blocks: where the last of those packets ends
	Size    int64 // bytes of input, the cut block's included
}

func (e *TruncatedError) Error() string {
	return fmt.Sprintf("file ends inside a block at byte %d (truncated capture); the %d packets before it end at byte %d",
		e.Size, e.Packets, e.Whole)
}

// Is makes a TruncatedError an io.ErrUnexpectedEOF.
func (e *TruncatedError) Is(target error) bool { return target == io.ErrUnexpectedEOF }

// NewReader reads the section header of a pcapng file.
func NewReader(r io.Reader) (*FileReader, error) {
	size := ngReadSize
	if l, ok := r.(interface{ Len() int }); ok { // bytes.Reader and the like: no larger than needed
		size = min(size, max(l.Len(), 4096))
	}
	in := &countingReader{r: r}
	ng, err := newNgReader(in, size)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty file, not pcapng")
		}
		return nil, fmt.Errorf("not a pcapng file: %w", err)
	}
	rd := &FileReader{ng: ng, in: in}
	rd.whole = rd.offset()
	return rd, nil
}

// offset is how many bytes of the input the blocks read so far took; of a
// compressed input, roughly: those read from it.
func (r *FileReader) offset() int64 {
	if r.ng.compressed {
		return r.in.n
	}
	return r.ng.offset()
}

// Interface returns interface i, once a packet on it or after it was read.
func (r *FileReader) Interface(i int) *Interface {
	for len(r.ifaces) < len(r.ng.ifaces) {
		ngi := &r.ng.ifaces[len(r.ifaces)]
		ifc := &Interface{Name: ngi.name, Description: ngi.description, LinkType: ngi.linkType}
		if n, ok := parseNodeDescription(ngi.description); ok {
			ifc.Node = &n
		}
		ifc.Events = ngi.linkType == LinkTypeEvents && ngi.name == EventsInterfaceName
		r.ifaces = append(r.ifaces, ifc)
	}
	if i < 0 || i >= len(r.ifaces) {
		return nil
	}
	return r.ifaces[i]
}

// Interfaces returns the interfaces described so far.
func (r *FileReader) Interfaces() []*Interface {
	r.Interface(0)
	return slices.Clone(r.ifaces)
}

// Next returns the next packet, or io.EOF after the last. Errors name the
// packet number. The Packet is reused by the next call. Interfaces are
// numbered over the whole file (CI.InterfaceIndex), a later section's
// after an earlier one's.
func (r *FileReader) Next() (*Packet, error) {
	if err := r.nextInto(&r.pkt); err != nil {
		return nil, err
	}
	return &r.pkt, nil
}

// nextInto reads the next packet into p, as Next does.
func (r *FileReader) nextInto(p *Packet) error {
	*p = Packet{}
	data, comments, err := r.ng.next(&p.CI)
	if err != nil {
		if err == io.EOF {
			return io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("packet %d: %w", r.num+1, &TruncatedError{Packets: r.num, Whole: r.whole, Size: r.in.n})
		}
		return fmt.Errorf("packet %d: %w", r.num+1, err)
	}
	r.num++
	r.whole = r.offset()
	p.Num, p.Data, p.Comments = r.num, data, comments
	p.Iface = r.Interface(p.CI.InterfaceIndex)
	if p.Iface.Events {
		rec, err := DecodeRecord(data)
		if err != nil {
			return fmt.Errorf("packet %d: %w", r.num, err)
		}
		p.Record = rec
	}
	return nil
}

// DecodeRecord parses a record's JSON.
func DecodeRecord(data []byte) (*Record, error) {
	var rec Record
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&rec); err != nil {
		// encoding/json may quote the record: a number's digits.
		return nil, fmt.Errorf("events record: %s", bounded.Clip(err.Error(), 200))
	}
	if rec.Version < 1 {
		return nil, fmt.Errorf("events record: version %d", rec.Version)
	}
	if rec.Kind == "" {
		return nil, errors.New("events record: no kind")
	}
	return &rec, nil
}
