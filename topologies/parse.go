package topologies

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bullylab/bullylab/topologies/yamlfile"
	"github.com/bullylab/bullylab/wire/bounded"
)

// Error is a problem in a topology file. Its message is one line:
// "file:line: field: what is wrong".
type Error = yamlfile.Error

// maxPairWork bounds the node pairs all links together may cover. A link
// between two groups costs the product of their sizes, and YAML aliases
// repeat a link for two bytes each, so without a bound a 3 KiB file could
// take minutes. Four links across all 1000 nodes fit.
const maxPairWork = 4_000_000

var (
	topFields      = []string{"name", "nodes", "subnet", "port", "hosting", "algorithm", "impair", "settings", "groups", "links", "hosts"}
	nodeFields     = []string{"name", "heartbeat", "failure_timeout", "election_timeout", "detection_stagger", "impair"}
	settingsFields = []string{"heartbeat", "failure_timeout", "election_timeout", "detection_stagger"}
	impairFields   = []string{"delay", "jitter", "loss", "duplicate", "reorder"}
	linkFields     = []string{"between", "impair"}
)

// Parse parses and validates a topology; name is the file name used in
// error messages and, when the file has no name field, as the topology name.
func Parse(name string, data []byte) (t *Topology, err error) {
	p := &parser{yamlfile.Parser{File: name}}
	defer p.Recover(&err)
	return p.parse(data)
}

type parser struct{ yamlfile.Parser }

// rawImpair and rawSettings keep which fields a file set, so that node
// values override topology values field by field.
type rawImpair struct {
	delay, jitter            *time.Duration
	loss, duplicate, reorder *float64
}

func (r rawImpair) over(base Impair) Impair {
	if r.delay != nil {
		base.Delay = *r.delay
	}
	if r.jitter != nil {
		base.Jitter = *r.jitter
	}
	if r.loss != nil {
		base.Loss = *r.loss
	}
	if r.duplicate != nil {
		base.Duplicate = *r.duplicate
	}
	if r.reorder != nil {
		base.Reorder = *r.reorder
	}
	return base
}

func (r *rawImpair) merge(o rawImpair) {
	if o.delay != nil {
		r.delay = o.delay
	}
	if o.jitter != nil {
		r.jitter = o.jitter
	}
	if o.loss != nil {
		r.loss = o.loss
	}
	if o.duplicate != nil {
		r.duplicate = o.duplicate
	}
	if o.reorder != nil {
		r.reorder = o.reorder
	}
}

type rawSetting struct {
	val  *time.Duration
	node *yaml.Node
	path string
}

type rawSettings struct {
	heartbeat, failureTimeout, electionTimeout, detectionStagger rawSetting
}

type rawNode struct {
	name     string
	node     *yaml.Node
	path     string
	settings rawSettings
	impair   rawImpair
}

// rawTopology is what parse reads of the top level before it builds the
// nodes, which needs every field: settings and impair may come after nodes
// in the file, and groups and links name nodes.
type rawTopology struct {
	nodesVal, subnetVal, groupsVal, linksVal, hostsVal *yaml.Node
	nodes                                              []rawNode
	impair                                             rawImpair
	settings                                           rawSettings
}

