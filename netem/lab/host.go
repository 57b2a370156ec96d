//go:build linux

package lab

import (
	"bufio"
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
	"golang.org/x/sys/unix"
)

// A shared host is a process that runs nodes of a lab whose topology says
// `hosting: shared`, each node's sockets created in its own namespace. A
// node process costs about 25 ms of CPU to start and a process wake-up per
// frame it receives; at 1000 nodes on 2 cores that was most of a minute
// before a leader. One host process has one limit on open files, which
// every node it runs shares: after partition-minority's cut, the 501 nodes
// of star1000's majority all elect at once, each connected to the other
// 500, which needs some 260,000 files where this kind of machine allows a
// process 20,000 and no raise. So a lab may spread the nodes over several
// host processes (BootOptions.HostProcesses), round-robin by topology
// index (HostProcessOf). The lab drives each host with JSON lines on its
// standard input (hostRequest) and reads hostReply lines from its standard
// output; a host's standard error is its log.

// Host operations.
const (
	hostStart  = "start"  // start a node (hostRequest.Start)
	hostKill   = "kill"   // as SIGKILL to a node process
	hostPause  = "pause"  // as SIGSTOP
	hostResume = "resume" // as SIGCONT
	// hostRelease lets a node started held elect (node.Node.Release).
	hostRelease = "release"
)

// hostRequest is one request to the host.
type hostRequest struct {
	ID    uint64      `json:"id"`
	Op    string      `json:"op"`
	Node  string      `json:"node"`
	Start *hostedSpec `json:"start,omitempty"`
}

// hostedSpec is what `bullylab node` takes as flags, for a node the host
// runs.
type hostedSpec struct {
	Namespace        string        `json:"namespace"`
	ID               uuid.UUID     `json:"id"`
	Listen           string        `json:"listen"`
	Peers            string        `json:"peers"` // file, parsed once for all nodes
	DataDir          string        `json:"data_dir"`
	KeyFile          string        `json:"key_file"`
	MemberKeyFile    string        `json:"member_key_file,omitempty"` // "" for none
	Log              string        `json:"log"`                       // the node's JSON event log, appended to
	Join             bool          `json:"join,omitempty"`
	HoldBoot         bool          `json:"hold_boot,omitempty"`
	Heartbeat        time.Duration `json:"heartbeat"`
	FailureTimeout   time.Duration `json:"failure_timeout"`
	ElectionTimeout  time.Duration `json:"election_timeout"`
	DetectionStagger time.Duration `json:"detection_stagger"`
	Algorithm        string        `json:"algorithm"`
	// Clock is the node's clock skew at its start (--clock-offset,
	// --clock-rate).
	Clock fault.ClockSkew `json:"clock,omitzero"`
	// HostedNodes is how many nodes the host process runs, which share
	// its open files (DialSlots); 0 counts every member.
	HostedNodes int `json:"hosted_nodes,omitempty"`
	// MaxMembers bounds the node's members (node.ServeOptions.MaxMembers);
	// 0 is the node's default.
	MaxMembers int `json:"max_members,omitempty"`
}

