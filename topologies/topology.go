package topologies

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/bullylab/bullylab/wire/suggest"
)

//go:embed *.yaml
var builtin embed.FS

// Limits of a topology. The routed switch has no port limit (netem's doc
// has the design): MaxNodes is what a testbed was measured to hold on a
// 2-core host, about 330 KiB of kernel slab and 3-4 ms of build per node,
// as namespaces alone, before the node processes.
const (
	MaxNodes = 1000
	// MaxSpanNodes bounds a topology that spans hosts (a hosts section),
	// each host building MaxNodes at most: every node knows every other,
	// and the highest one's boot election reaches them all, so what
	// bounds it is one node's members, not a host's testbed. 5000 over 5
	// hosts is what was measured (netem/remote's BenchmarkSpan).
	MaxSpanNodes = 5 * MaxNodes
	// DefaultPort is the election port when a topology names none.
	DefaultPort = wire.DefaultPort
	// ReservedPort is refused: Wireshark's built-in Gryphon dissector claims
	// it, which garbles every capture of the election.
	ReservedPort = 7000
	// MaxFileSize bounds a topology file; a 1000-node list with per-node
	// overrides is ~100 KiB.
	MaxFileSize = 8 << 20
)

// Floors of the election timings a topology may set. Below them a
// testbed measures the host rather than the election: a node process on a
// loaded 2-core host can wait tens of milliseconds for a core, a heartbeat
// goes to every member, and an election round opens TCP connections.
const (
	MinHeartbeat       = 10 * time.Millisecond
	MinFailureTimeout  = 50 * time.Millisecond // five heartbeats at the floor
	MinElectionTimeout = 20 * time.Millisecond
	// MinDetectionStagger is the floor of a stagger that is not 0 (off):
	// a shorter step is lost in timer slack.
	MinDetectionStagger = time.Millisecond
)

// DefaultSubnet is used when a topology names none.
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/16")

// DefaultSettings are the election timings when a topology names none.
var DefaultSettings = Settings{
	Heartbeat:       100 * time.Millisecond,
	FailureTimeout:  500 * time.Millisecond,
	ElectionTimeout: 200 * time.Millisecond,
	// election.DefaultConfig's, so that a node started by hand and one started
	// from a topology behave alike.
	DetectionStagger: 50 * time.Millisecond,
}

// Algorithms are the election algorithms a topology may name, as the
// nodes name them; the wire's names, since this package sits below node.
var Algorithms = []string{wire.AlgorithmBully, wire.AlgorithmRing}

// DefaultAlgorithm is the election of a topology that names none.
const DefaultAlgorithm = wire.AlgorithmBully

// Hosting is how a lab runs a topology's nodes.
type Hosting string

const (
	// HostingProcess runs each node as a process of its own, in its
	// namespace: a crash is a SIGKILL and a pause a SIGSTOP of that
	// process. The default.
	HostingProcess Hosting = "process"
	// HostingShared runs the nodes in shared host processes (one, unless
	// the lab is told to spread them over more), each node's sockets in
	// its own namespace; a crash or pause acts on that node
	// alone, as the signal would on its process (a pause parks its event
	// loop). A process per node costs some 25 ms of CPU to start and a
	// process wake-up per frame received: at 1000 nodes on 2 cores, most of
	// a minute before a leader. Shared gives up a PID per node, the
	// kernel's view of each node's CPU, and isolation: a fault of a host
	// process stops every node it runs.
	HostingShared Hosting = "shared"
)

// Topology is a parsed and validated topology file.
type Topology struct {
	Name    string
	Source  string // file name it was parsed from, for messages
	Subnet  netip.Prefix
	Port    int
	Hosting Hosting
	// Algorithm is the election every node runs, one of Algorithms.
	Algorithm string
	Nodes     []Node // in index order: Nodes[i].Index == i+1
	// Groups maps a group name to its members, in file order.
	Groups map[string][]string
	// PairImpairs are the impairments links add between two nodes, one entry
	// per unordered pair with A's index below B's, sorted; they apply both
	// ways, on top of each node's own Impair.
	PairImpairs []PairImpair
	// Hosts are the machines the testbed spans, in file order; none when
	// it runs on the controller's machine alone.
	Hosts []Host

	byName map[string]int
	byPair map[[2]int]int
}