func (p *parser) parse(data []byte) (*Topology, error) {
	if len(data) > MaxFileSize {
		return nil, p.ErrAt(nil, "", "file is larger than %s", bounded.Size(MaxFileSize))
	}
	top, err := p.Document(data, yamlfile.DocErrors{
		Kind:  "topology",
		Empty: "empty topology (want at least nodes:)",
		Extra: "more than one YAML document",
	})
	if err != nil {
		return nil, err
	}
	t := &Topology{
		Name:      yamlfile.DefaultName(p.File, "topology"),
		Source:    p.File,
		Subnet:    DefaultSubnet,
		Port:      DefaultPort,
		Hosting:   HostingProcess,
		Algorithm: DefaultAlgorithm,
		Groups:    map[string][]string{},
	}
	raw, err := p.fields(top, t)
	if err != nil {
		return nil, err
	}
	if raw.nodesVal == nil {
		return nil, p.ErrAt(top, "nodes", "missing (want a count or a list of nodes)")
	}
	if raw.hostsVal == nil && len(raw.nodes) > MaxNodes {
		// One host's testbed; the hosts section checks its hosts' shares.
		return nil, p.nodeCountErr(raw.nodesVal, "nodes", int64(len(raw.nodes)))
	}
	if err := p.checkCapacity(t.Subnet, raw); err != nil {
		return nil, err
	}
	if err := p.placeNodes(t, top, raw); err != nil {
		return nil, err
	}
	if raw.groupsVal != nil {
		if err := p.groups(t, raw.groupsVal, "groups"); err != nil {
			return nil, err
		}
	}
	if raw.linksVal != nil {
		if err := p.links(t, raw.linksVal, "links"); err != nil {
			return nil, err
		}
	}
	if raw.hostsVal != nil {
		if err := p.hosts(t, raw.hostsVal, "hosts"); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// fields reads the top-level fields: name, subnet and port into t, the
// rest into a rawTopology.
func (p *parser) fields(top *yaml.Node, t *Topology) (rawTopology, error) {
	var raw rawTopology
	err := p.Mapping(top, "", topFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "name":
			t.Name, err = p.Name(v, fp)
		case "nodes":
			raw.nodesVal = v
			raw.nodes, err = p.nodes(v, fp)
		case "subnet":
			raw.subnetVal = v
			t.Subnet, err = p.subnet(v, fp)
		case "port":
			t.Port, err = p.port(v, fp)
		case "hosting":
			t.Hosting, err = p.hosting(v, fp)
		case "algorithm":
			t.Algorithm, err = p.algorithm(v, fp)
		case "impair":
			raw.impair, err = p.impair(v, fp)
		case "settings":
			err = p.Mapping(v, fp, settingsFields, func(key string, _, v *yaml.Node, fp string) error {
				return p.setting(&raw.settings, key, v, fp)
			})
		case "groups":
			raw.groupsVal = v
		case "links":
			raw.linksVal = v
		case "hosts":
			raw.hostsVal = v
		}
		return err
	})
	return raw, err
}

// checkCapacity checks that subnet has an address for every node. The
// error points at the subnet when the file set one, as that is what a
// large topology outgrew.
func (p *parser) checkCapacity(subnet netip.Prefix, raw rawTopology) error {
	// Host bits beyond the network address, host 1 (left free, by habit the
	// gateway's) and the broadcast address.
	capacity := uint64(1)<<(32-subnet.Bits()) - 3
	if subnet.Bits() > 30 {
		capacity = 0
	}
	if uint64(len(raw.nodes)) <= capacity {
		return nil
	}
	at, field := raw.nodesVal, "nodes"
	if raw.subnetVal != nil {
		at, field = raw.subnetVal, "subnet"
	}
	return p.ErrAt(at, field, "%s holds %d nodes, the topology has %d", subnet, capacity, len(raw.nodes))
}

// placeNodes builds t's nodes in file order: each gets the next address
// and the topology's settings and impairment with its own values over
// them.
func (p *parser) placeNodes(t *Topology, top *yaml.Node, raw rawTopology) error {
	settings, err := p.resolveSettings(DefaultSettings, raw.settings, settingsPathFallback{node: top, path: "settings"})
	if err != nil {
		return err
	}
	defaults := raw.impair.over(Impair{})
	base := t.Subnet.Addr().As4()
	baseU := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	t.byName = make(map[string]int, len(raw.nodes))
	for i, rn := range raw.nodes {
		s, err := p.resolveSettings(settings, rn.settings, settingsPathFallback{node: rn.node, path: rn.path})
		if err != nil {
			return err
		}
		a := baseU + uint32(i) + 2 // past the network address and host 1
		t.Nodes = append(t.Nodes, Node{
			Name:     rn.name,
			Index:    i + 1,
			Addr:     netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}),
			Settings: s,
			Impair:   rn.impair.over(defaults),
		})
		t.byName[rn.name] = i
	}
	return nil
}

func (p *parser) hosting(v *yaml.Node, path string) (Hosting, error) {
	s, err := p.Scalar(v, path)
	if err != nil {
		return "", err
	}
	switch h := Hosting(s); h {
	case HostingProcess, HostingShared:
		return h, nil
	}
	return "", p.ErrAt(v, path, "%q is not a hosting (want process or shared)", s)
}

func (p *parser) algorithm(v *yaml.Node, path string) (string, error) {
	s, err := p.Scalar(v, path)
	if err != nil {
		return "", err
	}
	if slices.Contains(Algorithms, s) {
		return s, nil
	}
	return "", p.ErrAt(v, path, "%s is not an election algorithm (want %s)", bounded.Quote(s), strings.Join(Algorithms, " or "))
}

func (p *parser) port(v *yaml.Node, path string) (int, error) {
	x, err := p.Integer(v, path, "a port number")
	if err != nil {
		return 0, err
	}
	if x < 1 || x > 65535 {
		return 0, p.ErrAt(v, path, "%d is not a port number 1..65535", x)
	}
	if x == ReservedPort {
		return 0, p.ErrAt(v, path, "%d is claimed by Wireshark's Gryphon dissector, which garbles captures; pick another (default %d)", x, DefaultPort)
	}
	return int(x), nil
}

