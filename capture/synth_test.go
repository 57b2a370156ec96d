package capture

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// synth writes synthetic but realistic captures: real Ethernet/IPv4/TCP
// packets (handshakes, timestamps option, delayed ACKs, FINs) carrying wire
// frames over one-way connections, as bullylab nodes use them, and records.
// It keeps the exact counts the analyzer must find.
type synth struct {
	w     *Writer
	nodes []NodeInfo
	live  []bool
	conns map[[2]int]*sconn
	rng   *rand.Rand
	t     int64
	ipID  uint16
	buf   []byte
	frame []byte

	// Impairments, as probabilities per data segment.
	retransmit, reorder, split float64
	// hard, when set, replaces those impairments with hardSegment's.
	hard bool

	// Authentication: with key set, every connection opens with a HELLO,
	// in the segment of its first frames as the dialer writes them, and
	// every frame is sealed. alter, when set, sees each sealed frame of
	// the connection a -> b (i numbers them from 0, the HELLO) and returns
	// the bytes to send instead; it must keep the frame's type.
	key    *wire.Key
	alter  func(a, b, i int, frame []byte) []byte
	hellos uint64
	// memberKeys, when set, sign each node's HELLOs with its member key;
	// signHello, when set too, signs the HELLO of a -> b in its place, as
	// a forger would.
	memberKeys []ed25519.PrivateKey
	signHello  func(a, b int, h *wire.Hello)
	plain      []byte
	// mute, while set, keeps packets out of the capture (and frames out of
	// the counts), as if the capture had not started or lost them.
	mute bool
	// egress is each sender's delay: its TCP timestamps are that much
	// older than the segment's time on the switch.
	egress map[int]time.Duration
	// noAck, while set, keeps segment from acknowledging what it sends,
	// as a receiver that dropped it would.
	noAck bool

	// sentAt is the capture time of the packet that completed the last
	// data segment sends (its first transmission), the frame's time.
	sentAt int64

	frames  int64
	total   counts
	sent    []counts
	recv    []counts
	packets int64
	bytes   int64
}

type sconn struct {
	cport      uint16
	cseq, sseq uint32 // next sequence number of the client (sender) and server
	unacked    int
	sealer     *wire.Sealer // with synth.key
	sealed     int          // frames sealed, the HELLO included
}

func synthNodes(n int, port int) []NodeInfo {
	nodes := make([]NodeInfo, n)
	for i := range nodes {
		var id uuid.UUID
		// IDs increase with the index, so nK is the K-th in Bully order.
		binary.BigEndian.PutUint64(id[:8], uint64(i+1)<<48)
		id[6], id[8] = 0x40, 0x80 // version 4, RFC 4122 variant
		id[15] = byte(i + 1)
		nodes[i] = NodeInfo{Name: fmt.Sprintf("n%d", i+1), Index: i + 1, ID: id,
			Addr: netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 2)}), Port: port}
	}
	return nodes
}

func newSynth(t testing.TB, out io.Writer, n int, seed uint64) *synth {
	return newSynthClock(t, out, n, seed, nil)
}

