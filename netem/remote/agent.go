package remote

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/topologies/fault"
)

// The agent protocol: the controller writes one JSON agentRequest a line
// to `bullylab agent`'s standard input over SSH, and the agent answers each
// with one agentReply a line on its standard output, in order. The agent
// exits when its input ends: a lost SSH connection ends it too.
type agentRequest struct {
	Op    string        `json:"op"`
	Build *ShareRequest `json:"build,omitempty"`
	Fault *fault.Fault  `json:"fault,omitempty"`
}

const (
	opHello   = "hello"   // who the agent is
	opClock   = "clock"   // the agent's clock, read on arrival
	opProbe   = "probe"   // whether the host can run a testbed
	opBuild   = "build"   // build this host's share of a testbed, its nodes held
	opStart   = "start"   // start the share's nodes
	opLead    = "lead"    // boot the span's highest node, held by start
	opSettle  = "settle"  // release the share's held nodes once they follow it
	opDown    = "down"    // tear it down
	opStatus  = "status"  // the share's nodes
	opFault   = "fault"   // apply a fault to the share
	opCapture = "capture" // stop the share's capture
	opNetwork = "network" // the impairments in force
	opLogs    = "logs"    // the share's nodes' event logs
)

// ShareRequest asks an agent to build its host's share of a testbed.
type ShareRequest struct {
	// Run names the share's objects on this host.
	Run string `json:"run"`
	// Topology is the whole topology file, Source its name.
	Topology []byte `json:"topology"`
	Source   string `json:"source"`
	// Algorithm is the election the nodes run, over the topology's
	// (a controller's --algorithm); "" keeps the topology's.
	Algorithm string `json:"algorithm,omitempty"`
	// Host is the hosts entry this agent's host is.
	Host string `json:"host"`
	// VNI is the testbed's overlay identifier, Port its UDP port.
	VNI  uint32 `json:"vni"`
	Port int    `json:"port,omitempty"`
	// Switches are every host's switch on the overlay, in the order of
	// the topology's hosts.
	Switches []OverlaySwitch `json:"switches"`
	// Cluster is what every host's nodes share.
	Cluster SpanCluster `json:"cluster"`
	// MemberKeys are the member keys of this host's nodes, by topology
	// index (wire.EncodeMemberKey): each host gets its own nodes' alone.
	MemberKeys map[int]string `json:"member_keys,omitempty"`
	// Backend forces an impairment backend; "" takes what the host has.
	Backend string `json:"backend,omitempty"`
	// Capture has the share capture its switch from before its nodes
	// start until the capture op; the file is in the reply.
	Capture bool `json:"capture,omitempty"`
}

// SpanCluster is what every host's nodes share: their IDs and the
// cluster key. Each node runs as a `bullylab node` process of the agent's
// own binary, or in its shared host, as the topology says.
type SpanCluster struct {
	// IDs are every node's ID, in topology order, ascending (node.NewIDs).
	IDs []string `json:"ids"`
	// Key is the cluster key, as its file holds it (wire.Key.Encode).
	Key string `json:"key"`
	// PublicKeys are every node's member key, in topology order
	// (wire.EncodePublicKey), for the peers file; none when the nodes run
	// without member keys.
	PublicKeys []string `json:"public_keys,omitempty"`
}

// ShareBuilt is what an agent says of the share it built.
type ShareBuilt struct {
	// Capture is the path of the share's capture on the host, when asked
	// for: the controller fetches it after the capture op, before down
	// removes it. CaptureStarted is when it started, on the host's clock.
	Capture        string    `json:"capture,omitempty"`
	CaptureStarted time.Time `json:"capture_started,omitzero"`
	// Ready is when all the share's nodes answered, on the host's clock;
	// zero until the start op.
	Ready time.Time `json:"ready,omitzero"`
}

// ShareStatus is a share's nodes as its lab sees them.
type ShareStatus struct {
	// Nodes are lab.NodeState's JSON, which the controller decodes (the
	// lab builds on Linux alone).
	Nodes json.RawMessage `json:"nodes"`
	// Failed are the nodes that stopped with no fault stopping them.
	Failed []ShareFailure `json:"failed,omitempty"`
	// Delayers are the NFQUEUE delayers' counters by node
	// (netem.DelayerStats's JSON).
	Delayers json.RawMessage `json:"delayers,omitempty"`
	// Files are the share's shared host processes and the most files
	// each held open (lab.HostFiles's JSON); none with a process per node.
	Files json.RawMessage `json:"files,omitempty"`
}

