package capture

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// Schema names the JSON format of Report, and is its first field, schema.
// README.md ("The analyze JSON") documents every field, and how the
// version changes: within a version fields are only added; renaming,
// removing or changing the type, unit or meaning of one bumps it. v2:
// auth.after_failure, and auth.verified and auth.failed no longer count
// the frames after a failure on their connection.
const Schema = "bullylab.analyze/v2"

// Defaults of AnalyzeOptions.
const (
	DefaultQuiet         = time.Second
	DefaultTriggerWindow = 10 * time.Second
	// waitFactor is bully.WaitFactor: a node that answered or halted waits
	// that many election timeouts for a COORDINATOR, the longest silence
	// inside one election.
	waitFactor = 3
)

// AnalyzeOptions tune Analyze; zero fields take the defaults.
type AnalyzeOptions struct {
	// Name is the file name errors and the report carry.
	Name string
	// Ports carry frames. Default: the ports in the interface
	// descriptions, else wire.DefaultPort.
	Ports []uint16
	// Quiet is the silence that ends an election. Default: the larger of
	// DefaultQuiet and (waitFactor+1) election timeouts of the testbed
	// record.
	Quiet time.Duration
	// TriggerWindow bounds how long before an election a record may have
	// triggered it. Default DefaultTriggerWindow.
	TriggerWindow time.Duration
	// MaxFrame is passed to the Dissector.
	MaxFrame int
	// Key, when set, is the cluster key: the tags of authenticated
	// connections are verified with it (see AuthReport).
	// Without it they are only counted.
	Key *wire.Key
}

// TypeCounts counts frames by type, in wire order.
type TypeCounts struct {
	Election    int64 `json:"ELECTION"`
	Answer      int64 `json:"ANSWER"`
	Halt        int64 `json:"HALT"`
	HaltAck     int64 `json:"HALT_ACK"`
	Reject      int64 `json:"REJECT"`
	Coordinator int64 `json:"COORDINATOR"`
	Heartbeat   int64 `json:"HEARTBEAT"`
	Join        int64 `json:"JOIN"`
	Leave       int64 `json:"LEAVE"`
	Members     int64 `json:"MEMBERS"`
	// Hello counts HELLOs, which open authenticated connections: transport,
	// not election.
	Hello        int64 `json:"HELLO"`
	RingElection int64 `json:"RING_ELECTION"`
	Elected      int64 `json:"ELECTED"`
	Unknown      int64 `json:"unknown"` // intact frames of a type this version does not define
}

type counts [16]int64 // by wire.Type; 0 holds unknown types

func (c *counts) add(t wire.Type) {
	if t.Valid() {
		c[t]++
	} else {
		c[0]++
	}
}

func (c *counts) typeCounts() TypeCounts {
	return TypeCounts{c[wire.TypeElection], c[wire.TypeAnswer], c[wire.TypeHalt], c[wire.TypeHaltAck],
		c[wire.TypeReject], c[wire.TypeCoordinator], c[wire.TypeHeartbeat], c[wire.TypeJoin],
		c[wire.TypeLeave], c[wire.TypeMembers], c[wire.TypeHello], c[wire.TypeRingElection], c[wire.TypeElected], c[0]}
}

// Get returns the count of type t (unknown types for an undefined t).
func (tc TypeCounts) Get(t wire.Type) int64 {
	a := [...]int64{tc.Unknown, tc.Election, tc.Answer, tc.Halt, tc.HaltAck, tc.Reject,
		tc.Coordinator, tc.Heartbeat, tc.Join, tc.Leave, tc.Members, tc.Hello, tc.RingElection, tc.Elected}
	if t.Valid() {
		return a[t]
	}
	return a[0]
}

// Total returns the sum of all counts.
func (tc TypeCounts) Total() int64 {
	return tc.Election + tc.Answer + tc.Halt + tc.HaltAck + tc.Reject + tc.Coordinator +
		tc.Heartbeat + tc.Join + tc.Leave + tc.Members + tc.Hello + tc.RingElection + tc.Elected + tc.Unknown
}

// ElectionTotal returns the count of election messages, of either
// algorithm.
func (tc TypeCounts) ElectionTotal() int64 {
	return tc.Election + tc.Answer + tc.Halt + tc.HaltAck + tc.Reject + tc.Coordinator + tc.RingElection + tc.Elected
}

// IsElectionType reports whether t is one of Bully's election message
// types, ELECTION to COORDINATOR; IsElectionMessage takes the ring's too.
func IsElectionType(t wire.Type) bool { return t.Algorithm() == wire.AlgorithmBully }

// IsElectionMessage reports whether t is an election message of either
// algorithm: Bully's ELECTION to COORDINATOR, the ring's RING_ELECTION and
// ELECTED.
func IsElectionMessage(t wire.Type) bool { return t.Algorithm() != "" }

// AlgorithmMixed is Report.Algorithm of a capture with frames of both
// election algorithms, which no one cluster sends (see
// AnomalyMixedAlgorithms).
const AlgorithmMixed = "mixed"

// Report is the result of Analyze, and the JSON document of schema Schema.
// Times are RFC 3339 with nanoseconds; durations are integer nanoseconds
// in fields ending in _ns, null when undefined. Node names refer to Nodes.
type Report struct {
	Schema   string    `json:"schema"`
	File     string    `json:"file,omitempty"`
	Topology string    `json:"topology,omitempty"`
	Run      string    `json:"run,omitempty"`
	Ports    []uint16  `json:"ports"`
	Start    time.Time `json:"start"` // first packet
	End      time.Time `json:"end"`   // last packet
	// DurationNS is End - Start.
	DurationNS int64            `json:"duration_ns"`
	Settings   AnalysisSettings `json:"settings"`
	Packets    int64            `json:"packets"` // every packet in the file, records included
	Frames     int64            `json:"frames"`  // frames decoded
	// Algorithm is the election algorithm the capture's election
	// messages are of: wire.AlgorithmBully, wire.AlgorithmRing, or
	// AlgorithmMixed for both; "" (omitted) for none.
	Algorithm string `json:"algorithm,omitempty"`
	// ElectionMessages counts the election messages of either algorithm:
	// ELECTION .. COORDINATOR, RING_ELECTION and ELECTED frames.
	ElectionMessages int64      `json:"election_messages"`
	Messages         TypeCounts `json:"messages"`
	// OutsideElections counts election messages in no election.
	OutsideElections TypeCounts   `json:"outside_elections"`
	Nodes            []NodeReport `json:"nodes"`
	Records          []Record     `json:"records"`
	Elections        []Election   `json:"elections"`
	// Claims are the nodes' claims to lead, in time order: each node's
	// first COORDINATOR or HEARTBEAT of each epoch it led, which tells a
	// leader's epoch from the wire even when its election is not in the
	// capture. Frames of an epoch below one the node's process already
	// claimed are stale (written before, delivered late: a minority
	// leader's queue flushing at a heal) and claim nothing again.
	Claims    []LeaderClaim  `json:"claims"`
	Final     Final          `json:"final"`
	Anomalies []Anomaly      `json:"anomalies"`
	Stream    DissectorStats `json:"stream"`
	// StreamErrors lists corrupt frames, gaps and streams cut inside a frame.
	StreamErrors []StreamErrorReport `json:"stream_errors"`
	// ClockErrorNS, in a capture merged from several hosts' (Merge),
	// bounds the error of the time between two of its items, a time to
	// leader across hosts included.
	ClockErrorNS int64 `json:"clock_error_ns,omitempty"`
	// Capture holds the live capture's counters from the end record.
	Capture *CaptureStats `json:"capture,omitempty"`
	// Truncated is set when the file ends inside a block, as the capture
	// of a `bullylab up` killed with SIGKILL does: the report covers the
	// packets before it.
	Truncated *Truncation `json:"truncated,omitempty"`
	// Auth is the authentication of the capture's connections: the
	// verification's results with AnalyzeOptions.Key, else the count of
	// authenticated frames; nil without a key and authenticated frames.
	Auth     *AuthReport `json:"auth,omitempty"`
	Timeline *Timeline   `json:"timeline,omitempty"`
	// FaultChecks set what each fault record asked next to what the
	// capture observed (see Faults verified on the wire in the package
	// doc), in record order.
	FaultChecks []FaultCheck `json:"fault_checks"`
	// PathDelay is the one-way delay the testbed itself adds, from the
	// segments sent while no delay was in force; nil without send times.
	PathDelay *PathDelay `json:"path_delay,omitempty"`

	msgs  []msg
	wire  *wireObserver
	names []string
}