// newSynthClock is newSynth with clock in the testbed record: the synth's
// TCP timestamps count milliseconds of its capture clock, so clock should
// have TSUnitNS 1e6 and offset 0.
func newSynthClock(t testing.TB, out io.Writer, n int, seed uint64, clock *ClockInfo) *synth {
	t.Helper()
	nodes := synthNodes(n, 7946)
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	w, err := NewWriter(out, WriterOptions{
		Testbed: TestbedInfo{Topology: fmt.Sprintf("star%d", n), Run: "bl0000", Nodes: nodes,
			HeartbeatNS: int64(100 * time.Millisecond), FailureTimeoutNS: int64(500 * time.Millisecond), ElectionTimeoutNS: int64(200 * time.Millisecond),
			Clock: clock},
		Window: -1, Start: start,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := &synth{w: w, nodes: nodes, live: make([]bool, n), conns: map[[2]int]*sconn{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), t: start.UnixNano() + int64(time.Millisecond),
		sent: make([]counts, n), recv: make([]counts, n), packets: 1}
	return s
}

func (s *synth) advance(d time.Duration) { s.t += int64(d) }

func (s *synth) mac(i int) [6]byte { return [6]byte{0x02, 0, 0, 0, byte(i >> 8), byte(i)} }

// packet writes one TCP segment from node a to node b.
func (s *synth) packet(a, b int, sport, dport uint16, seq, ack uint32, flags byte, payload []byte) {
	const optLen = 12 // NOP NOP timestamps
	hdr := 14 + 20 + 20 + optLen
	p := append(s.buf[:0], make([]byte, hdr)...)
	p = append(p, payload...)
	ma, mb := s.mac(a), s.mac(b)
	copy(p[0:6], mb[:])
	copy(p[6:12], ma[:])
	p[12], p[13] = 0x08, 0x00
	ip := p[14:34]
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+optLen+len(payload)))
	s.ipID++
	binary.BigEndian.PutUint16(ip[4:], s.ipID)
	ip[6], ip[7], ip[8], ip[9] = 0x40, 0, 64, 6
	src, dst := s.nodes[a].Addr.As4(), s.nodes[b].Addr.As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	binary.BigEndian.PutUint16(ip[10:], ^fold(sum16(ip, 0)))
	tcp := p[34:hdr]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12] = byte((20 + optLen) / 4 << 4)
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 502)
	tcp[20], tcp[21], tcp[22], tcp[23] = 1, 1, 8, 10
	binary.BigEndian.PutUint32(tcp[24:], uint32((s.t-int64(s.egress[a]))/1e6))
	binary.BigEndian.PutUint32(tcp[28:], uint32(s.t/1e6)-1)
	// Pseudo-header checksum, as a real stack writes it.
	seg := p[34:]
	c := sum16(src[:], 0)
	c = sum16(dst[:], c)
	c += 6 + uint32(len(seg))
	c = sum16(seg, c)
	binary.BigEndian.PutUint16(tcp[16:], ^fold(c))
	s.buf = p
	s.write(a, p)
}

func (s *synth) write(iface int, p []byte) {
	s.t += int64(2*time.Microsecond + time.Duration(s.rng.IntN(3000)))
	if s.mute {
		return
	}
	if err := s.w.WriteFrame(iface, time.Unix(0, s.t), p, 0); err != nil {
		panic(err)
	}
	s.packets++
	s.bytes += int64(len(p)) + 32
}

func sum16(b []byte, c uint32) uint32 {
	for len(b) >= 2 {
		c += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		c += uint32(b[0]) << 8
	}
	return c
}

func fold(c uint32) uint16 {
	for c > 0xffff {
		c = c&0xffff + c>>16
	}
	return uint16(c)
}

const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

// conn returns the one-way connection a -> b, opening it with a handshake.
func (s *synth) conn(a, b int) *sconn {
	k := [2]int{a, b}
	if c := s.conns[k]; c != nil {
		return c
	}
	c := &sconn{cport: uint16(32768 + s.rng.IntN(28000)), cseq: s.rng.Uint32(), sseq: s.rng.Uint32()}
	port := uint16(s.nodes[b].Port)
	s.packet(a, b, c.cport, port, c.cseq, 0, tcpSYN, nil)
	c.cseq++
	s.packet(b, a, port, c.cport, c.sseq, c.cseq, tcpSYN|tcpACK, nil)
	c.sseq++
	s.packet(a, b, c.cport, port, c.cseq, c.sseq, tcpACK, nil)
	s.conns[k] = c
	return c
}

// closeConn closes the connection a -> b, if open, as its dialer does.
func (s *synth) closeConn(a, b int) {
	c := s.conns[[2]int{a, b}]
	if c == nil {
		return
	}
	port := uint16(s.nodes[b].Port)
	s.packet(a, b, c.cport, port, c.cseq, c.sseq, tcpFIN|tcpACK, nil)
	s.packet(b, a, port, c.cport, c.sseq, c.cseq+1, tcpFIN|tcpACK, nil)
	s.packet(a, b, c.cport, port, c.cseq+1, c.sseq+1, tcpACK, nil)
	delete(s.conns, [2]int{a, b})
}

