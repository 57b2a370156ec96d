package capture

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// A testbed that spans hosts has each host capture its own nodes' ports,
// on its own clock. Merge puts them on one time line, the controller's:
// each host's offset is first measured over the control channel (so many
// microseconds ahead, within a bound), then tightened from the captures
// themselves, since a segment cannot be acknowledged before it was sent.
// When host B's node acknowledges what host A's node sent, B's ACK left
// after A's segment did, so B's offset can exceed A's by no more than the
// gap between the two raw timestamps. Those bounds and the measured
// intervals are difference constraints; their shortest paths give every
// host's tightest interval, whose midpoint each host's frames are shifted
// by.
//
// pcapng's per-interface offset (if_tsoffset) counts whole seconds, too
// coarse for offsets of microseconds: the frames' timestamps are shifted
// instead, and the testbed record says by how much (TestbedInfo.Hosts).

// HostClock is one host of a merged capture: how far its clock was ahead
// of the file's, which its frames' timestamps were shifted back by.
type HostClock struct {
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	// OffsetNS was subtracted from the host's timestamps; the host's true
	// offset lies within BoundNS of it.
	OffsetNS int64 `json:"offset_ns"`
	BoundNS  int64 `json:"bound_ns"`
	// MeasuredNS and MeasuredBoundNS are what the control channel
	// measured, before the captures tightened it.
	MeasuredNS      int64 `json:"measured_ns"`
	MeasuredBoundNS int64 `json:"measured_bound_ns"`
	// Acks is how many acknowledgements across hosts bounded it.
	Acks int `json:"acks,omitempty"`
}

// MergeInput is one host's capture.
type MergeInput struct {
	Host string
	// Nodes are the names of the host's nodes.
	Nodes []string
	R     io.Reader
	// Offset is how far the host's clock was ahead of the merged file's,
	// within Bound, as measured over the control channel.
	Offset, Bound time.Duration
}

// MergeOptions configure Merge.
type MergeOptions struct {
	// Testbed describes every node of every host, in the merged file's
	// interface order; Merge adds Hosts, and drops Clock (the nodes' TCP
	// timestamps count each host's own monotonic clock).
	Testbed TestbedInfo
	// Records are written as they are, on the merged file's clock: the
	// faults, as the controller recorded them. The hosts' own records are
	// left out, as are their testbed and end records.
	Records []Record
	// Start is the testbed record's time, when the earliest host's
	// capture started; zero, or a time after the first frame or record
	// (the clocks' error can put one there), is the first item's: a
	// capture's start comes before everything in it.
	Start time.Time
	// RecordBound bounds the error of Records' times: the largest
	// measured bound of the hosts that stamped them.
	RecordBound time.Duration
}

// MergeResult says how the hosts' clocks were put on one time line.
type MergeResult struct {
	Hosts []HostClock
	// ErrorBound bounds the error of the time between two items of the
	// file, each from any host or a record: what a time to leader across
	// hosts is known to within.
	ErrorBound time.Duration
	// Inconsistent is set when the captures contradict the measured
	// offsets (the clocks moved between the measurement and the capture,
	// say); the measured offsets were used then.
	Inconsistent bool
	Stats        CaptureStats

	// pairBound bounds the error of the time between frames of two hosts.
	pairBound time.Duration
}

// mergeFrame is a frame of one host's capture.
type mergeFrame struct {
	host int
	ts   int64 // the host's clock
	node int   // index in the topology
	olen int
	data []byte
}

// Merge writes the hosts' captures as one, to w.
func Merge(w io.Writer, inputs []MergeInput, opts MergeOptions) (MergeResult, error) {
	var frames []mergeFrame
	var stats CaptureStats
	for k, in := range inputs {
		f, st, err := readHostCapture(k, in)
		if err != nil {
			return MergeResult{}, err
		}
		frames = append(frames, f...)
		stats = addStats(stats, st)
	}
	res := tighten(inputs, frames)
	res.Stats = stats
	tb := opts.Testbed
	tb.Clock = nil
	tb.Hosts = res.Hosts
	// A record and a frame: each off by its own bound. Two frames: the
	// captures bound the difference of their hosts' offsets, often far
	// more tightly than each offset.
	for _, h := range res.Hosts {
		res.ErrorBound = max(res.ErrorBound, opts.RecordBound+time.Duration(h.BoundNS))
	}
	res.ErrorBound = max(res.ErrorBound, res.pairBound)
	tb.ClockErrorNS = int64(res.ErrorBound)
	for i := range frames {
		frames[i].ts -= res.Hosts[frames[i].host].OffsetNS
	}
	slices.SortStableFunc(frames, func(a, b mergeFrame) int { return cmp.Compare(a.ts, b.ts) })
	recs := slices.Clone(opts.Records)
	slices.SortStableFunc(recs, func(a, b Record) int { return a.Time.Compare(b.Time) })
	start := mergeStart(opts.Start, frames, recs)
	wr, err := NewWriter(w, WriterOptions{Testbed: tb, Start: start, Window: -1, Comments: hostComments(tb.Nodes, res.Hosts)})
	if err != nil {
		return MergeResult{}, err
	}
	wr.afterTheFact = true
	for _, f := range frames {
		for len(recs) > 0 && recs[0].Time.UnixNano() <= f.ts {
			if err := wr.WriteRecord(recs[0]); err != nil {
				return MergeResult{}, err
			}
			recs = recs[1:]
		}
		iface, ok := wr.NodeInterface(f.node)
		if !ok {
			return MergeResult{}, fmt.Errorf("capture of host %s: node %d is not in the testbed", inputs[f.host].Host, f.node)
		}
		if err := wr.WriteFrame(iface, time.Unix(0, f.ts), f.data, f.olen); err != nil {
			return MergeResult{}, err
		}
	}
	for _, r := range recs {
		if err := wr.WriteRecord(r); err != nil {
			return MergeResult{}, err
		}
	}
	wr.noteCapture(stats)
	return res, wr.Close()
}

