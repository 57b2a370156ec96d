// Package fault is the faults a testbed can suffer: their kinds, their
// records and their grammar, the one vocabulary that scenarios, the
// command line, the lab, the control API and captures share.
//
// Adding a kind: its constant and its row in kinds (what it names, what it
// does to processes, whether every host applies it), here; the action, in
// netem/lab's Apply; the kind in scripts/bullylab.lua's record_kinds (a
// capture test compares them); its words in the command line's help
// (cmd/bullylab's faultHelp), the scenario grammar (netem/scenario's doc)
// and the README; its mark in netem/bench's sequence diagrams. The command
// line (ParseWords) and scenario files take it with its Args, and the
// capture analysis follows its ProcessChange. A kind with new effects
// needs code where they are modelled: the capture's cuts and impairment
// windows, the scenario resolver (node pools, network, predicted states),
// netem/bench's judging and spans.
package fault

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Kind names a fault. The names are those of scenario files, of the
// control API and of the capture's fault records, so that a schedule and
// its capture read alike.
type Kind string

// The kinds. What a fault of each names (Kind.Args) and does to processes
// (Kind.Process) is its row in kinds.
const (
	Crash     Kind = "crash"     // SIGKILL the node's process
	Restart   Kind = "restart"   // start a crashed (or never started) node
	Pause     Kind = "pause"     // SIGSTOP: a grey failure, sockets stay open
	Resume    Kind = "resume"    // SIGCONT a paused node
	Isolate   Kind = "isolate"   // drop every packet to and from the node
	Unisolate Kind = "unisolate" // reconnect an isolated node
	Partition Kind = "partition" // cut Groups from each other (OneWay: only Groups[0] -> Groups[1])
	Heal      Kind = "heal"      // remove the partition and reconnect isolated nodes (not impairments)
	Delay     Kind = "delay"     // add latency to what the nodes send
	Loss      Kind = "loss"      // drop a share of what the nodes send
	Clear     Kind = "clear"     // restore the topology's impairments of the nodes
	Campaign  Kind = "campaign"  // ask the node to start an election
	Leave     Kind = "leave"     // the node announces LEAVE and stops
	Join      Kind = "join"      // start a node that left, announcing JOIN
	Cut       Kind = "cut"       // cut the Links, node pairs, leaving every other link up (partial connectivity)
	Clock     Kind = "clock"     // offset and skew the wall clock the nodes read (Fault.Clock)
)

// Args is what a fault of a kind names, besides its kind.
type Args int

const (
	ArgsNodes      Args = iota + 1 // Nodes, one or more: the targets
	ArgsNodesOrAll                 // Nodes, none meaning every node; or Nodes and Peers, a pair
	ArgsNone                       // nothing
	ArgsGroups                     // Groups, two or more
	ArgsDelay                      // Nodes the senders, Peers (optional) the receivers, Impair's Delay and Jitter
	ArgsLoss                       // as ArgsDelay, with Impair's Loss
	ArgsLinks                      // Links, one or more node pairs
	ArgsClock                      // Nodes, one or more, and Clock
)

// ProcessChange is what a fault does to the processes of its Nodes.
type ProcessChange int

const (
	ProcessKept      ProcessChange = iota // left as they are
	ProcessEnded                          // gone: the node is back only as a new process
	ProcessStopped                        // stopped, sockets open
	ProcessContinued                      // a stopped process runs again
	ProcessStarted                        // a new process
)

// Runs reports whether the nodes' processes run after the change.
func (c ProcessChange) Runs() bool { return c == ProcessContinued || c == ProcessStarted }

// kinds holds what each kind names and does, in documentation order.
// everywhere: the fault changes links the whole network shares, so every
// host a testbed spans applies it, not only the hosts of its Nodes.
var kinds = [...]struct {
	kind       Kind
	args       Args
	process    ProcessChange
	everywhere bool
}{
	{Crash, ArgsNodes, ProcessEnded, false},
	{Restart, ArgsNodes, ProcessStarted, false},
	{Pause, ArgsNodes, ProcessStopped, false},
	{Resume, ArgsNodes, ProcessContinued, false},
	{Isolate, ArgsNodes, ProcessKept, false},
	{Unisolate, ArgsNodes, ProcessKept, false},
	{Partition, ArgsGroups, ProcessKept, true},
	{Heal, ArgsNone, ProcessKept, true},
	{Delay, ArgsDelay, ProcessKept, true},
	{Loss, ArgsLoss, ProcessKept, true},
	{Clear, ArgsNodesOrAll, ProcessKept, true},
	{Campaign, ArgsNodes, ProcessKept, false},
	{Leave, ArgsNodes, ProcessEnded, false},
	{Join, ArgsNodes, ProcessStarted, false},
	{Cut, ArgsLinks, ProcessKept, true},
	{Clock, ArgsClock, ProcessKept, false},
}