// hostReply answers the request with its ID, or (ID 0, Exited) reports a
// node that stopped: killed, left, or failed.
type hostReply struct {
	ID     uint64 `json:"id,omitempty"`
	Node   string `json:"node,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	Err    string `json:"error,omitempty"`
}

// RunHost runs a shared host: it reads hostRequests from in and writes
// hostReplies to out until in ends (the lab closed it, or died), then kills
// every node it runs.
func RunHost(in io.Reader, out io.Writer) error {
	files, err := raiseFileLimit()
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	h := &hostServer{
		files: files,
		out:   json.NewEncoder(out),
		nodes: make(map[string]*node.Running),
		peers: make(map[string]node.Peers),
		keys:  make(map[string]wire.Key),
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var wg sync.WaitGroup
	for sc.Scan() {
		var req hostRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			h.killAll()
			return fmt.Errorf("host: request %.80q: %v", sc.Bytes(), err)
		}
		wg.Go(func() { h.reply(hostReply{ID: req.ID, Node: req.Node, Err: errText(h.handle(req, &wg))}) })
	}
	h.killAll()
	wg.Wait()
	return sc.Err()
}

type hostServer struct {
	outMu sync.Mutex
	out   *json.Encoder

	// files is the host's limit on open files, which every node's
	// sockets share.
	files uint64

	mu    sync.Mutex
	nodes map[string]*node.Running // running, by node name
	peers map[string]node.Peers    // parsed peers files, by path
	keys  map[string]wire.Key      // cluster keys, by file
}

func (h *hostServer) reply(r hostReply) {
	h.outMu.Lock()
	defer h.outMu.Unlock()
	h.out.Encode(r) // a lab that stopped reading is gone; stdin's end follows
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (h *hostServer) handle(req hostRequest, wg *sync.WaitGroup) error {
	if req.Op == hostStart {
		if req.Start == nil {
			return fmt.Errorf("node %s: start without a spec", req.Node)
		}
		return h.start(req.Node, *req.Start, wg)
	}
	h.mu.Lock()
	r := h.nodes[req.Node]
	h.mu.Unlock()
	if r == nil {
		return fmt.Errorf("node %s is not running", req.Node)
	}
	switch req.Op {
	case hostKill:
		r.Kill()
		return nil
	case hostPause:
		return r.Pause()
	case hostResume:
		return r.Resume()
	case hostRelease:
		// Bounded: a paused node's event loop takes no request.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return r.Node().Release(ctx)
	}
	return fmt.Errorf("node %s: unknown operation %q", req.Node, req.Op)
}

// start starts a node and reports its end once it stops.
func (h *hostServer) start(name string, s hostedSpec, wg *sync.WaitGroup) error {
	peers, key, err := h.shared(s)
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	var memberKey ed25519.PrivateKey
	if s.MemberKeyFile != "" {
		if memberKey, err = wire.ReadMemberKeyFile(s.MemberKeyFile); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	socket, release, err := netem.NamespaceSocket(s.Namespace)
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	os.MkdirAll(filepath.Dir(s.Log), 0o755) // OpenFile says what failed
	log, err := os.OpenFile(s.Log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		release()
		return fmt.Errorf("node %s: %w", name, err)
	}
	stagger := s.DetectionStagger
	o := node.ServeOptions{
		ID: s.ID, Listen: s.Listen, Peers: peers.Members, PeersFrom: peers.From, PeersSource: s.Peers, DataDir: s.DataDir,
		Join: s.Join, HoldBoot: s.HoldBoot, MaxMembers: s.MaxMembers, ClusterKey: &key, MemberKey: memberKey, PeerKeys: peers.Keys,
		HeartbeatInterval: s.Heartbeat, FailureTimeout: s.FailureTimeout, ElectionTimeout: s.ElectionTimeout,
		DetectionStagger: &stagger, Algorithm: s.Algorithm, Clock: s.Clock,
		Log: log, LogFormat: node.LogJSON,
		TCP: node.TCPConfig{Socket: socket, MaxDialing: DialSlots(h.files, cmp.Or(s.HostedNodes, len(peers.Members)))},
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes[name] != nil {
		log.Close()
		release()
		return fmt.Errorf("node %s is running already", name)
	}
	r, err := node.StartServing(o)
	if err != nil {
		fmt.Fprintf(log, "bullylab: %v\n", err) // where a node process writes why it exited
		log.Close()
		release()
		return fmt.Errorf("node %s: %w", name, err)
	}
	h.nodes[name] = r
	wg.Go(func() {
		err := r.Err()
		if err != nil {
			fmt.Fprintf(log, "bullylab: %v\n", err)
		}
		log.Close()
		release()
		h.mu.Lock()
		delete(h.nodes, name)
		h.mu.Unlock()
		h.reply(hostReply{Node: name, Exited: true, Err: errText(err)})
	})
	return nil
}

// shared returns the peers and key s names, read once for all nodes.
func (h *hostServer) shared(s hostedSpec) (node.Peers, wire.Key, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	peers, ok := h.peers[s.Peers]
	if !ok {
		var err error
		if peers, err = node.ReadPeersFile(s.Peers); err != nil {
			return node.Peers{}, wire.Key{}, err
		}
		h.peers[s.Peers] = peers
	}
	key, ok := h.keys[s.KeyFile]
	if !ok {
		var err error
		if key, err = wire.ReadKeyFile(s.KeyFile); err != nil {
			return node.Peers{}, wire.Key{}, fmt.Errorf("cluster key: %w", err)
		}
		h.keys[s.KeyFile] = key
	}
	return peers, key, nil
}

func (h *hostServer) killAll() {
	h.mu.Lock()
	var rs []*node.Running
	for _, r := range h.nodes {
		rs = append(rs, r)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(r.Kill)
	}
	wg.Wait()
}

// sharedHost is the lab's end of a shared host process.
type sharedHost struct {
	name  string // host, or host-1 ... host-k of k
	nodes int    // how many nodes it runs
	proc  *netem.Process
	log   string
	in    *os.File // the host's standard input

	peakFiles atomic.Int64 // the most open files sampleFiles saw

	mu    sync.Mutex
	enc   *json.Encoder
	next  uint64
	calls map[uint64]chan hostReply
	exits map[string]*hostedProc // the incarnation running, by node
	gone  bool                   // the host's output ended
}

// hostedProc is a node running in the shared host: a nodeProc.
type hostedProc struct {
	host *sharedHost
	done chan struct{}
}

func (p *hostedProc) PID() int              { return p.host.proc.PID() }
func (p *hostedProc) Done() <-chan struct{} { return p.done }

// startSharedHost starts `binary lab-host` in this process's namespace,
// recorded as name, its standard error appended to logPath, to run nodes
// nodes.
func startSharedHost(tb *netem.Testbed, binary string, env []string, name, logPath string, nodes int) (*sharedHost, error) {
	os.MkdirAll(filepath.Dir(logPath), 0o755) // OpenFile says what failed
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab: shared host log: %w", err)
	}
	defer logf.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("lab: shared host: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("lab: shared host: %w", err)
	}
	cmd := exec.Command(binary, "lab-host")
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, logf
	p, err := tb.StartHost(name, cmd, logPath)
	inR.Close() // the child's ends
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("lab: %w", err)
	}
	h := &sharedHost{name: name, nodes: nodes, proc: p, log: logPath, in: inW, enc: json.NewEncoder(inW),
		calls: make(map[uint64]chan hostReply), exits: make(map[string]*hostedProc)}
	go h.read(outR)
	go h.sampleFiles()
	return h, nil
}

// fileSample is how often a host's open files are counted. Counting walks
// the host's descriptor table: at star1000's peak, some 270,000 entries
// over all hosts, tens of milliseconds of CPU a round.
const fileSample = 250 * time.Millisecond

// sampleFiles counts the host's open files every fileSample until it
// exits, keeping the most it saw.
func (h *sharedHost) sampleFiles() {
	tick := time.NewTicker(fileSample)
	defer tick.Stop()
	dir := fmt.Sprintf("/proc/%d/fd", h.proc.PID())
	for {
		if n, err := countFiles(dir); err == nil && int64(n) > h.peakFiles.Load() {
			h.peakFiles.Store(int64(n))
		}
		select {
		case <-h.proc.Done():
			return
		case <-tick.C:
		}
	}
}

// countFiles counts the entries of dir.
func countFiles(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(4096)
		n += len(names)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// MaxHostProcesses bounds BootOptions.HostProcesses. Each host process
// costs a Go runtime (some 10-20 MB, its own threads and collector) on
// top of its nodes; 64 of them carry 1000 nodes with 300 files each.
const MaxHostProcesses = 64

// HostProcessOf is the host process, from 0, that runs the node at index
// (its place in the topology's nodes, from 0) in a lab of hosts shared
// host processes:
// round-robin. Partition groups are ranges of IDs (the highest, the
// lowest), and a group cut off from its leader elects all-to-all: dealt
// round-robin, its members, and so its connections, spread evenly over
// every host; in contiguous ranges they would fill the first hosts alone,
// each at about twice the files.
func HostProcessOf(index, hosts int) int {
	if hosts <= 1 {
		return 0
	}
	return index % hosts
}

// HostFiles is what one shared host process of a lab held open.
type HostFiles struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Nodes is how many nodes it runs.
	Nodes int `json:"nodes"`
	// PeakFiles is the most open files it had, counted every fileSample
	// from its start.
	PeakFiles int `json:"peak_files"`
}

// HostFiles returns, per shared host process in order (none when every
// node runs as its own process), the most files it held open so far.
func (l *Lab) HostFiles() []HostFiles {
	out := make([]HostFiles, 0, len(l.procs.hosts))
	for _, h := range l.procs.hosts {
		out = append(out, HostFiles{Name: h.name, PID: h.proc.PID(), Nodes: h.nodes, PeakFiles: int(h.peakFiles.Load())})
	}
	return out
}

// startHosts starts opts.HostProcesses shared hosts (one when 0), named
// host-1 ... host-k and logging to host-1.log ..., or host and host.log
// when there is one.
func (ps *nodeProcs) startHosts() error {
	k := max(ps.opts.HostProcesses, 1)
	nodes := make([]int, k)
	for _, n := range ps.nodes {
		nodes[HostProcessOf(n.index-1, k)]++
	}
	for i := range k {
		name := "host"
		if k > 1 {
			name = fmt.Sprintf("host-%d", i+1)
		}
		log := netem.LogPath(ps.run, name)
		if ps.opts.LogDir != "" {
			log = filepath.Join(ps.opts.LogDir, name+".log")
		}
		h, err := startSharedHost(ps.tb, ps.opts.Binary, ps.opts.hostEnv, name, log, nodes[i])
		if err != nil {
			return err
		}
		ps.hosts = append(ps.hosts, h)
	}
	return nil
}

// hostOf returns the shared host that runs n.
func (ps *nodeProcs) hostOf(n *labNode) *sharedHost {
	return ps.hosts[HostProcessOf(n.index-1, len(ps.hosts))]
}

// read delivers the host's replies until its output ends; then every call
// waiting fails and every node counts as exited.
func (h *sharedHost) read(out *os.File) {
	defer out.Close()
	dec := json.NewDecoder(bufio.NewReader(out))
	for {
		var r hostReply
		if err := dec.Decode(&r); err != nil {
			break
		}
		h.mu.Lock()
		switch {
		case r.ID != 0:
			if c := h.calls[r.ID]; c != nil {
				delete(h.calls, r.ID)
				c <- r
			}
		case r.Exited:
			if p := h.exits[r.Node]; p != nil {
				delete(h.exits, r.Node)
				close(p.done)
			}
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.gone = true
	for id, c := range h.calls {
		delete(h.calls, id)
		close(c)
	}
	for name, p := range h.exits {
		delete(h.exits, name)
		close(p.done)
	}
	h.mu.Unlock()
}

// call sends req and waits for its answer.
func (h *sharedHost) call(ctx context.Context, req hostRequest) error {
	c := make(chan hostReply, 1)
	h.mu.Lock()
	if h.gone {
		h.mu.Unlock()
		return h.goneErr()
	}
	h.next++
	req.ID = h.next
	h.calls[req.ID] = c
	err := h.enc.Encode(req)
	if err != nil {
		delete(h.calls, req.ID)
	}
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("shared host %s (process %d): %w", h.name, h.proc.PID(), err)
	}
	select {
	case r, ok := <-c:
		switch {
		case !ok:
			return h.goneErr()
		case r.Err != "":
			return errors.New(r.Err)
		}
		return nil
	case <-ctx.Done():
		h.mu.Lock()
		delete(h.calls, req.ID)
		h.mu.Unlock()
		return ctx.Err()
	}
}

func (h *sharedHost) goneErr() error {
	return fmt.Errorf("shared host %s (process %d) exited: %s", h.name, h.proc.PID(), logTail(h.log, 3))
}

// start starts a node in the host and returns it once it listens.
func (h *sharedHost) start(ctx context.Context, name string, spec hostedSpec) (*hostedProc, error) {
	p := &hostedProc{host: h, done: make(chan struct{})}
	h.mu.Lock()
	if old := h.exits[name]; old != nil {
		h.mu.Unlock()
		return nil, fmt.Errorf("node %s is running already", name)
	}
	h.exits[name] = p
	h.mu.Unlock()
	if err := h.call(ctx, hostRequest{Op: hostStart, Node: name, Start: &spec}); err != nil {
		h.mu.Lock()
		if h.exits[name] == p {
			delete(h.exits, name)
			close(p.done)
		}
		h.mu.Unlock()
		return nil, err
	}
	return p, nil
}

// do asks the host to kill, pause, resume or release a node.
func (h *sharedHost) do(ctx context.Context, op, name string) error {
	return h.call(ctx, hostRequest{Op: op, Node: name})
}

// kill SIGKILLs the host, and with it every node it runs: what Close does
// to node processes.
func (h *sharedHost) kill() error {
	err := h.proc.Kill()
	h.in.Close()
	return err
}

// hostedSpec is what n's argv says, for the shared host that runs it,
// with the clock skew it starts with.
func (ps *nodeProcs) hostedSpec(n *labNode, join bool, clock fault.ClockSkew) hostedSpec {
	tn, _ := ps.topo.Node(n.name)
	var memberKeyFile string
	if n.memberKey != nil {
		memberKeyFile = n.keyFile
	}
	hosted := 0
	if len(ps.hosts) > 1 {
		hosted = ps.hostOf(n).nodes
	}
	return hostedSpec{
		Namespace: n.ns, ID: n.id, Listen: n.listen, Peers: ps.peers, DataDir: n.dataDir, KeyFile: ps.keyFile,
		MemberKeyFile: memberKeyFile,
		Log:           n.log, Join: join,
		Heartbeat: tn.Settings.Heartbeat, FailureTimeout: tn.Settings.FailureTimeout,
		ElectionTimeout: tn.Settings.ElectionTimeout, DetectionStagger: tn.Settings.DetectionStagger,
		Algorithm: nodeAlgorithm(ps.topo), Clock: clock, HostedNodes: hosted,
		MaxMembers: memberLimit(len(ps.all)),
	}
}

// memberLimit is the MaxMembers of a node of a topology of n nodes: the
// node's default, 1024, where the n fit under it, as a host's MaxNodes
// do; past it, in a span of thousands whose every node's peers file lists
// them all, twice n, room for as many joins again. A node refuses to start
// with its peers at the limit.
func memberLimit(n int) int {
	if n < election.DefaultMaxMembers {
		return 0
	}
	return 2 * n
}

// hostAll asks the shared hosts that run nodes to do op to each of them
// at once, and returns the hosts' PIDs.
func (ps *nodeProcs) hostAll(op string, nodes []*labNode) ([]string, error) {
	errs := make([]error, len(nodes))
	parallel(len(nodes), len(nodes), func(i int) bool {
		errs[i] = ps.hostOf(nodes[i]).do(ps.ctx, op, nodes[i].name)
		return true
	})
	return ps.hostPIDs(nodes), errors.Join(errs...)
}

// hostPIDs are the PIDs of the shared hosts that run nodes, in host order.
func (ps *nodeProcs) hostPIDs(nodes []*labNode) []string {
	var pids []string
	for _, h := range ps.hosts {
		for _, n := range nodes {
			if ps.hostOf(n) == h {
				pids = append(pids, strconv.Itoa(h.proc.PID()))
				break
			}
		}
	}
	return pids
}

// hostProcessesText is "shared host process P" or "shared host processes
// P, Q" for pids.
func hostProcessesText(pids []string) string {
	if len(pids) == 1 {
		return "shared host process " + pids[0]
	}
	return "shared host processes " + strings.Join(pids, ", ")
}

// hostSignal pauses or resumes nodes in their shared hosts, their event
// loops parked or run again as SIGSTOP and SIGCONT would their processes,
// and says how.
func (ps *nodeProcs) hostSignal(nodes []*labNode, pause bool) (string, error) {
	op, how := hostResume, "event loop resumed, as SIGCONT would its process,"
	if pause {
		op, how = hostPause, "event loop parked, as SIGSTOP would its process,"
	}
	pids, err := ps.hostAll(op, nodes)
	if err != nil {
		return "", err
	}
	ps.mu.Lock()
	for _, n := range nodes {
		n.run.paused = pause
	}
	ps.mu.Unlock()
	return fmt.Sprintf("%s in %s", how, hostProcessesText(pids)), nil
}

// hostFailure is why n, run by a shared host, stopped when that host
// exited: the host's name and last words; "" otherwise.
func (ps *nodeProcs) hostFailure(n *labNode) string {
	ps.mu.Lock()
	p, ok := n.run.proc.(*hostedProc)
	ps.mu.Unlock()
	if !ok {
		return ""
	}
	p.host.mu.Lock()
	gone := p.host.gone
	p.host.mu.Unlock()
	if !gone {
		return ""
	}
	return p.host.goneErr().Error()
}

// DialSlots is the connection attempts each of hosted nodes may have in
// flight (node.TCPConfig.MaxDialing) in a host process allowed files open
// files: an eighth of them shared by the nodes it runs (every member of
// the cluster, with one host process). The rest hold what the nodes need at rest (about ten
// files a node at 1000: both ends of its connections, its listeners, log,
// lock and namespace) and their state saves. Behind a partition of 1000
// nodes, 501 of them each dial 498 unreachable peers within 400 ms: without the
// bound, 501 x 498 sockets would wait on SYNs that go unanswered.
func DialSlots(files uint64, hosted int) int {
	return int(min(max(files/8/uint64(max(hosted, 1)), 2), node.DefaultMaxDialing))
}

// raiseFileLimit lifts the host's limit on open files to the most the
// kernel allows (fs.nr_open), and returns the limit it got. A node
// process had the limit to itself; the host holds every node's sockets
// and files. After the leader of 1000 nodes crashed, the election's
// connections used up a limit of 20,000 in seconds, and nodes that could
// not save their state stopped.
func raiseFileLimit() (uint64, error) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("open files limit: %w", err)
	}
	want := lim.Max
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > want {
			want = n
		}
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: want, Max: want}); err != nil {
		// Not privileged to raise the hard limit: take what it allows.
		want = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: want, Max: want}); err != nil {
			return 0, fmt.Errorf("open files limit: %w", err)
		}
	}
	return want, nil
}