// ShareFailure is a node that stopped by itself, and its last words.
type ShareFailure struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// ShareNetwork is what the impairments in force do between any two nodes
// of the testbed: every host's lab knows them all.
type ShareNetwork struct {
	MaxDelay time.Duration `json:"max_delay"`
	Lossy    bool          `json:"lossy,omitempty"`
}

// OverlaySwitch is one host's switch on a testbed's overlay.
type OverlaySwitch struct {
	Underlay string `json:"underlay"` // the host's address on the hosts' network
	Addr     string `json:"addr"`     // the switch's overlay address
	MAC      string `json:"mac"`      // the switch's overlay device's MAC
}

// Shares is what builds and tears down this host's share of testbeds for
// the agent: a netem lab's on Linux.
type Shares interface {
	// Build builds the share and starts its capture, if asked for, but
	// not its nodes: the controller starts every host's nodes once every
	// host's share is built, so that each capture holds the boot.
	Build(ShareRequest) (ShareBuilt, error)
	// Start starts the share's nodes and returns once they answer. In a
	// shared topology every node starts held (lab.Share.SpanBoot): the
	// controller then has the host of the topology's highest node Lead,
	// and every host Settle.
	Start() (ShareBuilt, error)
	// Lead boots the topology's highest node, run by this host, and
	// returns once it has won its boot election (lab.Lab.Lead).
	Lead() error
	// Settle returns once the share's nodes follow the highest, held
	// nodes its election missed released (lab.Lab.Settle).
	Settle() (ShareBuilt, error)
	// Status reads the share's nodes.
	Status() (ShareStatus, error)
	// Network says what the impairments in force do.
	Network() (ShareNetwork, error)
	// Logs reads the share's nodes' event logs, by node.
	Logs() (map[string][]byte, error)
	// Apply applies a fault to the share (lab.Faults.Apply) and returns its
	// record, stamped with this host's clock.
	Apply(fault.Fault) (fault.Fault, error)
	// StopCapture ends the share's capture, flushed to its file.
	StopCapture() (capture.CaptureStats, error)
	// Down tears the share down; also when the agent's input ends.
	Down() error
}

// AgentConfig is what RunAgent serves with.
type AgentConfig struct {
	// Version is the binary's, which the controller checks against its
	// own.
	Version string
	Probe   ProbeFunc
	Shares  Shares
}