// Kinds lists every fault kind in documentation order.
var Kinds = func() []Kind {
	out := make([]Kind, len(kinds))
	for i, k := range kinds {
		out[i] = k.kind
	}
	return out
}()

func (k Kind) index() int {
	for i := range kinds {
		if kinds[i].kind == k {
			return i
		}
	}
	return -1
}

// Known reports whether k is one of Kinds.
func (k Kind) Known() bool { return k.index() >= 0 }

// Args says what a fault of kind k names; 0 for an unknown kind.
func (k Kind) Args() Args {
	if i := k.index(); i >= 0 {
		return kinds[i].args
	}
	return 0
}

// Impairs reports whether k sets an impairment of what Nodes send.
func (k Kind) Impairs() bool { a := k.Args(); return a == ArgsDelay || a == ArgsLoss }

// Process says what a fault of kind k does to its nodes' processes;
// ProcessKept for an unknown kind.
func (k Kind) Process() ProcessChange {
	if i := k.index(); i >= 0 {
		return kinds[i].process
	}
	return ProcessKept
}

// Everywhere reports whether a fault of kind k changes links the whole
// network shares, so that every host of a testbed spanning several
// applies it, rather than the hosts of its Nodes alone.
func (k Kind) Everywhere() bool {
	i := k.index()
	return i >= 0 && kinds[i].everywhere
}

// KindNames is Kinds as strings, such as the field names of a grammar.
func KindNames() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return names
}

// KindList is Kinds as one comma-separated string, for messages.
func KindList() string { return strings.Join(KindNames(), ", ") }

// Fault is one fault: the request a lab applies and the control API's
// POST /fault takes, and the record observers and captures get.
//
//	crash, restart, pause, resume, isolate, unisolate, campaign, leave:
//	        Nodes are the targets
//	partition: Groups (two or more, disjoint; an entry may name a topology
//	        group); OneWay drops only what Groups[0] sends to Groups[1]
//	heal:   clears every partition and isolation
//	delay:  Nodes are the senders, Peers (optional) the destinations, each
//	        sender's sends to each peer (or to everyone) get Impair's Delay
//	        and Jitter, their other impairments kept; one fault for all
//	loss:   the same with Impair.Loss, which the receivers apply
//	join:   Nodes, down, start again and announce themselves with JOIN
//	clear:  restores the topology's impairments of Nodes (all when empty),
//	        or with Peers (one node and one peer from the command line)
//	        only those of what Nodes send to Peers
//
// In a record, Time is when the lab began applying it (the change is in
// force within about a millisecond of it), Groups are resolved to node
// names, Impair is the impairment then in force on the affected link or
// pair, and Detail says in words what changed.
type Fault struct {
	Time time.Time `json:"time"`
	// InForce, in a record, is when the change was known to be in force
	// (processes gone or stopped, rules installed); zero when unknown.
	InForce time.Time  `json:"in_force,omitzero"`
	Kind    Kind       `json:"kind"`
	Nodes   []string   `json:"nodes,omitempty"`
	Peers   []string   `json:"peers,omitempty"`
	Groups  [][]string `json:"groups,omitempty"`
	// Links are the node pairs a cut separates, each cut both ways, or
	// with OneWay only what the first sends to the second.
	Links  [][2]string `json:"links,omitempty"`
	OneWay bool        `json:"one_way,omitempty"`
	// Mode is how partition, isolate and cut sever what they cut; empty
	// means ModeDrop.
	Mode   CutMode     `json:"mode,omitempty"`
	Impair *Impairment `json:"impair,omitempty"`
	// Clock is the wall clock a clock fault sets on its Nodes.
	Clock  *ClockSkew `json:"clock,omitempty"`
	Detail string     `json:"detail,omitempty"`
}

// CutMode is how a partition, isolation or cut severs a link.
type CutMode string

const (
	// ModeDrop drops every packet silently, as a pulled cable does: the
	// sender learns of it only by timeouts.
	ModeDrop CutMode = "drop"
	// ModeReset refuses at once: a SYN across the cut is answered with
	// a TCP RST, and so is every segment of a connection established
	// before it, which resets that connection at its next segment.
	ModeReset CutMode = "reset"
)