func (p *parser) subnet(v *yaml.Node, path string) (netip.Prefix, error) {
	s, err := p.Scalar(v, path)
	if err != nil {
		return netip.Prefix{}, err
	}
	pfx, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, p.ErrAt(v, path, "%s is not a subnet (want e.g. 10.77.0.0/16)", bounded.Quote(s))
	}
	for _, r := range unusableRanges {
		if pfx.Masked().Overlaps(r.prefix) {
			what := pfx.String()
			if pfx.Masked() != r.prefix {
				what += " overlaps " + r.prefix.String() + ","
			} else {
				what += " is"
			}
			return netip.Prefix{}, p.ErrAt(v, path, "%s %s; pick a private range such as %s", what, r.what, DefaultSubnet)
		}
	}
	if !pfx.Addr().Is4() {
		return netip.Prefix{}, p.ErrAt(v, path, "%s is not IPv4 (only IPv4 is supported)", pfx)
	}
	if pfx.Masked() != pfx {
		return netip.Prefix{}, p.ErrAt(v, path, "%s has host bits set (did you mean %s?)", pfx, pfx.Masked())
	}
	return pfx, nil
}

// unusableRanges are address ranges a testbed subnet must not touch: the
// nodes could not use them, or would reach the host instead of each other.
var unusableRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" (0.0.0.0 is the unspecified address)`},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (255.255.255.255 is the broadcast address)"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

func (p *parser) impair(v *yaml.Node, path string) (rawImpair, error) {
	var r rawImpair
	err := p.Mapping(v, path, impairFields, func(key string, _, v *yaml.Node, fp string) error {
		switch key {
		case "delay", "jitter":
			d, err := p.Duration(v, fp)
			if err != nil {
				return err
			}
			if key == "delay" {
				r.delay = &d
			} else {
				r.jitter = &d
			}
		default:
			f, err := p.Percent(v, fp)
			if err != nil {
				return err
			}
			switch key {
			case "loss":
				r.loss = &f
			case "duplicate":
				r.duplicate = &f
			case "reorder":
				r.reorder = &f
			}
		}
		return nil
	})
	return r, err
}

// settingFloors are the Min constants by field.
var settingFloors = map[string]time.Duration{
	"heartbeat":         MinHeartbeat,
	"failure_timeout":   MinFailureTimeout,
	"election_timeout":  MinElectionTimeout,
	"detection_stagger": MinDetectionStagger,
}

func (p *parser) setting(s *rawSettings, key string, v *yaml.Node, fp string) error {
	read := p.PositiveDuration
	if key == "detection_stagger" {
		read = p.Duration // 0 disables it
	}
	d, err := read(v, fp)
	if err != nil {
		return err
	}
	if floor := settingFloors[key]; d < floor && !(key == "detection_stagger" && d == 0) {
		return p.ErrAt(v, fp, "%s is below the floor of %s", d, floor)
	}
	rs := rawSetting{val: &d, node: v, path: fp}
	switch key {
	case "heartbeat":
		s.heartbeat = rs
	case "failure_timeout":
		s.failureTimeout = rs
	case "election_timeout":
		s.electionTimeout = rs
	case "detection_stagger":
		s.detectionStagger = rs
	}
	return nil
}

type settingsPathFallback struct {
	node *yaml.Node
	path string
}

// resolveSettings applies r over base and checks what the election needs: a
// node must hear several heartbeats before it declares the leader dead.
func (p *parser) resolveSettings(base Settings, r rawSettings, at settingsPathFallback) (Settings, error) {
	s := base
	if r.heartbeat.val != nil {
		s.Heartbeat = *r.heartbeat.val
	}
	if r.failureTimeout.val != nil {
		s.FailureTimeout = *r.failureTimeout.val
	}
	if r.electionTimeout.val != nil {
		s.ElectionTimeout = *r.electionTimeout.val
	}
	if r.detectionStagger.val != nil {
		s.DetectionStagger = *r.detectionStagger.val
	}
	if s.Heartbeat >= s.FailureTimeout {
		node, path := at.node, at.path
		switch {
		case r.heartbeat.val != nil:
			node, path = r.heartbeat.node, r.heartbeat.path
		case r.failureTimeout.val != nil:
			node, path = r.failureTimeout.node, r.failureTimeout.path
		}
		return s, p.ErrAt(node, path, "heartbeat %s must be below failure_timeout %s", s.Heartbeat, s.FailureTimeout)
	}
	return s, nil
}