// Truncation says where a truncated capture ends (TruncatedError).
type Truncation struct {
	Packets    int64 `json:"packets"`     // packets read whole, all analyzed
	WholeBytes int64 `json:"whole_bytes"` // where the last of them ends in the file
	SizeBytes  int64 `json:"size_bytes"`  // the file's size, the cut block included
}

// Warnings are what a reader of the report should know before trusting
// it, one line each naming the file: a truncated capture.
func (r *Report) Warnings() []string {
	var out []string
	if t := r.Truncated; t != nil {
		out = append(out, fmt.Sprintf("%s: truncated capture: the file ends inside a block at byte %d; analyzed the %d packets before it (bytes 0..%d)",
			r.File, t.SizeBytes, t.Packets, t.WholeBytes))
	}
	return out
}

// AnalysisSettings are the parameters the analysis used.
type AnalysisSettings struct {
	QuietNS         int64 `json:"quiet_ns"`
	TriggerWindowNS int64 `json:"trigger_window_ns"`
}

// NodeReport is one node and its traffic.
type NodeReport struct {
	Name  string     `json:"name"`
	Index int        `json:"index,omitempty"`
	ID    uuid.UUID  `json:"id"`
	Addr  netip.Addr `json:"addr"`
	Port  int        `json:"port,omitempty"`
	// FirstSeen is the timestamp of its first frame, if any.
	FirstSeen *time.Time `json:"first_seen,omitempty"`
	LiveAtEnd bool       `json:"live_at_end"`
	Sent      TypeCounts `json:"sent"`
	Received  TypeCounts `json:"received"`
}

// MessageRef identifies one frame.
type MessageRef struct {
	Packet int64 `json:"packet"`
	// Time is the capture's timestamp of the frame as it entered the switch
	// from the sender's port: after any delay the sender's egress added,
	// and microseconds before the receiver's kernel has it (see Send and
	// receipt times in the package doc).
	Time time.Time `json:"time"`
	// Sent is when the sender's kernel sent it, from the segment's TCP
	// timestamp; nil without the testbed's ClockInfo. SentErrNS bounds its
	// error (half a TSval tick plus the clock offset's error).
	Sent      *time.Time `json:"sent,omitempty"`
	SentErrNS int64      `json:"sent_err_ns,omitempty"`
	// Acked is when the receiver's acknowledgement of the frame's last
	// byte entered the switch; nil if none was seen (dropped by a cut or
	// a loss, or the capture ended first). Then Time is no receipt.
	Acked *time.Time `json:"acked,omitempty"`
	// Transmissions are the copies of the frame on the wire: the segment
	// that carried its last byte first, then each later one its sender
	// sent its bytes in again before the receiver acknowledged them (a TCP
	// retransmission), each with whether it was delivered or lost;
	// omitted when the capture does not tie the frame to its segment.
	// Time above is the first's; when it was lost, the frame reached its
	// receiver with the first delivered copy, not at Time.
	Transmissions []Transmission `json:"transmissions,omitempty"`
	From          string         `json:"from"`
	To            string         `json:"to"`
	Type          string         `json:"type"`
	Epoch         uint64         `json:"epoch"`
	Reason        string         `json:"reason,omitempty"`
}

// Outcomes of a Transmission.
const (
	OutcomeDelivered = "delivered"
	OutcomeLost      = "lost"
	OutcomeUndecided = "undecided"
)

// Transmission is one copy of a frame's segment on the wire. Its Outcome
// is OutcomeLost when its sender sent the same bytes again before any ACK
// covering them came back, or when it was on the switch while a
// drop-mode fault record (partition, isolate, cut) severed its direction
// and no ACK covered it before its next copy; OutcomeDelivered when such
// an ACK came first; OutcomeUndecided when the capture ended first. A copy
// the receiver got but whose ACK was lost on the way back is sent again
// too and counts as lost: the capture cannot tell the two apart.
type Transmission struct {
	// Time is when the copy entered the switch from the sender's port;
	// a delivered copy reached its receiver microseconds later.
	Time time.Time `json:"time"`
	// Sent is when the sender's kernel sent the copy, from its TCP
	// timestamp; nil without the testbed's ClockInfo. SentErrNS bounds
	// its error.
	Sent      *time.Time `json:"sent,omitempty"`
	SentErrNS int64      `json:"sent_err_ns,omitempty"`
	Outcome   string     `json:"outcome"`
	// Cut says a drop-mode fault record severed the copy's direction
	// while it was on the switch (from the record's InForce to the next
	// reachability change).
	Cut bool `json:"cut,omitempty"`
}

// Trigger is what started an election.
type Trigger struct {
	// Kind is the record's kind, or "wire" when no record explains the
	// election and its first message is the trigger.
	Kind   string    `json:"kind"`
	Time   time.Time `json:"time"`
	Packet int64     `json:"packet"`
	Nodes  []string  `json:"nodes,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Election is one election (see Analyze for how elections are found).
type Election struct {
	N       int       `json:"n"` // 1-based
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Trigger Trigger   `json:"trigger"`
	// Algorithm is the algorithm of its messages: wire.AlgorithmBully,
	// wire.AlgorithmRing, or AlgorithmMixed for both.
	Algorithm string     `json:"algorithm"`
	First     MessageRef `json:"first"` // its first ELECTION, HALT or RING_ELECTION, which opened it
	// DetectionNS runs from the trigger record to First; null for a wire trigger.
	DetectionNS *int64 `json:"detection_ns"`
	// TimeToLeaderNS runs from the trigger to the last live node being sent
	// the winning COORDINATOR (the ring's: ELECTED); null unless Converged.
	TimeToLeaderNS *int64    `json:"time_to_leader_ns"`
	Leader         string    `json:"leader,omitempty"`
	LeaderID       uuid.UUID `json:"leader_id"`
	Epoch          uint64    `json:"epoch"`
	Converged      bool      `json:"converged"`
	// Pending lists the live nodes the winning COORDINATOR (ELECTED) did
	// not reach.
	Pending  []string   `json:"pending,omitempty"`
	Messages TypeCounts `json:"messages"`
	first    int        // index of First in msgs
	last     int
}

// LeaderClaim is a node's first claim to lead an epoch.
type LeaderClaim struct {
	Node   string    `json:"node"`
	Epoch  uint64    `json:"epoch"`
	Time   time.Time `json:"time"`
	Packet int64     `json:"packet"`
}

// Final is the state at the end of the capture.
type Final struct {
	Leader    string    `json:"leader,omitempty"`
	LeaderID  uuid.UUID `json:"leader_id"`
	Epoch     uint64    `json:"epoch"`
	Converged bool      `json:"converged"`
	Detail    string    `json:"detail,omitempty"`
}

// Anomaly kinds.
const (
	AnomalyTwoLeaders       = "two-leaders"
	AnomalyLowerCoordinator = "lower-coordinator"
	AnomalyNoConvergence    = "no-convergence"
	// AnomalyLowerElected is the ring's lower-coordinator: a leader's
	// ELECTED naming itself while a higher node was live and reachable.
	AnomalyLowerElected = "lower-elected"
	// AnomalyMixedAlgorithms is a capture with frames of both election
	// algorithms: a cluster runs one, and its nodes ignore the other's.
	AnomalyMixedAlgorithms = "mixed-algorithms"
)

// Anomaly is something the algorithm's properties rule out, or a run that
// did not settle.
type Anomaly struct {
	Kind     string    `json:"kind"`
	Election int       `json:"election,omitempty"` // 0: none
	Time     time.Time `json:"time"`
	Packet   int64     `json:"packet,omitempty"`
	Epoch    uint64    `json:"epoch"`
	Nodes    []string  `json:"nodes,omitempty"`
	Detail   string    `json:"detail"`
}

// StreamErrorReport is a StreamError in the report.
type StreamErrorReport struct {
	Packet int64     `json:"packet"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"` // "src > dst"
	Offset uint64    `json:"offset"`
	Bytes  int       `json:"bytes,omitempty"`
	Error  string    `json:"error"`
}