// CutModes lists the modes, ModeDrop first.
var CutModes = []CutMode{ModeDrop, ModeReset}

// Valid reports whether m is empty (ModeDrop) or one of CutModes.
func (m CutMode) Valid() bool { return m == "" || m == ModeDrop || m == ModeReset }

// OrDrop is m, with empty read as ModeDrop.
func (m CutMode) OrDrop() CutMode {
	if m == "" {
		return ModeDrop
	}
	return m
}

// ClockSkew is the wall clock a node reads, relative to its host's: an
// offset at the moment the fault is applied, and a rate, in parts per
// million, at which it drifts from there on (500 gains 0.5 ms a second).
// A zero ClockSkew puts the node back on its host's clock.
type ClockSkew struct {
	Offset  time.Duration `json:"offset_ns,omitempty"`
	RatePPM float64       `json:"rate_ppm,omitempty"`
}

// MaxClockRatePPM bounds a clock fault's rate: beyond a tenth, timers
// would measure something other than the node's timings.
const MaxClockRatePPM = 100_000

// MaxClockOffset bounds a clock fault's offset both ways.
const MaxClockOffset = 100 * 365 * 24 * time.Hour

// Validate rejects a skew out of range.
func (c ClockSkew) Validate() error {
	switch {
	case c.Offset > MaxClockOffset || c.Offset < -MaxClockOffset:
		return fmt.Errorf("clock offset %v: beyond ±%v", c.Offset, MaxClockOffset)
	case math.IsNaN(c.RatePPM) || c.RatePPM > MaxClockRatePPM || c.RatePPM < -MaxClockRatePPM:
		return fmt.Errorf("clock rate %g ppm: beyond ±%d ppm", c.RatePPM, MaxClockRatePPM)
	}
	return nil
}

func (c ClockSkew) String() string {
	s := "offset " + c.Offset.String()
	if c.Offset > 0 {
		s = "offset +" + c.Offset.String() // %+v does not sign a Duration
	}
	if c.RatePPM != 0 {
		s += fmt.Sprintf(" rate %+g ppm", c.RatePPM)
	}
	return s
}

// Impairment degrades the traffic a node sends. Percentages are 0-100.
// In JSON (the control API, fault records) durations are nanoseconds.
type Impairment struct {
	Delay  time.Duration `json:"delay_ns,omitempty"`  // added to every packet
	Jitter time.Duration `json:"jitter_ns,omitempty"` // uniform ± around Delay; packets may overtake each other, as with netem

	Loss      float64 `json:"loss,omitempty"`      // percent of packets dropped
	Duplicate float64 `json:"duplicate,omitempty"` // percent of packets sent twice
	Reorder   float64 `json:"reorder,omitempty"`   // percent of packets sent at once, overtaking delayed ones (needs Delay)
}

// IsZero reports whether imp leaves traffic untouched.
func (imp Impairment) IsZero() bool { return imp == Impairment{} }

// Validate rejects impairments no backend can apply.
func (imp Impairment) Validate() error {
	switch {
	case imp.Delay < 0 || imp.Jitter < 0:
		return fmt.Errorf("impairment %v: negative delay or jitter", imp)
	case !percentage(imp.Loss) || !percentage(imp.Duplicate) || !percentage(imp.Reorder):
		return fmt.Errorf("impairment %v: percentages must be within 0-100", imp)
	case imp.Reorder > 0 && imp.Delay == 0:
		return fmt.Errorf("impairment %v: reordering needs a delay to overtake", imp)
	case imp.Delay+imp.Jitter > time.Duration(math.MaxUint32)*time.Microsecond:
		return fmt.Errorf("impairment %v: delay too long", imp)
	}
	return nil
}

func percentage(p float64) bool { return p >= 0 && p <= 100 }

func (imp Impairment) String() string {
	if imp.IsZero() {
		return "none"
	}
	var parts []string
	if imp.Delay > 0 || imp.Jitter > 0 {
		s := "delay " + imp.Delay.String()
		if imp.Jitter > 0 {
			s += "±" + imp.Jitter.String()
		}
		parts = append(parts, s)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", imp.Loss}, {"duplicate", imp.Duplicate}, {"reorder", imp.Reorder}} {
		if p.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %g%%", p.name, p.v))
		}
	}
	return strings.Join(parts, " ")
}