func (p *parser) nodes(v *yaml.Node, path string) ([]rawNode, error) {
	d := yamlfile.Deref(v)
	if d.Kind == yaml.ScalarNode {
		n, err := p.Integer(v, path, "a count or a list of nodes")
		if err != nil {
			return nil, err
		}
		if n < 1 || n > MaxSpanNodes {
			return nil, p.nodeCountErr(v, path, n)
		}
		nodes := make([]rawNode, n)
		for i := range nodes {
			nodes[i] = rawNode{name: fmt.Sprintf("n%d", i+1), node: v, path: path}
		}
		return nodes, nil
	}
	entries, err := p.Sequence(v, path, "a count or a list of nodes")
	if err != nil {
		return nil, err
	}
	if len(entries) < 1 || len(entries) > MaxSpanNodes {
		return nil, p.nodeCountErr(v, path, int64(len(entries)))
	}
	nodes := make([]rawNode, 0, len(entries))
	firstLine := map[string]int{}
	for i, e := range entries {
		ep := fmt.Sprintf("%s[%d]", path, i)
		rn := rawNode{node: e, path: ep}
		nameNode, namePath := e, ep
		if ed := yamlfile.Deref(e); ed.Kind == yaml.ScalarNode {
			rn.name, err = p.Scalar(e, ep)
		} else {
			err = p.Mapping(e, ep, nodeFields, func(key string, _, v *yaml.Node, fp string) error {
				switch key {
				case "name":
					nameNode, namePath = v, fp
					var err error
					rn.name, err = p.Scalar(v, fp)
					return err
				case "impair":
					var err error
					rn.impair, err = p.impair(v, fp)
					return err
				default:
					return p.setting(&rn.settings, key, v, fp)
				}
			})
			if err == nil && nameNode == e {
				err = p.ErrAt(e, yamlfile.Join(ep, "name"), "missing")
			}
		}
		if err != nil {
			return nil, err
		}
		if msg := checkName(rn.name, "node"); msg != "" {
			return nil, p.ErrAt(nameNode, namePath, "%s", msg)
		}
		if line, ok := firstLine[rn.name]; ok {
			return nil, p.ErrAt(nameNode, namePath, "node %q is repeated (first at line %d)", rn.name, line)
		}
		firstLine[rn.name] = nameNode.Line
		nodes = append(nodes, rn)
	}
	return nodes, nil
}

func (p *parser) groups(t *Topology, v *yaml.Node, path string) error {
	return p.Mapping(v, path, nil, func(group string, key, v *yaml.Node, fp string) error {
		if msg := checkName(group, "group"); msg != "" {
			return p.ErrAt(key, fp, "%s", msg)
		}
		if _, ok := t.byName[group]; ok {
			return p.ErrAt(key, fp, "group %q has the name of a node, which would make links ambiguous", group)
		}
		members, err := p.Sequence(v, fp, "a list of node names")
		if err != nil {
			return err
		}
		if len(members) == 0 {
			return p.ErrAt(v, fp, "group has no members")
		}
		names := make([]string, 0, len(members))
		for i, m := range members {
			mp := fmt.Sprintf("%s[%d]", fp, i)
			name, err := p.Scalar(m, mp)
			if err != nil {
				return err
			}
			if _, ok := t.byName[name]; !ok {
				return p.ErrAt(m, mp, "unknown node %s", bounded.Quote(name))
			}
			if slices.Contains(names, name) {
				return p.ErrAt(m, mp, "node %q is listed twice", name)
			}
			names = append(names, name)
		}
		t.Groups[group] = names
		return nil
	})
}

func (p *parser) links(t *Topology, v *yaml.Node, path string) error {
	entries, err := p.Sequence(v, path, "a list of links")
	if err != nil {
		return err
	}
	pairs := pairTable{n: len(t.Nodes)}
	work := 0
	for i, e := range entries {
		ep := fmt.Sprintf("%s[%d]", path, i)
		ends, im, err := p.link(t, e, ep)
		if err != nil {
			return err
		}
		if work += len(ends[0]) * len(ends[1]); work > maxPairWork {
			return p.ErrAt(e, ep, "links cover more than %d node pairs in all; use fewer, larger groups", maxPairWork)
		}
		pairs.add(ends, im)
	}
	pairs.store(t)
	return nil
}