// closeConns sends FINs on every connection of node i and forgets them.
func (s *synth) closeConns(i int) {
	for k, c := range s.conns {
		if k[0] != i && k[1] != i {
			continue
		}
		a, b := k[0], k[1]
		port := uint16(s.nodes[b].Port)
		if a == i {
			s.packet(a, b, c.cport, port, c.cseq, c.sseq, tcpFIN|tcpACK, nil)
			s.packet(b, a, port, c.cport, c.sseq, c.cseq+1, tcpACK, nil)
		} else {
			s.packet(b, a, port, c.cport, c.sseq, c.cseq, tcpFIN|tcpACK, nil)
			s.packet(a, b, c.cport, port, c.cseq, c.sseq+1, tcpRST, nil)
		}
		delete(s.conns, k)
	}
}

// send writes m from a to b, with the impairments configured.
func (s *synth) send(a, b int, m *wire.Message) {
	s.sendFrames(a, b, m)
}

// sendFrames writes the frames of ms from a to b; two or more frames go in
// one segment (as a GSO super-frame or coalesced writes would).
func (s *synth) sendFrames(a, b int, ms ...*wire.Message) {
	c := s.conn(a, b)
	s.frame = s.frame[:0]
	if s.key != nil && c.sealer == nil {
		s.hellos++
		h := wire.Hello{To: s.nodes[b].ID, Time: s.t}
		binary.BigEndian.PutUint64(h.Nonce[:], s.hellos)
		binary.BigEndian.PutUint64(h.Nonce[8:], 0x5eed)
		if s.memberKeys != nil {
			h.Sign(s.nodes[a].ID, s.memberKeys[a])
		}
		if s.signHello != nil {
			s.signHello(a, b, &h)
		}
		c.sealer, s.frame = wire.NewSealer(s.frame, s.key, s.nodes[a].ID, h)
		s.altered(a, b, c, 0)
		s.count(a, b, wire.TypeHello)
	}
	for _, m := range ms {
		if c.sealer != nil {
			start := len(s.frame)
			s.plain = wire.Append(s.plain[:0], m)
			s.frame = c.sealer.Seal(s.frame, s.plain)
			s.altered(a, b, c, start)
		} else {
			s.frame = wire.Append(s.frame, m)
		}
		s.count(a, b, m.Type)
	}
	s.segment(a, b, s.frame)
}

// altered applies alter to the frame at s.frame[start:], just sealed on c.
func (s *synth) altered(a, b int, c *sconn, start int) {
	i := c.sealed
	c.sealed++
	if s.alter == nil {
		return
	}
	f := s.alter(a, b, i, bytes.Clone(s.frame[start:]))
	s.frame = append(s.frame[:start], f...)
}

// count counts a frame of type typ from a to b, unless muted.
func (s *synth) count(a, b int, typ wire.Type) {
	if s.mute {
		return
	}
	s.frames++
	s.total.add(typ)
	s.sent[a].add(typ)
	s.recv[b].add(typ)
}

// sendRaw writes data, whole frames of the given types, from a to b, over
// the connection a -> b (opened if need be) as it is: not sealed, not
// altered.
func (s *synth) sendRaw(a, b int, data []byte, types ...wire.Type) {
	s.conn(a, b)
	for _, t := range types {
		s.count(a, b, t)
	}
	s.segment(a, b, data)
}

// segment writes data from a to b on their connection, with the
// impairments configured, and an ACK back now and then.
func (s *synth) segment(a, b int, data []byte) {
	if s.hard {
		s.hardSegment(a, b, data)
		return
	}
	c := s.conn(a, b)
	port := uint16(s.nodes[b].Port)
	seq := c.cseq
	c.cseq += uint32(len(data))
	switch r := s.rng.Float64(); {
	case r < s.split && len(data) > 1:
		cut := 1 + s.rng.IntN(len(data)-1)
		s.packet(a, b, c.cport, port, seq, c.sseq, tcpACK, data[:cut])
		s.packet(a, b, c.cport, port, seq+uint32(cut), c.sseq, tcpACK|tcpPSH, data[cut:])
		s.sentAt = s.t
	case r < s.split+s.reorder && len(data) > 1:
		// The second part overtakes the first.
		cut := 1 + s.rng.IntN(len(data)-1)
		second := append([]byte(nil), data[cut:]...)
		first := append([]byte(nil), data[:cut]...)
		s.packet(a, b, c.cport, port, seq+uint32(cut), c.sseq, tcpACK|tcpPSH, second)
		s.packet(a, b, c.cport, port, seq, c.sseq, tcpACK, first)
		s.sentAt = s.t
	case r < s.split+s.reorder+s.retransmit:
		s.packet(a, b, c.cport, port, seq, c.sseq, tcpACK|tcpPSH, data)
		s.sentAt = s.t
		s.packet(a, b, c.cport, port, seq, c.sseq, tcpACK|tcpPSH, data)
	default:
		s.packet(a, b, c.cport, port, seq, c.sseq, tcpACK|tcpPSH, data)
		s.sentAt = s.t
	}
	c.unacked++
	if !s.noAck && (c.unacked >= 2 || s.rng.IntN(2) == 0) {
		s.packet(b, a, port, c.cport, c.sseq, c.cseq, tcpACK, nil)
		c.unacked = 0
	}
}