// mergeStart is the merged file's start: start, unless a frame or a
// record (both sorted) comes before it or start is zero, then the first
// of those.
func mergeStart(start time.Time, frames []mergeFrame, recs []Record) time.Time {
	first := int64(math.MaxInt64)
	if len(frames) > 0 {
		first = frames[0].ts
	}
	if len(recs) > 0 {
		first = min(first, recs[0].Time.UnixNano())
	}
	if first == math.MaxInt64 {
		return start
	}
	if start.IsZero() || first < start.UnixNano() {
		return time.Unix(0, first)
	}
	return start
}

// hostComments says, on each node's interface, which host captured it
// and how its timestamps were shifted: pcapng's own per-interface offset
// (if_tsoffset) counts whole seconds.
func hostComments(nodes []NodeInfo, hosts []HostClock) map[int]string {
	out := map[int]string{}
	for _, h := range hosts {
		for _, name := range h.Nodes {
			i := slices.IndexFunc(nodes, func(n NodeInfo) bool { return n.Name == name })
			if i < 0 {
				continue
			}
			out[nodes[i].Index] = fmt.Sprintf("captured on host %s, whose clock was %v ahead of this file's (±%v): timestamps shifted back by that much",
				h.Name, time.Duration(h.OffsetNS), time.Duration(h.BoundNS))
		}
	}
	return out
}

// readHostCapture reads host k's frames, and the counters of its end
// record.
func readHostCapture(k int, in MergeInput) ([]mergeFrame, CaptureStats, error) {
	var stats CaptureStats
	r, err := NewReader(in.R)
	if err != nil {
		return nil, stats, fmt.Errorf("capture of host %s: %w", in.Host, err)
	}
	var out []mergeFrame
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, stats, nil
		}
		if err != nil {
			return nil, stats, fmt.Errorf("capture of host %s: %w", in.Host, err)
		}
		switch {
		case p.Record != nil:
			if p.Record.Kind == KindEnd && p.Record.Capture != nil {
				stats = addStats(stats, *p.Record.Capture)
			}
		case p.Iface.Node != nil:
			out = append(out, mergeFrame{host: k, ts: p.CI.Timestamp.UnixNano(), node: p.Iface.Node.Index,
				olen: p.CI.Length, data: slices.Clone(p.Data)})
		}
	}
}

// addStats adds the live capture's counters of b to a; Written and Late
// are the merged Writer's own.
func addStats(a, b CaptureStats) CaptureStats {
	a.Packets += b.Packets
	a.Drops += b.Drops
	a.Freezes += b.Freezes
	a.Unmatched += b.Unmatched
	a.WrongSource += b.WrongSource
	return a
}