// Timeline lists the messages of one election in order.
type Timeline struct {
	Election int             `json:"election"`
	Entries  []TimelineEntry `json:"entries"`
}

// TimelineEntry is one message; OffsetNS runs from the election's trigger.
type TimelineEntry struct {
	OffsetNS int64 `json:"offset_ns"`
	MessageRef
}

// msg is one election message, kept for deriving elections.
type msg struct {
	t     int64
	pkt   int64
	epoch uint64
	from  int32
	to    int32
	typ   wire.Type
	flags uint8
	frame int32 // in analyzer.wire.frames
	// leader is the node an ELECTED names, -1 when no node of the
	// capture has its ID (or for other types).
	leader int32
}

// announces returns the leader m announces, for a COORDINATOR (its
// sender) or an ELECTED (the node it names), and whether m is one.
func (m *msg) announces() (int32, bool) {
	switch m.typ {
	case wire.TypeCoordinator:
		return m.from, true
	case wire.TypeElected:
		return m.leader, m.leader >= 0
	}
	return -1, false
}

type nodeState struct {
	NodeReport
	sent, recv counts
	firstSeen  int64 // 0: never
	claimEpoch uint64
	claimed    bool
	// topClaim is the highest epoch the node's process claimed: frames
	// of a lower one are stale, written before and delivered late (a
	// minority leader's queue flushing at a heal), no new claim.
	topClaim   uint64
	claimedTop bool
	trans      []transition // liveness changes from records, in time order
}

type transition struct {
	t  int64
	up bool
}

type claim struct {
	node int32
	t    int64
	pkt  int64
}

type recordAt struct {
	Record
	t   int64
	pkt int64
}

type analyzer struct {
	opts    AnalyzeOptions
	rep     *Report
	diss    *Dissector
	nodes   []*nodeState
	byAddr  map[netip.Addr]int32
	byID    map[uuid.UUID]int32
	byName  map[string]int32
	byIface []int32
	total   counts
	msgs    []msg
	// msgList gathers msgs while the packets are read, in packet order.
	msgList chunkList[msg]
	records []recordAt
	claims  map[uint64]claim
	twice   map[[3]uint64]bool // reported (epoch, node, node) two-leader pairs
	anoms   []Anomaly
	errs    []StreamErrorReport
	auth    *authChecker
	authQ   *authQueue // with the key: auth's, until the packets are read
	wire    wireObserver
	first   int64
	last    int64
	quiet   time.Duration
	// firstOf is the first election message of each algorithm, by
	// wire.Algorithm name; a second name is a mixed capture.
	firstOf map[string]firstFrame
	hellos  []helloObs
	// hostClocks are the merged capture's host offsets, by node name.
	hostClocks map[string]hostClockOf
}

type firstFrame struct {
	t   int64
	pkt int64
	typ wire.Type
}

// AnalyzeFile opens path and analyzes it; errors name the file.
func AnalyzeFile(path string, opts AnalyzeOptions) (*Report, error) {
	if opts.Name == "" {
		opts.Name = path
	}
	f, err := os.Open(path)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", opts.Name, err)
	}
	defer f.Close()
	return Analyze(f, opts)
}