// Node is one election participant.
type Node struct {
	Name     string
	Index    int        // 1-based position in the topology
	Addr     netip.Addr // subnet host Index+1
	Settings Settings
	Impair   Impair // impairment of the node's own link
	// Host names the Hosts entry that runs the node; "" without hosts.
	Host string
}

// Settings are the election timings of a node.
type Settings struct {
	Heartbeat       time.Duration
	FailureTimeout  time.Duration
	ElectionTimeout time.Duration
	// DetectionStagger is election.Config.DetectionStagger; 0 disables it.
	DetectionStagger time.Duration
}

// Impair describes a link impairment; percentages are 0..100.
type Impair struct {
	Delay     time.Duration
	Jitter    time.Duration
	Loss      float64
	Duplicate float64
	Reorder   float64
}

// IsZero reports whether the impairment changes nothing.
func (im Impair) IsZero() bool { return im == Impair{} }

// PairImpair is the impairment between two nodes, applied both ways.
type PairImpair struct {
	A, B   string // node names, A's index below B's
	Impair Impair
}

// Node returns the node called name.
func (t *Topology) Node(name string) (*Node, bool) {
	i, ok := t.byName[name]
	if !ok {
		return nil, false
	}
	return &t.Nodes[i], true
}

// PairImpair returns the impairment links put between nodes a and b, in
// either order.
func (t *Topology) PairImpair(a, b string) (Impair, bool) {
	ia, oka := t.byName[a]
	ib, okb := t.byName[b]
	if !oka || !okb {
		return Impair{}, false
	}
	if ia > ib {
		ia, ib = ib, ia
	}
	i, ok := t.byPair[[2]int{ia, ib}]
	if !ok {
		return Impair{}, false
	}
	return t.PairImpairs[i].Impair, true
}

// Impaired reports whether any link of t has an impairment.
func (t *Topology) Impaired() bool {
	for i := range t.Nodes {
		if !t.Nodes[i].Impair.IsZero() {
			return true
		}
	}
	for _, p := range t.PairImpairs {
		if !p.Impair.IsZero() {
			return true
		}
	}
	return false
}

// Prefix returns the node's address with the subnet's length, as it is
// configured on the node's interface.
func (t *Topology) Prefix(n *Node) netip.Prefix {
	return netip.PrefixFrom(n.Addr, t.Subnet.Bits())
}

// Names lists the built-in topologies, sorted.
func Names() []string {
	entries, err := fs.ReadDir(builtin, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// Load returns the built-in topology called nameOrPath ("star5" or
// "star5.yaml"), or parses the file at that path. A name with a slash is
// always a path; a file in the working directory shadows a built-in only
// when named with its .yaml or .yml suffix.
func Load(nameOrPath string) (*Topology, error) {
	t, _, err := LoadSource(nameOrPath)
	return t, err
}

// LoadSource is Load, returning the file's contents too: what a testbed
// across hosts sends each host's agent to parse. A file is read once, so
// that /dev/stdin works.
func LoadSource(nameOrPath string) (*Topology, []byte, error) {
	hasExt := strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml")
	if !strings.ContainsRune(nameOrPath, '/') {
		local := false
		if hasExt {
			_, err := os.Stat(nameOrPath)
			local = err == nil
		}
		if !local {
			file := strings.TrimSuffix(nameOrPath, ".yaml") + ".yaml"
			if data, err := builtin.ReadFile(file); err == nil {
				t, err := Parse(file, data)
				return t, data, err
			}
		}
	}
	data, err := bounded.ReadFile("topology", nameOrPath, MaxFileSize)
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsRune(nameOrPath, '/') {
		return nil, nil, fmt.Errorf("topology %s: %w (built in: %s)%s",
			bounded.Quote(nameOrPath), ErrNotFound, strings.Join(Names(), ", "),
			suggest.Hint(strings.TrimSuffix(nameOrPath, ".yaml"), Names()))
	}
	if err != nil {
		return nil, nil, err
	}
	t, err := Parse(nameOrPath, data)
	return t, data, err
}

// ErrNotFound is what Load returns for a name that is neither a file nor
// a built-in topology.
var ErrNotFound = errors.New("no such file or built-in topology")

// Star returns a topology of n nodes n1..nN with every default, for tests
// and benchmarks that need a size rather than a file.
func Star(n int) (*Topology, error) {
	name := fmt.Sprintf("star%d", n)
	return Parse(name, fmt.Appendf(nil, "name: %s\nnodes: %d\n", name, n))
}