// tighten bounds each host's offset by the measured intervals and the
// acknowledgements across hosts, and picks the middle of each interval.
func tighten(inputs []MergeInput, frames []mergeFrame) MergeResult {
	n := len(inputs)
	// Difference constraints x_j - x_i <= d[i][j] over the hosts' offsets
	// and the file's clock (index n, offset 0).
	inf := int64(math.MaxInt64 / 4)
	d := make([][]int64, n+1)
	for i := range d {
		d[i] = make([]int64, n+1)
		for j := range d[i] {
			if i != j {
				d[i][j] = inf
			}
		}
	}
	for k, in := range inputs {
		d[n][k] = int64(in.Offset + in.Bound)  // x_k - 0 <= offset + bound
		d[k][n] = -int64(in.Offset - in.Bound) // 0 - x_k <= -(offset - bound)
	}
	acks := ackBounds(n, frames)
	for i := range n {
		for j := range n {
			if b, ok := acks.bound[[2]int{i, j}]; ok {
				d[i][j] = min(d[i][j], b)
			}
		}
	}
	for m := range n + 1 {
		for i := range n + 1 {
			for j := range n + 1 {
				if d[i][m] < inf && d[m][j] < inf && d[i][m]+d[m][j] < d[i][j] {
					d[i][j] = d[i][m] + d[m][j]
				}
			}
		}
	}
	res := MergeResult{Hosts: make([]HostClock, n)}
	for i := range n + 1 {
		if d[i][i] < 0 {
			res.Inconsistent = true
		}
	}
	for k, in := range inputs {
		h := HostClock{Name: in.Host, Nodes: in.Nodes, MeasuredNS: int64(in.Offset), MeasuredBoundNS: int64(in.Bound), Acks: acks.count[k]}
		hi, lo := d[n][k], -d[k][n]
		if res.Inconsistent {
			hi, lo = int64(in.Offset+in.Bound), int64(in.Offset-in.Bound)
		}
		h.OffsetNS, h.BoundNS = lo+(hi-lo)/2, (hi-lo+1)/2
		res.Hosts[k] = h
	}
	for j := range n {
		for k := range n {
			if j == k {
				continue
			}
			// x_k - x_j lies in [-d[k][j], d[j][k]]; the file takes
			// OffsetNS[k] - OffsetNS[j] for it.
			est := res.Hosts[k].OffsetNS - res.Hosts[j].OffsetNS
			hi, lo := d[j][k], -d[k][j]
			if res.Inconsistent {
				hi, lo = est+res.Hosts[j].BoundNS+res.Hosts[k].BoundNS, est-res.Hosts[j].BoundNS-res.Hosts[k].BoundNS
			}
			res.pairBound = max(res.pairBound, time.Duration(max(hi-est, est-lo)))
		}
	}
	return res
}

// crossAcks are the bounds acknowledgements across hosts give: for the
// hosts (i, j), x_j - x_i <= bound[i, j], x being a host's offset.
type crossAcks struct {
	bound map[[2]int]int64
	count []int // acknowledgements that bounded each host, either way
}

// tcpFlow is one direction of a TCP connection.
type tcpFlow struct {
	src, dst         [4]byte
	srcPort, dstPort uint16
}

// ackBounds finds, for every segment one host's node sent and another's
// acknowledged, the gap between the raw times of the two: the receiving
// host's offset exceeds the sender's by at most that gap.
func ackBounds(hosts int, frames []mergeFrame) crossAcks {
	type sent struct {
		host int
		ts   int64
	}
	// The first time each sequence end was sent, per flow: the receiver
	// got a copy, sent no earlier than that.
	firstSent := map[tcpFlow]map[uint32]sent{}
	var (
		eth     layers.Ethernet
		ip4     layers.IPv4
		tcp     layers.TCP
		payload gopacket.Payload
		decoded []gopacket.LayerType
	)
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &tcp, &payload)
	parser.IgnoreUnsupported = true
	type ack struct {
		host int
		ts   int64
		flow tcpFlow // the acknowledged direction
		ack  uint32
	}
	var acks []ack
	for _, f := range frames {
		if err := parser.DecodeLayers(f.data, &decoded); err != nil || !slices.Contains(decoded, layers.LayerTypeTCP) {
			continue
		}
		fl := tcpFlow{srcPort: uint16(tcp.SrcPort), dstPort: uint16(tcp.DstPort)}
		copy(fl.src[:], ip4.SrcIP.To4())
		copy(fl.dst[:], ip4.DstIP.To4())
		length := uint32(len(tcp.Payload))
		if tcp.SYN || tcp.FIN {
			length++
		}
		if length > 0 {
			m := firstSent[fl]
			if m == nil {
				m = map[uint32]sent{}
				firstSent[fl] = m
			}
			end := tcp.Seq + length
			if _, ok := m[end]; !ok {
				m[end] = sent{f.host, f.ts}
			}
		}
		if tcp.ACK {
			rev := tcpFlow{src: fl.dst, dst: fl.src, srcPort: fl.dstPort, dstPort: fl.srcPort}
			acks = append(acks, ack{host: f.host, ts: f.ts, flow: rev, ack: tcp.Ack})
		}
	}
	out := crossAcks{bound: map[[2]int]int64{}, count: make([]int, hosts)}
	for _, a := range acks {
		s, ok := firstSent[a.flow][a.ack]
		if !ok || s.host == a.host {
			continue
		}
		key := [2]int{s.host, a.host}
		gap := a.ts - s.ts
		if b, ok := out.bound[key]; !ok || gap < b {
			out.bound[key] = gap
		}
		out.count[s.host]++
		out.count[a.host]++
	}
	return out
}