// Analyze reads a capture and derives its report from the file alone.
// Errors are one line naming opts.Name and, for corrupt input, the packet
// number. A capture that ends inside a block is no error unless no packet
// precedes the cut: the report covers the packets before it and says so in
// Truncated.
//
// Nodes come from the testbed record, else from the interface
// descriptions, else from the addresses seen (named by address). A frame's
// sender is the node with its source address (else its From ID, else its
// interface's node); its receiver the node with its destination address.
//
// Message classes: ELECTION, ANSWER, HALT, HALT_ACK, REJECT and COORDINATOR
// (Bully's), RING_ELECTION and ELECTED (the ring's) are election
// messages; HEARTBEAT, JOIN, LEAVE and MEMBERS are counted
// (overall and per node, sent and received, exactly: one count per frame
// decoded) but belong to no election. HELLO, which opens an authenticated
// connection, is transport: counted the same way (nodes count the HELLOs
// they send and receive too), but no message of the election, no claim to
// lead, and it neither starts nor times one.
//
// Liveness: a node is live from its first frame on the wire or a restart,
// join or resume record, until a crash, pause or leave record.
// Reachability, as the lab cuts it: a partition record cuts traffic
// between its groups (nodes in no group keep reaching everyone; with
// one_way only what the first group sends to the second is cut), an
// isolate record cuts a node from all; heal removes every partition and
// isolation, unisolate the node's isolation. A frame sent over a cut is on the wire
// (the capture is at the switch, the drop in the receiver) but is not
// counted as received when deciding convergence.
//
// Algorithm: the election messages' types tell which algorithm the
// capture ran (wire.Type.Algorithm); a capture with both is an anomaly,
// and its elections are still measured, each message by its own
// algorithm's rules.
//
// Elections: election messages are taken in timestamp order, by phase and
// by scope. Every fault or lifecycle record starts a phase: an election
// open when it comes ends there, so that each election belongs to one
// phase and is measured from its record. A symmetric partition or an
// isolation splits the network into scopes, one per side (the sender's
// side at the message's time), and each side elects on its own: in a
// scope, an election starts with an ELECTION, HALT or RING_ELECTION while
// none of that scope is open; it stays open while its scope's election messages follow
// each other within Quiet, and ends with the last of them. Election
// messages while none is open in their scope that open none (a leader
// re-asserting itself with a COORDINATOR, say) are counted
// in OutsideElections. Every election message is thus in exactly one
// election or outside.
//
// Trigger: the latest fault or lifecycle record (any kind but testbed and
// end) at most TriggerWindow before the election's first message and after
// the first message of the previous election of its phase and scope;
// failing that the trigger is that first message itself (kind "wire", e.g.
// reason boot at a cold start). Detection is the time from the trigger
// record to the election's first message, its first ELECTION, HALT or
// RING_ELECTION, whichever came first (First); undefined for a wire
// trigger.
//
// Winner: the COORDINATOR of the highest epoch in the election, its sender
// the leader (the latest such sender, should two claim one epoch, which is
// an anomaly). The election converged when every node live at its end and
// not cut from the leader, the leader aside, was sent a winning COORDINATOR
// not over a cut. Time to leader runs from the trigger to the moment the
// last of those nodes received its first winning COORDINATOR: the frame's
// capture timestamp on the sender's port, after any delay the leader's
// egress added, microseconds before the receiver's kernel has it (see Send
// and receipt times in the package doc). A frame is timed by its first
// complete transmission; TCP retransmissions are not counted again.
// The ring's winner is the node the ELECTED of the highest epoch in the
// election names (the latest such ELECTED); a node is reached by being
// sent that ELECTED, by whichever node forwards it: converged and time to
// leader follow as for Bully, the ELECTED's last hop, back to the leader,
// aside.
//
// Anomalies: two leaders in one epoch (a COORDINATOR, HEARTBEAT or ELECTED
// naming its sender from two nodes with one epoch); a COORDINATOR, or an
// ELECTED naming its sender (lower-elected), from a node while a node with
// a higher ID was live since the election began and not cut from it; a
// capture of both algorithms (mixed-algorithms); no
// convergence by the end of the capture (the last election did not
// converge, or its leader is not live at the end, or a higher live node
// that is not cut from it exists).
//
// Authentication: with the cluster key, every stream's tags are verified
// (see AuthReport); a failure is no anomaly of the election, and the frame
// is still counted and analyzed like any other, as it was on the wire.
func Analyze(r io.Reader, opts AnalyzeOptions) (*Report, error) {
	name := opts.Name
	if name == "" {
		name = "capture"
	}
	rd, err := NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	a := &analyzer{
		opts:    opts,
		rep:     &Report{Schema: Schema, File: opts.Name},
		byAddr:  map[netip.Addr]int32{},
		byID:    map[uuid.UUID]int32{},
		byName:  map[string]int32{},
		claims:  map[uint64]claim{},
		twice:   map[[3]uint64]bool{},
		auth:    newAuthChecker(opts.Key),
		firstOf: map[string]firstFrame{},
	}
	if opts.Key != nil {
		a.authQ = newAuthQueue(a.auth)
		defer a.authQ.finish()
	}
	prefault := make(chan struct{})
	defer close(prefault)
	a.wire.frames.prefault, a.wire.sends.prefault, a.wire.bareDelays.prefault, a.msgList.prefault = prefault, prefault, prefault, prefault
	full, free := readAhead(rd, a.ports)
	var prep *segmentPrep
	for b := range full {
		prep = b.prep
		for i := range b.pkts {
			a.packet(&b.pkts[i], &b.segs[i], b.ifaces)
		}
		err := b.err
		free <- b
		if err == io.EOF {
			break
		}
		var te *TruncatedError
		if errors.As(err, &te) && te.Packets > 0 {
			a.rep.Truncated = &Truncation{Packets: te.Packets, WholeBytes: te.Whole, SizeBytes: te.Size}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if a.diss != nil {
		a.diss.adoptHalves(prep)
		a.diss.Flush()
		a.rep.Stream = a.diss.Stats()
	}
	if a.authQ != nil {
		a.authQ.finish()
	}
	a.finish()
	return a.rep, nil
}

// packet analyzes one packet of the capture, whose segment ps prepared;
// ifaces are the capture's interfaces as of its first packet, which sets
// the analysis up.
func (a *analyzer) packet(p *Packet, ps *preparedSegment, ifaces []*Interface) {
	ts := p.CI.Timestamp.UnixNano()
	if p.Num == 1 {
		a.setup(ifaces, p)
		a.first = ts
	}
	a.rep.Packets++
	a.last = max(a.last, ts)
	if p.Record != nil {
		a.record(p, ts)
		return
	}
	if p.Iface.Events {
		return
	}
	a.diss.preparedPacket(p.Num, &p.CI, ps)
}

// setup builds the node map and the dissector once the first packet (and
// so every interface) is known.
func (a *analyzer) setup(ifaces []*Interface, p *Packet) {
	a.byIface = make([]int32, len(ifaces))
	if p.Record != nil && p.Record.Testbed != nil {
		a.testbed(p.Record.Testbed)
	}
	for i, ifc := range ifaces {
		a.byIface[i] = -1
		if ifc.Node != nil {
			a.byIface[i] = a.addNode(*ifc.Node)
		}
	}
	ports := a.ports(ifaces, p)
	a.rep.Ports = ports
	a.diss = NewDissector(a, DissectorOptions{Ports: ports, MaxFrame: a.opts.MaxFrame})
}

// ports are the election ports of the analysis: the options', else the
// capture's (framePorts); first is the capture's first packet.
func (a *analyzer) ports(ifaces []*Interface, first *Packet) []uint16 {
	if len(a.opts.Ports) > 0 {
		return slices.Sorted(slices.Values(a.opts.Ports))
	}
	return framePorts(ifaces, first)
}

// framePorts are the ports a capture's frames use: its node interfaces'
// ports, else those its first packet's testbed record names, else the
// default port; first is the capture's first packet.
func framePorts(ifaces []*Interface, first *Packet) []uint16 {
	var ports []uint16
	add := func(port int) {
		if port > 0 && port < 65536 && !slices.Contains(ports, uint16(port)) {
			ports = append(ports, uint16(port))
		}
	}
	for _, ifc := range ifaces {
		if ifc.Node != nil {
			add(ifc.Node.Port)
		}
	}
	if len(ports) == 0 && first.Record != nil && first.Record.Testbed != nil {
		for _, n := range first.Record.Testbed.Nodes {
			add(n.Port)
		}
	}
	if len(ports) == 0 {
		ports = []uint16{wire.DefaultPort}
	}
	slices.Sort(ports)
	return ports
}

func (a *analyzer) testbed(tb *TestbedInfo) {
	if a.rep.Topology == "" {
		a.rep.Topology, a.rep.Run = tb.Topology, tb.Run
	}
	for _, n := range tb.Nodes {
		a.addNode(n)
	}
	a.rep.ClockErrorNS = max(a.rep.ClockErrorNS, tb.ClockErrorNS)
	for _, h := range tb.Hosts {
		for _, n := range h.Nodes {
			if a.hostClocks == nil {
				a.hostClocks = map[string]hostClockOf{}
			}
			a.hostClocks[n] = hostClockOf{h.OffsetNS, h.BoundNS}
		}
	}
	if tb.Clock != nil && tb.Clock.TSUnitNS > 0 && a.wire.clock == nil {
		c := *tb.Clock
		a.wire.clock = &c
	}
	if a.quiet == 0 && tb.ElectionTimeoutNS > 0 {
		a.quiet = time.Duration(tb.ElectionTimeoutNS) * (waitFactor + 1)
	}
}

// addNode adds n, or completes the node with its address.
func (a *analyzer) addNode(n NodeInfo) int32 {
	i, ok := a.byAddr[n.Addr]
	if !ok && n.Name != "" {
		i, ok = a.byName[n.Name]
	}
	if !ok {
		i = int32(len(a.nodes))
		a.nodes = append(a.nodes, &nodeState{})
	}
	ns := a.nodes[i]
	if n.Name != "" && (ns.Name == "" || ns.Name == ns.Addr.String()) {
		ns.Name = n.Name
	}
	if n.Index != 0 {
		ns.Index = n.Index
	}
	if n.ID != (uuid.UUID{}) && ns.ID == (uuid.UUID{}) {
		ns.ID = n.ID
	}
	if n.Addr.IsValid() {
		ns.Addr = n.Addr
		a.byAddr[n.Addr] = i
	}
	if n.Port != 0 {
		ns.Port = n.Port
	}
	if ns.Name == "" {
		ns.Name = n.Addr.String()
	}
	a.byName[ns.Name] = i
	if ns.ID != (uuid.UUID{}) {
		a.byID[ns.ID] = i
	}
	return i
}

func (a *analyzer) record(p *Packet, ts int64) {
	rec := *p.Record
	if rec.Kind == KindTestbed && rec.Testbed != nil {
		a.testbed(rec.Testbed)
	}
	if rec.Kind == KindEnd && rec.Capture != nil {
		c := *rec.Capture
		a.rep.Capture = &c
	}
	a.records = append(a.records, recordAt{Record: rec, t: ts, pkt: p.Num})
	if rec.Mode == fault.ModeReset {
		a.wire.keepSegments = true // for the cut check: the resets a reset cut answers with
	}
	if change := rec.Kind.Process(); change != fault.ProcessKept {
		for _, name := range rec.Nodes {
			if i, ok := a.byName[name]; ok {
				a.nodes[i].trans = append(a.nodes[i].trans, transition{ts, change.Runs()})
				if change == fault.ProcessStarted {
					a.nodes[i].claimedTop = false // a new process
				}
			}
		}
	}
}

// nodeOfAddr returns the node with address addr, adding one named by the
// address if there is none.
func (a *analyzer) nodeOfAddr(addr netip.Addr) int32 {
	i, ok := a.byAddr[addr]
	if !ok {
		i = a.addNode(NodeInfo{Addr: addr})
	}
	return i
}

// Frame implements Handler.
func (a *analyzer) Frame(f *Frame) {
	m := &f.Msg
	st := f.Stream
	if !st.HasUser {
		st.User = [2]int32{a.nodeOfAddr(f.Src.Addr()), a.nodeOfAddr(f.Dst.Addr())}
		st.HasUser = true
	}
	from, to := st.User[0], st.User[1]
	a.rep.Frames++
	sender := a.nodes[from]
	if sender.ID == (uuid.UUID{}) && m.From != (uuid.UUID{}) {
		sender.ID = m.From
		if _, taken := a.byID[m.From]; !taken {
			a.byID[m.From] = from
		}
	}
	t := f.Time.UnixNano()
	if sender.firstSeen == 0 {
		sender.firstSeen = t
	}
	switch {
	case a.authQ != nil: // there is one whenever there is a key
		a.authQ.add(f, sender.Name, a.nodes[to].Name, a.nodes[to].ID)
	case m.Flags&wire.FlagAuth != 0:
		a.auth.rep.Frames++ // all that authChecker.check does without the key
	}
	typ := m.Type
	if f.Err != nil {
		typ = 0
	}
	fi := a.wire.frame(f, t, from, to)
	a.total.add(typ)
	sender.sent.add(typ)
	a.nodes[to].recv.add(typ)
	switch {
	case typ == wire.TypeHello:
		if h, err := wire.DecodeHello(m.Payload); err == nil {
			fo := a.wire.frames.at(fi)
			ho := helloObs{from: from, pkt: f.Packet, stamp: h.Time, at: t}
			if fo.sent != 0 {
				ho.at, ho.errNS, ho.sent = fo.sent, a.wire.sentErr(fo.sent), true
			}
			a.hellos = append(a.hellos, ho)
		}
	case typ == wire.TypeHeartbeat:
		a.claim(from, m.Epoch, t, f.Packet)
	case IsElectionMessage(typ):
		if alg := typ.Algorithm(); len(a.firstOf) < 2 {
			if _, ok := a.firstOf[alg]; !ok {
				a.firstOf[alg] = firstFrame{t, f.Packet, typ}
			}
		}
		mm := msg{t: t, pkt: f.Packet, epoch: m.Epoch, from: from, to: to, typ: typ, flags: m.Flags, frame: fi, leader: -1}
		if typ == wire.TypeElected {
			if id, err := wire.DecodeID(m.Payload); err == nil {
				if l, ok := a.byID[id]; ok {
					mm.leader = l
				}
			}
		}
		// A leader's claim: its COORDINATOR, or the ELECTED naming itself
		// that it sends first; the ELECTEDs its successors forward claim
		// nothing for them.
		if l, ok := mm.announces(); ok && l == from {
			a.claim(from, m.Epoch, t, f.Packet)
		}
		a.msgList.add(mm)
	}
}

// claim notes that node claims to lead epoch; a second claimer of one epoch
// is an anomaly.
func (a *analyzer) claim(node int32, epoch uint64, t, pkt int64) {
	ns := a.nodes[node]
	if ns.claimed && ns.claimEpoch == epoch {
		return
	}
	ns.claimed, ns.claimEpoch = true, epoch
	if !ns.claimedTop || epoch > ns.topClaim {
		ns.topClaim, ns.claimedTop = epoch, true
		a.rep.Claims = append(a.rep.Claims, LeaderClaim{Node: ns.Name, Epoch: epoch, Time: time.Unix(0, t).UTC(), Packet: pkt})
	}
	c, ok := a.claims[epoch]
	if !ok {
		a.claims[epoch] = claim{node, t, pkt}
		return
	}
	if c.node == node {
		return
	}
	k := [3]uint64{epoch, uint64(min(c.node, node)), uint64(max(c.node, node))}
	if a.twice[k] {
		return
	}
	a.twice[k] = true
	first, second := a.nodes[c.node].Name, ns.Name
	a.anoms = append(a.anoms, Anomaly{
		Kind: AnomalyTwoLeaders, Time: time.Unix(0, t).UTC(), Packet: pkt, Epoch: epoch,
		Nodes:  []string{first, second},
		Detail: fmt.Sprintf("%s and %s both lead epoch %d (%s since packet %d, %s at packet %d)", first, second, epoch, first, c.pkt, second, pkt),
	})
}

// StreamError implements Handler.
func (a *analyzer) StreamError(e *StreamError) {
	a.errs = append(a.errs, StreamErrorReport{
		Packet: e.Packet, Time: e.Time.UTC(), Stream: e.Src.String() + " > " + e.Dst.String(),
		Offset: e.Offset, Bytes: e.Bytes, Error: e.Err.Error(),
	})
}

// live reports whether node i is live at t.
func (a *analyzer) live(i int32, t int64) bool {
	ns := a.nodes[i]
	up, at := false, int64(-1<<63)
	if ns.firstSeen != 0 && ns.firstSeen <= t {
		up, at = true, ns.firstSeen
	}
	// The last record transition at or before t decides, unless the node
	// was seen sending after it (a record that was not written).
	k, _ := slices.BinarySearchFunc(ns.trans, t+1, func(x transition, t int64) int { return cmp.Compare(x.t, t) })
	if k > 0 && ns.trans[k-1].t >= at {
		up = ns.trans[k-1].up
	}
	return up
}

// cuts is the reachability state from some time on.
type cuts struct {
	t         int64
	inForce   int64         // the record's InForce, else t
	pkt       int64         // the record's packet
	group     map[int32]int // partition: node -> group; absent: the extra group
	oneWay    bool
	parted    bool
	partMode  fault.CutMode // how the partition severs
	isolated  map[int32]bool
	isoMode   map[int32]fault.CutMode    // how each isolation severs
	links     map[[2]int32]fault.CutMode // cut: sender and receiver cut, and how
	groupsLen int
}

func (c *cuts) cut(from, to int32) bool { return c.mode(from, to) != "" }

// mode says how what from sends to to is cut: "" when it is not, else
// ModeDrop or ModeReset. Where several faults cut it, a drop wins: the
// packet never reaches the side that would answer it.
func (c *cuts) mode(from, to int32) fault.CutMode {
	if c == nil {
		return ""
	}
	var mode fault.CutMode
	note := func(m fault.CutMode) {
		if mode == "" || m.OrDrop() == fault.ModeDrop {
			mode = m.OrDrop()
		}
	}
	for _, n := range [2]int32{from, to} {
		if c.isolated[n] {
			note(c.isoMode[n])
		}
	}
	if m, ok := c.links[[2]int32{from, to}]; ok {
		note(m)
	}
	if c.partitioned(from, to) {
		note(c.partMode)
	}
	return mode
}

// partitioned reports whether the partition cuts what from sends to to.
func (c *cuts) partitioned(from, to int32) bool {
	if !c.parted {
		return false
	}
	gf, okf := c.group[from]
	gt, okt := c.group[to]
	if !okf || !okt || gf == gt {
		return false // a node in no group reaches everyone
	}
	if c.oneWay {
		return gf == 0
	}
	return true
}

// eitherCut reports whether traffic between a and b is cut either way.
func (c *cuts) eitherCut(a, b int32) bool { return c.cut(a, b) || c.cut(b, a) }

func (a *analyzer) buildCuts() []*cuts {
	var out []*cuts
	cur := &cuts{t: -1 << 63, isolated: map[int32]bool{}}
	for _, r := range a.records {
		next := *cur
		changed := true
		switch r.Kind {
		case fault.Partition:
			next.group = map[int32]int{}
			for g, names := range r.Groups {
				for _, n := range names {
					if i, ok := a.byName[n]; ok {
						next.group[i] = g
					}
				}
			}
			next.groupsLen, next.oneWay, next.parted, next.partMode = len(r.Groups), r.OneWay, true, r.Mode
		case fault.Cut:
			next.links = map[[2]int32]fault.CutMode{}
			for _, l := range r.Links {
				i, iok := a.byName[l[0]]
				j, jok := a.byName[l[1]]
				if !iok || !jok || i == j {
					continue
				}
				next.links[[2]int32{i, j}] = r.Mode.OrDrop()
				if !r.OneWay {
					next.links[[2]int32{j, i}] = r.Mode.OrDrop()
				}
			}
		case fault.Heal:
			next.group, next.parted, next.oneWay, next.partMode = nil, false, false, ""
			next.isolated, next.isoMode, next.links = map[int32]bool{}, nil, nil
		case fault.Isolate, fault.Unisolate:
			next.isolated = maps.Clone(cur.isolated)
			if next.isolated == nil {
				next.isolated = map[int32]bool{}
			}
			next.isoMode = maps.Clone(cur.isoMode)
			if next.isoMode == nil {
				next.isoMode = map[int32]fault.CutMode{}
			}
			for _, n := range r.Nodes {
				if i, ok := a.byName[n]; ok {
					if r.Kind == fault.Isolate {
						next.isolated[i], next.isoMode[i] = true, r.Mode.OrDrop()
					} else {
						delete(next.isolated, i)
						delete(next.isoMode, i)
					}
				}
			}
		default:
			changed = false
		}
		if changed {
			next.t, next.pkt, next.inForce = r.t, r.pkt, r.t
			if !r.InForce.IsZero() {
				next.inForce = r.InForce.UnixNano()
			}
			cur = &next
			out = append(out, cur)
		}
	}
	return out
}

// cutsAt returns the reachability in force at t, nil for none.
func cutsAt(all []*cuts, t int64) *cuts {
	k, _ := slices.BinarySearchFunc(all, t+1, func(c *cuts, t int64) int { return cmp.Compare(c.t, t) })
	if k == 0 {
		return nil
	}
	return all[k-1]
}

// higher reports whether node i has a higher ID (Bully priority) than j.
func (a *analyzer) higher(i, j int32) bool {
	return bytes.Compare(a.nodes[i].ID[:], a.nodes[j].ID[:]) > 0
}

func (a *analyzer) name(i int32) string {
	if i < 0 || int(i) >= len(a.nodes) {
		return "?"
	}
	return a.nodes[i].Name
}

func (a *analyzer) ref(m *msg) MessageRef {
	return messageRef(m, &a.wire, a.name)
}

// messageRef describes m, with its send and acknowledgement times and
// its transmissions from w when known.
func messageRef(m *msg, w *wireObserver, name func(int32) string) MessageRef {
	r := MessageRef{Packet: m.pkt, Time: time.Unix(0, m.t).UTC(), From: name(m.from), To: name(m.to),
		Type: m.typ.String(), Epoch: m.epoch}
	if m.typ.HasReason() {
		r.Reason = (&wire.Message{Flags: m.flags}).Reason().String()
	}
	if w != nil && m.frame >= 0 && m.frame < w.frames.len() {
		fo := w.frames.at(m.frame)
		r.Transmissions = w.copiesOf(fo)
		if fo.sent != 0 {
			sent := time.Unix(0, fo.sent).UTC()
			r.Sent, r.SentErrNS = &sent, w.sentErr(fo.sent)
		}
		if fo.acked != 0 {
			acked := time.Unix(0, fo.acked).UTC()
			r.Acked = &acked
		}
	}
	return r
}

func ns(d int64) *int64 { return &d }

// finish derives the report from what the packets left in a.
func (a *analyzer) finish() {
	quiet, window := a.settings()
	a.msgs = a.msgList.slice()
	a.msgList = chunkList[msg]{}
	a.span()
	a.sortByTime()
	allCuts := a.buildCuts()
	a.wire.markCutCopies(allCuts)
	a.totals()
	a.algorithm()
	els := a.elections(quiet, window, allCuts)
	a.lowerCoordinators(els, allCuts)
	a.final(els, allCuts)
	a.nodeReports()
	a.anomalies()
	a.faultChecks(allCuts)
	a.keepTimelines()
}

// settings returns the quiet period and trigger window in force, the
// options' or the defaults (a default quiet period long enough for the
// testbed's election timeout, see testbed), and notes them in the report.
func (a *analyzer) settings() (quiet, window time.Duration) {
	quiet = a.opts.Quiet
	if quiet <= 0 {
		quiet = max(DefaultQuiet, a.quiet)
	}
	window = a.opts.TriggerWindow
	if window <= 0 {
		window = DefaultTriggerWindow
	}
	a.rep.Settings = AnalysisSettings{QuietNS: int64(quiet), TriggerWindowNS: int64(window)}
	return quiet, window
}

// span sets the report's first and last packet times.
func (a *analyzer) span() {
	if a.rep.Packets > 0 {
		a.rep.Start, a.rep.End = time.Unix(0, a.first).UTC(), time.Unix(0, a.last).UTC()
		a.rep.DurationNS = a.last - a.first
	}
}

// sortByTime puts the nodes' liveness changes, the records and the
// election messages in time order.
func (a *analyzer) sortByTime() {
	for _, n := range a.nodes {
		slices.SortStableFunc(n.trans, func(x, y transition) int { return cmp.Compare(x.t, y.t) })
	}
	slices.SortStableFunc(a.records, func(x, y recordAt) int { return cmp.Compare(x.t, y.t) })
	// Frames are delivered in packet order; the file is in timestamp order
	// but for late items, so sort (stably: ties keep packet order).
	if !slices.IsSortedFunc(a.msgs, func(x, y msg) int { return cmp.Compare(x.t, y.t) }) {
		slices.SortStableFunc(a.msgs, func(x, y msg) int { return cmp.Compare(x.t, y.t) })
	}
}

// totals fills in the report's message counts, records, stream errors
// and authentication report.
func (a *analyzer) totals() {
	rep := a.rep
	rep.Messages = a.total.typeCounts()
	rep.ElectionMessages = rep.Messages.ElectionTotal()
	rep.Records = make([]Record, len(a.records))
	for i := range a.records {
		rep.Records[i] = a.records[i].Record
	}
	rep.StreamErrors = a.errs
	if rep.StreamErrors == nil {
		rep.StreamErrors = []StreamErrorReport{}
	}
	if rep.Ports == nil {
		rep.Ports = []uint16{} // no packet set them
	}
	rep.Auth = a.auth.report()
}

// elections segments the election messages into elections, finds each
// one's trigger and winner, and sets the report's elections and the
// messages outside them.
func (a *analyzer) elections(quiet, window time.Duration, allCuts []*cuts) []Election {
	els, byElection, outside := a.segment(quiet, window, allCuts)
	a.rep.OutsideElections = outside.typeCounts()
	for k := range els {
		e := &els[k]
		e.Messages = byElection[k].typeCounts()
		e.Algorithm = countsAlgorithm(&byElection[k])
		e.Start = time.Unix(0, a.msgs[e.first].t).UTC()
		e.End = time.Unix(0, a.msgs[e.last].t).UTC()
		a.winner(e, allCuts)
	}
	a.rep.Elections = els
	if a.rep.Elections == nil {
		a.rep.Elections = []Election{}
	}
	slices.SortStableFunc(a.rep.Claims, func(x, y LeaderClaim) int { return x.Time.Compare(y.Time) })
	if a.rep.Claims == nil {
		a.rep.Claims = []LeaderClaim{}
	}
	return els
}

// countsAlgorithm names the algorithm whose messages c counts:
// wire.AlgorithmBully, wire.AlgorithmRing, AlgorithmMixed for both, ""
// for neither.
func countsAlgorithm(c *counts) string {
	var bully, ring bool
	for t, n := range c {
		if n == 0 {
			continue
		}
		switch wire.Type(t).Algorithm() {
		case wire.AlgorithmBully:
			bully = true
		case wire.AlgorithmRing:
			ring = true
		}
	}
	switch {
	case bully && ring:
		return AlgorithmMixed
	case bully:
		return wire.AlgorithmBully
	case ring:
		return wire.AlgorithmRing
	}
	return ""
}

// algorithm sets the report's algorithm from its election messages, and
// reports a capture of both algorithms as an anomaly at the first message
// of the one that came second.
func (a *analyzer) algorithm() {
	a.rep.Algorithm = countsAlgorithm(&a.total)
	if a.rep.Algorithm != AlgorithmMixed {
		return
	}
	b, r := a.firstOf[wire.AlgorithmBully], a.firstOf[wire.AlgorithmRing]
	first, second := b, r
	if r.t < b.t || r.t == b.t && r.pkt < b.pkt {
		first, second = r, b
	}
	a.anoms = append(a.anoms, Anomaly{
		Kind: AnomalyMixedAlgorithms, Time: time.Unix(0, second.t).UTC(), Packet: second.pkt,
		Detail: fmt.Sprintf("%s (%s) at packet %d after %s (%s) at packet %d: the capture mixes both election algorithms, which one cluster never does; its elections are measured as they came",
			second.typ, second.typ.Algorithm(), second.pkt, first.typ, first.typ.Algorithm(), first.pkt),
	})
}

// segment cuts the election messages into elections, by phase and by
// scope. A phase runs from one fault or lifecycle record to the next: an
// election open when a record comes ends there, and what the nodes send
// after it belongs to the record's phase. A scope is a part of the network
// that a symmetric partition or an isolation cuts off, as the sender stands
// at the message's time: each side of a partition elects on its own. In a
// scope, an ELECTION or HALT outside an election opens one, which lasts
// until no message of its scope comes for quiet. It returns the elections,
// their messages counted by type, and the election messages outside any
// election.
func (a *analyzer) segment(quiet, window time.Duration, allCuts []*cuts) (els []Election, byElection []counts, outside counts) {
	bounds := a.phaseBounds()
	open := map[int]int{} // scope -> index in els of its open election
	// prevFirst is, per scope, the first message of its last election in
	// this phase: a record triggers one election in each scope.
	prevFirst := map[int]int64{}
	phase := 0
	for i := range a.msgs {
		m := &a.msgs[i]
		if p := phaseOf(bounds, m.t); p != phase {
			phase = p
			clear(open)
			clear(prevFirst)
		}
		scope := scopeOf(cutsAt(allCuts, m.t), m.from)
		k, isOpen := open[scope]
		if isOpen && m.t-a.msgs[els[k].last].t > int64(quiet) {
			isOpen = false
		}
		if !isOpen {
			if !opensElection(m.typ) {
				outside.add(m.typ)
				continue
			}
			els = append(els, Election{N: len(els) + 1, first: i, last: i})
			byElection = append(byElection, counts{})
			k = len(els) - 1
			open[scope] = k
			e := &els[k]
			e.First = a.ref(m)
			after, seen := prevFirst[scope]
			if !seen {
				after = -1 << 63
			}
			e.Trigger = a.trigger(m, after, int64(window))
			if e.Trigger.Kind != "wire" {
				e.DetectionNS = ns(m.t - e.Trigger.Time.UnixNano())
			}
			prevFirst[scope] = m.t
		}
		els[k].last = i
		byElection[k].add(m.typ)
	}
	return els, byElection, outside
}

// opensElection reports whether a message of type t, outside an
// election, opens one: Bully's ELECTION or HALT, the ring's RING_ELECTION.
func opensElection(t wire.Type) bool {
	return t == wire.TypeElection || t == wire.TypeHalt || t == wire.TypeRingElection
}

// phaseBounds returns the times of the records that start phases: every
// fault and lifecycle record, in time order.
func (a *analyzer) phaseBounds() []int64 {
	var bounds []int64
	for _, r := range a.records {
		if r.Kind != KindTestbed && r.Kind != KindEnd {
			bounds = append(bounds, r.t)
		}
	}
	slices.Sort(bounds)
	return bounds
}

// phaseOf returns the phase at t: how many bounds are at or before it.
func phaseOf(bounds []int64, t int64) int {
	k, _ := slices.BinarySearch(bounds, t+1)
	return k
}

// scopeOf returns the part of the network node stands in under c: its own
// when isolated, its group in a symmetric partition (nodes in no group,
// which reach every group, one more), else the one network.
// A one-way partition leaves one scope: its sides still hear one another
// one way, and an election can span them.
func scopeOf(c *cuts, node int32) int {
	switch {
	case c == nil:
		return 0
	case c.isolated[node]:
		return -1 - int(node)
	case !c.parted || c.oneWay:
		return 0
	}
	if g, ok := c.group[node]; ok {
		return g
	}
	return c.groupsLen
}

// nodeReports sets the report's nodes, with their counts, when each was
// first seen and whether it is live at the end.
func (a *analyzer) nodeReports() {
	a.rep.Nodes = make([]NodeReport, len(a.nodes))
	for i, n := range a.nodes {
		nr := n.NodeReport
		nr.Sent, nr.Received = n.sent.typeCounts(), n.recv.typeCounts()
		if n.firstSeen != 0 {
			t := time.Unix(0, n.firstSeen).UTC()
			nr.FirstSeen = &t
		}
		nr.LiveAtEnd = a.live(int32(i), a.last)
		a.rep.Nodes[i] = nr
	}
}

// anomalies sets the report's anomalies, in time order.
func (a *analyzer) anomalies() {
	slices.SortStableFunc(a.anoms, func(x, y Anomaly) int { return x.Time.Compare(y.Time) })
	a.rep.Anomalies = a.anoms
	if a.rep.Anomalies == nil {
		a.rep.Anomalies = []Anomaly{}
	}
}

// keepTimelines keeps in the report what Report.ElectionTimeline needs:
// the messages and the nodes' names.
func (a *analyzer) keepTimelines() {
	a.rep.msgs = a.msgs
	a.rep.wire = &wireObserver{clock: a.wire.clock, frames: a.wire.frames, sends: a.wire.sends, resent: a.wire.resent}
	a.rep.names = make([]string, len(a.nodes))
	for i := range a.nodes {
		a.rep.names[i] = a.nodes[i].Name
	}
}

// trigger finds what started the election whose first message is m.
func (a *analyzer) trigger(m *msg, after, window int64) Trigger {
	for k := len(a.records) - 1; k >= 0; k-- {
		r := &a.records[k]
		if r.t > m.t {
			continue
		}
		if r.t <= after || m.t-r.t > window {
			break
		}
		if r.Kind == KindTestbed || r.Kind == KindEnd {
			continue
		}
		return Trigger{Kind: string(r.Kind), Time: time.Unix(0, r.t).UTC(), Packet: r.pkt, Nodes: r.Nodes, Detail: r.Detail}
	}
	ref := a.ref(m)
	return Trigger{Kind: "wire", Time: ref.Time, Packet: m.pkt, Nodes: []string{ref.From},
		Detail: fmt.Sprintf("%s from %s to %s epoch %d reason %s", ref.Type, ref.From, ref.To, m.epoch, ref.Reason)}
}

// winner finds the election's leader and whether and when it converged.
// Bully's leader is the sender of the COORDINATOR of the highest epoch,
// and it reaches a node by sending it that COORDINATOR; the ring's is the
// node the ELECTED of the highest epoch names, which reaches a node
// whoever forwards it there.
func (a *analyzer) winner(e *Election, allCuts []*cuts) {
	msgs := a.msgs[e.first : e.last+1]
	best := -1
	for i := range msgs {
		m := &msgs[i]
		if _, ok := m.announces(); ok && (best < 0 || m.epoch >= msgs[best].epoch) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	leader, _ := msgs[best].announces()
	epoch, typ := msgs[best].epoch, msgs[best].typ
	e.Leader, e.LeaderID, e.Epoch = a.name(leader), a.nodes[leader].ID, epoch
	end := msgs[len(msgs)-1].t
	reached := map[int32]int64{}
	for i := range msgs {
		m := &msgs[i]
		if l, ok := m.announces(); !ok || m.typ != typ || l != leader || m.epoch != epoch {
			continue
		}
		if _, ok := reached[m.to]; ok || cutsAt(allCuts, m.t).cut(m.from, m.to) {
			continue
		}
		reached[m.to] = m.t
	}
	c := cutsAt(allCuts, end)
	lastReach := int64(-1 << 63)
	for i := range a.nodes {
		v := int32(i)
		if v == leader || !a.live(v, end) || c.eitherCut(leader, v) {
			continue
		}
		t, ok := reached[v]
		if !ok {
			e.Pending = append(e.Pending, a.nodes[v].Name)
			continue
		}
		lastReach = max(lastReach, t)
	}
	e.Converged = len(e.Pending) == 0 && a.live(leader, end)
	if e.Converged && lastReach != -1<<63 {
		e.TimeToLeaderNS = ns(lastReach - e.Trigger.Time.UnixNano())
	}
}

// lowerCoordinators reports COORDINATORs, and the ELECTEDs by which a
// ring's leader names itself, sent while a higher node was live since the
// election began and not cut from the sender.
func (a *analyzer) lowerCoordinators(els []Election, allCuts []*cuts) {
	seen := map[[2]uint64]bool{}
	el := 0
	for i := range a.msgs {
		m := &a.msgs[i]
		for el < len(els) && els[el].last < i {
			el++
		}
		if l, ok := m.announces(); !ok || l != m.from {
			continue
		}
		k := [2]uint64{m.epoch, uint64(m.from)}
		if seen[k] {
			continue
		}
		seen[k] = true
		since, n := m.t, 0
		if el < len(els) && els[el].first <= i {
			since, n = a.msgs[els[el].first].t, els[el].N
		}
		c := cutsAt(allCuts, m.t)
		var top int32 = -1
		for j := range a.nodes {
			h := int32(j)
			if h == m.from || a.nodes[h].ID == (uuid.UUID{}) || !a.higher(h, m.from) {
				continue
			}
			if !a.live(h, since) || !a.live(h, m.t) || c.eitherCut(h, m.from) || cutsAt(allCuts, since).eitherCut(h, m.from) {
				continue
			}
			if top < 0 || a.higher(h, top) {
				top = h
			}
		}
		if top < 0 {
			continue
		}
		kind, what := AnomalyLowerCoordinator, "COORDINATOR"
		if m.typ == wire.TypeElected {
			kind, what = AnomalyLowerElected, "ELECTED naming itself"
		}
		a.anoms = append(a.anoms, Anomaly{
			Kind: kind, Election: n, Time: time.Unix(0, m.t).UTC(), Packet: m.pkt, Epoch: m.epoch,
			Nodes:  []string{a.name(m.from), a.name(top)},
			Detail: fmt.Sprintf("%s sent %s epoch %d to %s while higher node %s was live and reachable", a.name(m.from), what, m.epoch, a.name(m.to), a.name(top)),
		})
	}
}

// final decides the state at the end of the capture.
func (a *analyzer) final(els []Election, allCuts []*cuts) {
	f := &a.rep.Final
	var last *Election
	for k := len(els) - 1; k >= 0; k-- {
		if els[k].Leader != "" {
			last = &els[k]
			break
		}
	}
	fail := func(format string, args ...any) {
		f.Detail = fmt.Sprintf(format, args...)
		var nodes []string
		if f.Leader != "" {
			nodes = []string{f.Leader}
		}
		a.anoms = append(a.anoms, Anomaly{Kind: AnomalyNoConvergence, Election: len(els), Time: time.Unix(0, a.last).UTC(),
			Epoch: f.Epoch, Nodes: nodes, Detail: f.Detail})
	}
	if len(els) == 0 {
		f.Detail = "no election in the capture"
		return
	}
	if last == nil {
		fail("no election produced a leader")
		return
	}
	f.Leader, f.LeaderID, f.Epoch = last.Leader, last.LeaderID, last.Epoch
	leader := a.byName[last.Leader]
	final := &els[len(els)-1]
	c := cutsAt(allCuts, a.last)
	switch {
	case final != last:
		fail("election %d produced no leader", final.N)
	case !last.Converged:
		if last.Algorithm == wire.AlgorithmRing {
			fail("election %d did not converge: %s not sent ELECTED epoch %d naming %s", last.N, someNames(last.Pending), last.Epoch, last.Leader)
			break
		}
		fail("election %d did not converge: %s not sent COORDINATOR epoch %d from %s", last.N, someNames(last.Pending), last.Epoch, last.Leader)
	case !a.live(leader, a.last):
		fail("leader %s of epoch %d is not live at the end of the capture", last.Leader, last.Epoch)
	default:
		for i := range a.nodes {
			h := int32(i)
			if h != leader && a.nodes[h].ID != (uuid.UUID{}) && a.higher(h, leader) && a.live(h, a.last) && !c.eitherCut(h, leader) {
				fail("higher node %s is live at the end of the capture but %s leads epoch %d", a.nodes[h].Name, last.Leader, last.Epoch)
				return
			}
		}
		f.Converged = true
	}
}

// namesInDetail is the most node names a detail lists: a star1000
// partition left 480 nodes without the leader's COORDINATOR, and their
// names made the text summary's converged cell 3,500 characters wide.
// The election's pending (and the anomaly's nodes) list them all.
const namesInDetail = 10

// someNames lists names in brackets, at most namesInDetail of them, and
// says how many more there are and how many in all, with a verb to match.
func someNames(names []string) string {
	if len(names) <= namesInDetail {
		verb := " were"
		if len(names) == 1 {
			verb = " was"
		}
		return fmt.Sprint(names) + verb
	}
	return fmt.Sprintf("%v and %d more (%d nodes) were", names[:namesInDetail], len(names)-namesInDetail, len(names))
}

// ElectionTimeline returns the messages of election n (1-based) in order.
func (r *Report) ElectionTimeline(n int) (*Timeline, error) {
	if n < 1 || n > len(r.Elections) {
		return nil, fmt.Errorf("no election %d (the capture has %d)", n, len(r.Elections))
	}
	e := &r.Elections[n-1]
	if r.msgs == nil {
		return nil, errors.New("timeline: report was not produced by Analyze")
	}
	t0 := e.Trigger.Time.UnixNano()
	tl := &Timeline{Election: n}
	name := func(i int32) string {
		if i < 0 || int(i) >= len(r.names) {
			return "?"
		}
		return r.names[i]
	}
	for i := e.first; i <= e.last; i++ {
		m := &r.msgs[i]
		ref := messageRef(m, r.wire, name)
		tl.Entries = append(tl.Entries, TimelineEntry{OffsetNS: m.t - t0, MessageRef: ref})
	}
	return tl, nil
}