func (s *synth) record(r Record) {
	s.t += int64(time.Microsecond)
	r.Time = time.Unix(0, s.t)
	if err := s.w.WriteRecord(r); err != nil {
		panic(err)
	}
	s.packets++
}

func (s *synth) close(t testing.TB) {
	t.Helper()
	s.record(Record{Kind: KindEnd})
	if err := s.w.Close(); err != nil {
		t.Fatal(err)
	}
}

func (s *synth) msg(typ wire.Type, from int, epoch uint64, reason wire.Reason) *wire.Message {
	return &wire.Message{Type: typ, Flags: uint8(reason), Epoch: epoch, From: s.nodes[from].ID}
}

// liveNodes lists the live nodes in ID order.
func (s *synth) liveNodes() []int {
	var l []int
	for i, up := range s.live {
		if up {
			l = append(l, i)
		}
	}
	return l
}

// heartbeats sends rounds of HEARTBEAT from leader to every live node.
func (s *synth) heartbeats(leader int, epoch uint64, rounds int) {
	for range rounds {
		s.advance(100 * time.Millisecond)
		for _, i := range s.liveNodes() {
			if i != leader {
				s.send(leader, i, s.msg(wire.TypeHeartbeat, leader, epoch, 0))
			}
		}
	}
}

// elect runs an election started by detector (ELECTION cascade up the
// live nodes) or, when detector is the highest live node, by its HALT
// round; it returns the winner, who leads epoch+1.
func (s *synth) elect(detector int, epoch uint64, reason wire.Reason) int {
	live := s.liveNodes()
	top := live[len(live)-1]
	if detector != top {
		asked := map[int]bool{}
		var cascade func(from int, r wire.Reason)
		cascade = func(from int, r wire.Reason) {
			if asked[from] {
				return
			}
			asked[from] = true
			var higher []int
			for _, h := range live {
				if h > from {
					higher = append(higher, h)
				}
			}
			for _, h := range higher {
				s.advance(100 * time.Microsecond)
				s.send(from, h, s.msg(wire.TypeElection, from, epoch, r))
				s.advance(100 * time.Microsecond)
				s.send(h, from, s.msg(wire.TypeAnswer, h, epoch, 0))
			}
			for _, h := range higher {
				cascade(h, wire.ReasonBullied)
			}
		}
		cascade(detector, reason)
		reason = wire.ReasonBullied
		s.advance(200 * time.Millisecond) // the top waits ElectionTimeout for ANSWERs
	}
	s.electAmong(top, slices.DeleteFunc(slices.Clone(live), func(i int) bool { return i == top }), epoch+1, reason)
	return top
}

// crash kills node i: a record, then FINs from its kernel.
func (s *synth) crash(i int) {
	s.record(Record{Kind: fault.Crash, Nodes: []string{s.nodes[i].Name}, Detail: "SIGKILL pid 4242"})
	s.live[i] = false
	s.advance(100 * time.Microsecond)
	s.closeConns(i)
}

func (s *synth) restart(i int) {
	s.record(Record{Kind: fault.Restart, Nodes: []string{s.nodes[i].Name}})
	s.live[i] = true
}