// link reads one entry of links: the node positions at either end, and
// the impairment between them.
func (p *parser) link(t *Topology, e *yaml.Node, ep string) ([2][]int, rawImpair, error) {
	var (
		ends       [2][]int
		im         rawImpair
		haveBetw   bool
		haveImpair bool
	)
	err := p.Mapping(e, ep, linkFields, func(key string, _, v *yaml.Node, fp string) error {
		var err error
		switch key {
		case "between":
			haveBetw = true
			ends, err = p.between(t, v, fp)
		case "impair":
			haveImpair = true
			im, err = p.impair(v, fp)
		}
		return err
	})
	switch {
	case err != nil:
		return ends, im, err
	case !haveBetw:
		return ends, im, p.ErrAt(e, yamlfile.Join(ep, "between"), "missing")
	case !haveImpair:
		return ends, im, p.ErrAt(e, yamlfile.Join(ep, "impair"), "missing")
	}
	return ends, im, nil
}

// between reads a link's two ends, each a node or a group, as node
// positions.
func (p *parser) between(t *Topology, v *yaml.Node, fp string) ([2][]int, error) {
	var (
		ends  [2][]int
		names [2]string
	)
	items, err := p.Sequence(v, fp, "a list of two node or group names")
	if err != nil {
		return ends, err
	}
	if len(items) != 2 {
		return ends, p.ErrAt(v, fp, "want two node or group names, got %d", len(items))
	}
	for j, it := range items {
		ip := fmt.Sprintf("%s[%d]", fp, j)
		name, err := p.Scalar(it, ip)
		if err != nil {
			return ends, err
		}
		members, ok := t.members(name)
		if !ok {
			return ends, p.ErrAt(it, ip, "unknown node or group %s", bounded.Quote(name))
		}
		ends[j], names[j] = members, name
	}
	// A group may link to itself, its members to each other; a node cannot.
	if _, isNode := t.byName[names[0]]; isNode && names[0] == names[1] {
		return ends, p.ErrAt(v, fp, "a link needs two different nodes, got %q twice", names[0])
	}
	return ends, nil
}

// pairTable gathers the impairments links put on node pairs. It is dense,
// by pair (a*n+b, a < b): a map is ten times slower across 1000x1000
// nodes.
type pairTable struct {
	n     int
	pairs []*rawImpair // allocated with the first pair
}

// add merges im into every pair of a node of ends[0] with a different node
// of ends[1].
func (pt *pairTable) add(ends [2][]int, im rawImpair) {
	n := pt.n
	for _, a := range ends[0] {
		for _, b := range ends[1] {
			if a == b {
				continue
			}
			if pt.pairs == nil {
				pt.pairs = make([]*rawImpair, n*n)
			}
			key := min(a, b)*n + max(a, b)
			if pt.pairs[key] == nil {
				pt.pairs[key] = &rawImpair{}
			}
			pt.pairs[key].merge(im)
		}
	}
}

// store sets t's PairImpairs and their index from the table.
func (pt *pairTable) store(t *Topology) {
	n := pt.n
	t.byPair = map[[2]int]int{}
	for key, r := range pt.pairs { // in key order, so sorted by (A, B)
		if r == nil {
			continue
		}
		a, b := key/n, key%n
		t.byPair[[2]int{a, b}] = len(t.PairImpairs)
		t.PairImpairs = append(t.PairImpairs, PairImpair{A: t.Nodes[a].Name, B: t.Nodes[b].Name, Impair: r.over(Impair{})})
	}
}

// members returns the node positions a link end names.
func (t *Topology) members(name string) ([]int, bool) {
	if i, ok := t.byName[name]; ok {
		return []int{i}, true
	}
	names, ok := t.Groups[name]
	if !ok {
		return nil, false
	}
	idx := make([]int, len(names))
	for i, n := range names {
		idx[i] = t.byName[n]
	}
	return idx, true
}

// checkName returns why name cannot name a node or group, or "". Names end
// up in namespace names and on command lines, hence no leading '-'; "sw"
// would collide with the switch namespace.
func checkName(name, what string) string {
	ok := len(name) >= 1 && len(name) <= 16 && name[0] != '-'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return fmt.Sprintf("invalid %s name %s (want [a-z0-9-]{1,16}, not starting with '-')", what, bounded.Quote(name))
	}
	if name == "sw" {
		return fmt.Sprintf("%s name \"sw\" is reserved for the switch", what)
	}
	return ""
}

// nodeCountErr is the error of a node count n out of range at field.
func (p *parser) nodeCountErr(n *yaml.Node, field string, count int64) error {
	return p.ErrAt(n, field, "%d nodes; want 1..%d (%d across hosts)", count, MaxNodes, MaxSpanNodes)
}