type agentReply struct {
	Error string `json:"error,omitempty"`
	// hello
	Version  string `json:"version,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Kernel   string `json:"kernel,omitempty"`
	// clock: the agent's wall clock, Unix ns
	Wall int64 `json:"wall,omitempty"`
	// probe: why the host cannot run a testbed, "" when it can
	Unfit string `json:"unfit,omitempty"`
	// probe: the impairment backend faults would use there
	Backend string `json:"backend,omitempty"`
	// build
	Built   *ShareBuilt       `json:"built,omitempty"`
	Status  *ShareStatus      `json:"status,omitempty"`
	Network *ShareNetwork     `json:"network,omitempty"`
	Logs    map[string][]byte `json:"logs,omitempty"`
	// fault: its record
	Fault *fault.Fault `json:"fault,omitempty"`
	// capture
	Stats *capture.CaptureStats `json:"stats,omitempty"`
}

// ProbeFunc says why this host cannot run a testbed, or the impairment
// backend its faults would use.
type ProbeFunc func() (backend string, err error)

// maxAgentLine bounds one line of the protocol.
const maxAgentLine = 16 << 20

// RunAgent serves the agent protocol on in and out until in ends, then
// tears down what it built: a controller that is gone, or whose SSH
// connection broke, leaves nothing running here.
func RunAgent(in io.Reader, out io.Writer, cfg AgentConfig) (err error) {
	defer func() {
		if cfg.Shares != nil {
			err = errors.Join(err, cfg.Shares.Down())
		}
	}()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 4096), maxAgentLine)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var req agentRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("agent: request %.80q: %v", sc.Bytes(), err)
		}
		if err := enc.Encode(answer(req, cfg)); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	return sc.Err()
}

func answer(req agentRequest, cfg AgentConfig) agentReply {
	version := cfg.Version
	switch req.Op {
	case opBuild, opStart, opLead, opSettle, opDown, opStatus, opFault, opCapture, opNetwork, opLogs:
		if cfg.Shares == nil {
			return agentReply{Error: "this agent builds no testbeds (not Linux)"}
		}
		return answerShares(req, cfg.Shares)
	case opProbe:
		if cfg.Probe == nil {
			return agentReply{Unfit: "this agent cannot probe its host (not Linux)"}
		}
		backend, err := cfg.Probe()
		if err != nil {
			return agentReply{Unfit: err.Error()}
		}
		return agentReply{Backend: backend}
	case opClock:
		return agentReply{Wall: time.Now().UnixNano()}
	case opHello:
		host, _ := os.Hostname()
		var uts unix.Utsname
		unix.Uname(&uts)
		return agentReply{Version: version, Hostname: host, Kernel: unix.ByteSliceToString(uts.Release[:])}
	}
	return agentReply{Error: fmt.Sprintf("unknown operation %q", req.Op)}
}

// answerShares answers the requests on the host's share.
func answerShares(req agentRequest, shares Shares) agentReply {
	var r agentReply
	var err error
	switch req.Op {
	case opDown:
		err = shares.Down()
	case opStatus:
		var st ShareStatus
		st, err = shares.Status()
		r.Status = &st
	case opNetwork:
		var nw ShareNetwork
		nw, err = shares.Network()
		r.Network = &nw
	case opLogs:
		r.Logs, err = shares.Logs()
	case opCapture:
		var st capture.CaptureStats
		st, err = shares.StopCapture()
		r.Stats = &st
	case opFault:
		if req.Fault == nil {
			return agentReply{Error: "fault without a fault"}
		}
		var f fault.Fault
		f, err = shares.Apply(*req.Fault)
		r.Fault = &f
	case opBuild:
		if req.Build == nil {
			return agentReply{Error: "build without a request"}
		}
		var b ShareBuilt
		b, err = shares.Build(*req.Build)
		r.Built = &b
	case opStart:
		var b ShareBuilt
		b, err = shares.Start()
		r.Built = &b
	case opLead:
		err = shares.Lead()
	case opSettle:
		var b ShareBuilt
		b, err = shares.Settle()
		r.Built = &b
	}
	if err != nil {
		// One line: the protocol's, and what the controller reports.
		return agentReply{Error: strings.ReplaceAll(err.Error(), "\n", "; ")}
	}
	return r
}

// Agent is `bullylab agent` running on a host, driven over its SSH
// connection.
type Agent struct {
	name   string
	cancel context.CancelFunc
	done   chan error

	mu  sync.Mutex // one request in flight
	in  io.WriteCloser
	out *bufio.Scanner
}

// AgentInfo is what an agent says of itself.
type AgentInfo struct {
	Version, Hostname, Kernel string
}

// StartAgent runs `binary agent` on the host, binary being the path of a
// bullylab binary there (see EnsureFile).
func (c *Client) StartAgent(ctx context.Context, binary string) (*Agent, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	a := &Agent{name: c.host.Name, cancel: cancel, done: make(chan error, 1), in: inW}
	a.out = bufio.NewScanner(outR)
	a.out.Buffer(make([]byte, 4096), maxAgentLine)
	go func() {
		err := c.Run(ctx, shellQuote(binary)+" agent", inR, outW)
		outW.CloseWithError(fmt.Errorf("agent on host %s ended: %v", c.host.Name, err))
		inR.Close()
		a.done <- err
	}()
	return a, nil
}

// call sends req and reads its reply.
func (a *Agent) call(req agentRequest) (agentReply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	line, _ := json.Marshal(req)
	if _, err := a.in.Write(append(line, '\n')); err != nil {
		return agentReply{}, fmt.Errorf("host %s: agent: %w", a.name, err)
	}
	if !a.out.Scan() {
		err := a.out.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return agentReply{}, fmt.Errorf("host %s: agent: %w", a.name, err)
	}
	var r agentReply
	if err := json.Unmarshal(a.out.Bytes(), &r); err != nil {
		return agentReply{}, fmt.Errorf("host %s: agent reply %.80q: %v", a.name, a.out.Bytes(), err)
	}
	if r.Error != "" {
		return r, fmt.Errorf("host %s: agent: %s", a.name, r.Error)
	}
	return r, nil
}

// Hello asks the agent who it is.
func (a *Agent) Hello() (AgentInfo, error) {
	r, err := a.call(agentRequest{Op: opHello})
	return AgentInfo{Version: r.Version, Hostname: r.Hostname, Kernel: r.Kernel}, err
}

// Build asks the agent to build its host's share of a testbed.
func (a *Agent) Build(req ShareRequest) (ShareBuilt, error) {
	r, err := a.call(agentRequest{Op: opBuild, Build: &req})
	if err != nil || r.Built == nil {
		return ShareBuilt{}, cmp.Or(err, fmt.Errorf("host %s: agent: build answered without the share", a.name))
	}
	return *r.Built, nil
}

// Start asks the agent to start its share's nodes.
func (a *Agent) Start() (ShareBuilt, error) {
	r, err := a.call(agentRequest{Op: opStart})
	if err != nil || r.Built == nil {
		return ShareBuilt{}, cmp.Or(err, fmt.Errorf("host %s: agent: start answered without the share", a.name))
	}
	return *r.Built, nil
}

// Lead asks the agent to boot the topology's highest node, which its host
// runs.
func (a *Agent) Lead() error {
	_, err := a.call(agentRequest{Op: opLead})
	return err
}

// Settle asks the agent to release its share's held nodes once they
// follow the highest.
func (a *Agent) Settle() (ShareBuilt, error) {
	r, err := a.call(agentRequest{Op: opSettle})
	if err != nil || r.Built == nil {
		return ShareBuilt{}, cmp.Or(err, fmt.Errorf("host %s: agent: settle answered without the share", a.name))
	}
	return *r.Built, nil
}

// Status asks the agent for its share's nodes.
func (a *Agent) Status() (ShareStatus, error) {
	r, err := a.call(agentRequest{Op: opStatus})
	if err != nil || r.Status == nil {
		return ShareStatus{}, cmp.Or(err, fmt.Errorf("host %s: agent: status answered without the nodes", a.name))
	}
	return *r.Status, nil
}

// Network asks the agent what the impairments in force do.
func (a *Agent) Network() (ShareNetwork, error) {
	r, err := a.call(agentRequest{Op: opNetwork})
	if err != nil || r.Network == nil {
		return ShareNetwork{}, cmp.Or(err, fmt.Errorf("host %s: agent: network answered without the impairments", a.name))
	}
	return *r.Network, nil
}

// Logs asks the agent for its nodes' event logs.
func (a *Agent) Logs() (map[string][]byte, error) {
	r, err := a.call(agentRequest{Op: opLogs})
	return r.Logs, err
}

// Apply asks the agent to apply f to its share, and returns its record.
func (a *Agent) Apply(f fault.Fault) (fault.Fault, error) {
	r, err := a.call(agentRequest{Op: opFault, Fault: &f})
	if err != nil || r.Fault == nil {
		return fault.Fault{}, cmp.Or(err, fmt.Errorf("host %s: agent: fault answered without its record", a.name))
	}
	return *r.Fault, nil
}

// StopCapture asks the agent to end its share's capture.
func (a *Agent) StopCapture() (capture.CaptureStats, error) {
	r, err := a.call(agentRequest{Op: opCapture})
	if err != nil || r.Stats == nil {
		return capture.CaptureStats{}, cmp.Or(err, fmt.Errorf("host %s: agent: capture answered without its counts", a.name))
	}
	return *r.Stats, nil
}

// Down asks the agent to tear its share down.
func (a *Agent) Down() error {
	_, err := a.call(agentRequest{Op: opDown})
	return err
}

// Probe asks the agent whether its host can run a testbed: unfit is ""
// when it can, else why not; backend is the impairment backend its faults
// would use.
func (a *Agent) Probe() (unfit, backend string, err error) {
	r, err := a.call(agentRequest{Op: opProbe})
	return r.Unfit, r.Backend, err
}

// ClockOffset is how far a host's clock is ahead of the controller's,
// within Bound: the true offset lies in [Offset-Bound, Offset+Bound].
type ClockOffset struct {
	Offset, Bound time.Duration
	// Samples is how many round trips were taken, the tightest kept.
	Samples int
}

func (o ClockOffset) String() string {
	return fmt.Sprintf("%+v ± %v", o.Offset, o.Bound)
}

// ClockOffset measures the host's clock against this one over n round
// trips of the control channel, as NTP does: the agent read its clock
// between the request's departure and the reply's arrival, so the offset
// is its reading less the midpoint, within half the round trip. The
// round trip with the tightest bound is kept.
func (a *Agent) ClockOffset(n int) (ClockOffset, error) {
	if n < 1 {
		return ClockOffset{}, errors.New("no samples asked for")
	}
	best := ClockOffset{Bound: -1}
	for range n {
		sent := time.Now()
		r, err := a.call(agentRequest{Op: opClock})
		if err != nil {
			return ClockOffset{}, err
		}
		rtt := time.Since(sent) // monotonic
		mid := sent.Add(rtt / 2)
		o := ClockOffset{Offset: time.Unix(0, r.Wall).Sub(mid), Bound: (rtt + 1) / 2}
		if best.Bound < 0 || o.Bound < best.Bound {
			best = o
		}
	}
	best.Samples = n
	return best, nil
}

// Close ends the agent: its input closes, and it exits.
func (a *Agent) Close() error {
	a.in.Close()
	select {
	case err := <-a.done:
		if err != nil && !strings.Contains(err.Error(), "context canceled") {
			return err
		}
		return nil
	case <-time.After(killWait):
		a.cancel()
		<-a.done
		return fmt.Errorf("host %s: agent did not exit %v after its input closed", a.name, killWait)
	}
}