// benchScenario writes at least frames frames: a 16-node cluster that
// boots, then cycles through leader crashes (election by the lowest
// detector) and restarts (the old leader takes over again), with
// heartbeats in between.
func (s *synth) benchScenario(frames int64) {
	n := len(s.nodes)
	for i := range s.live {
		s.live[i] = true
	}
	epoch := uint64(0)
	leader := s.elect(0, epoch, wire.ReasonBoot)
	epoch++
	for s.frames < frames {
		s.heartbeats(leader, epoch, 150)
		old := leader
		s.crash(old)
		s.advance(500 * time.Millisecond)
		leader = s.elect(0, epoch, wire.ReasonLeaderFailed)
		epoch++
		s.heartbeats(leader, epoch, 150)
		s.advance(time.Second)
		s.restart(old)
		s.advance(20 * time.Millisecond)
		leader = s.elect(n-1, epoch, wire.ReasonBoot)
		epoch++
	}
}

// heartbeatsTo sends rounds of HEARTBEAT from leader to the given nodes
// only: the leader's side of a partition.
func (s *synth) heartbeatsTo(leader int, epoch uint64, rounds int, to ...int) {
	for range rounds {
		s.advance(100 * time.Millisecond)
		for _, i := range to {
			s.send(leader, i, s.msg(wire.TypeHeartbeat, leader, epoch, 0))
		}
	}
}

// electAmong has top, the highest node of its side, take over the nodes
// of its side with a HALT round and COORDINATOR at epoch: the election of
// one side of a partition, or a leader re-asserting itself.
func (s *synth) electAmong(top int, side []int, epoch uint64, reason wire.Reason) {
	for _, i := range side {
		s.advance(50 * time.Microsecond)
		s.send(top, i, s.msg(wire.TypeHalt, top, epoch, reason))
		s.advance(50 * time.Microsecond)
		s.send(i, top, s.msg(wire.TypeHaltAck, i, epoch, 0))
	}
	for _, i := range side {
		s.advance(50 * time.Microsecond)
		s.send(top, i, s.msg(wire.TypeCoordinator, top, epoch, reason))
	}
}

// ringMsg is a RING_ELECTION from node from for the run of initiator at
// epoch, with candidate the best so far.
func (s *synth) ringMsg(from, initiator, candidate int, epoch uint64, reason wire.Reason) *wire.Message {
	m := s.msg(wire.TypeRingElection, from, epoch, reason)
	m.Payload = wire.AppendRingElection(nil, s.nodes[initiator].ID, s.nodes[candidate].ID)
	return m
}

// electedMsg is an ELECTED from node from naming leader at epoch.
func (s *synth) electedMsg(from, leader int, epoch uint64, reason wire.Reason) *wire.Message {
	m := s.msg(wire.TypeElected, from, epoch, reason)
	m.Payload = wire.AppendID(nil, s.nodes[leader].ID)
	return m
}

// ringElect runs a ring election among the live nodes that initiator
// starts, proposing epoch; see ringElectAmong.
func (s *synth) ringElect(initiator int, epoch uint64, reason wire.Reason) (leader int, reached int64) {
	return s.ringElectAmong(s.liveNodes(), initiator, epoch, reason)
}

// ringElectAmong runs the classical ring election over ring, node
// indices in ascending ID order, each sending to the next and the last to
// the first: initiator's RING_ELECTION goes round, each node raising the
// candidate to its own ID, until the candidate sees its own ID come back;
// then the winner's ELECTED goes round back to it. It returns the winner,
// and the time of the ELECTED to the last node but the winner: the time
// the analysis takes the leader to be known.
func (s *synth) ringElectAmong(ring []int, initiator int, epoch uint64, reason wire.Reason) (leader int, reached int64) {
	n := len(ring)
	cur := slices.Index(ring, initiator)
	candidate := initiator
	for {
		next := (cur + 1) % n
		s.advance(100 * time.Microsecond)
		s.send(ring[cur], ring[next], s.ringMsg(ring[cur], initiator, candidate, epoch, reason))
		cur = next
		if ring[cur] == candidate {
			break
		}
		candidate = max(candidate, ring[cur])
	}
	for k := 1; k <= n; k++ {
		s.advance(100 * time.Microsecond)
		s.send(ring[(cur+k-1)%n], ring[(cur+k)%n], s.electedMsg(ring[(cur+k-1)%n], candidate, epoch, reason))
		if k == n-1 {
			reached = s.sentAt
		}
	}
	return candidate, reached
}
