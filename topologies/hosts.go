package topologies

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/bullylab/bullylab/wire/bounded"
)

// Host is a machine a testbed spans: the controller reaches it over SSH
// and runs its share of the nodes there.
type Host struct {
	Name string
	// SSH is where its SSH server listens, host:port (port 22 unless the
	// file says otherwise).
	SSH string
	// User is the SSH user; "" means the controller's own user name.
	User string
	// Key is a private key file to authenticate with; "" means the
	// user's SSH agent.
	Key string
	// KnownHosts is the file its host key is checked against; "" means
	// ~/.ssh/known_hosts. An unknown or changed key is an error.
	KnownHosts string
	// Nodes are the names of the nodes it runs, in index order.
	Nodes []string
}

var hostFields = []string{"name", "ssh", "user", "key", "known_hosts", "nodes"}

// DefaultSSHPort is a host's SSH port when its ssh field names none.
const DefaultSSHPort = 22

// MaxHosts bounds a topology's hosts: one node each at most.
const MaxHosts = MaxNodes

// hosts reads the hosts section, then assigns every node not listed under
// a host to the host with the fewest nodes so far, the first in the file
// on a tie, in node order: a spread as even as the listed nodes allow.
func (p *parser) hosts(t *Topology, v *yaml.Node, path string) error {
	entries, err := p.Sequence(v, path, "a list of hosts")
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return p.ErrAt(v, path, "no hosts (leave the section out to run on this machine)")
	}
	if len(entries) > min(MaxHosts, len(t.Nodes)) {
		return p.ErrAt(v, path, "%d hosts for %d nodes; a host runs one node at least", len(entries), len(t.Nodes))
	}
	placed := make([]int, len(t.Nodes)) // host index + 1, by node index
	seen := map[string]int{}
	for i, e := range entries {
		ep := fmt.Sprintf("%s[%d]", path, i)
		h, err := p.host(t, e, ep, i, placed)
		if err != nil {
			return err
		}
		if line, ok := seen[h.Name]; ok {
			return p.ErrAt(e, ep, "host %q is repeated (first at line %d)", h.Name, line)
		}
		seen[h.Name] = e.Line
		t.Hosts = append(t.Hosts, h)
	}
	spreadNodes(t, placed)
	for i, h := range t.Hosts {
		if len(h.Nodes) > MaxNodes {
			return p.ErrAt(entries[i], fmt.Sprintf("%s[%d]", path, i), "host %s runs %d nodes; a host builds %d at most", h.Name, len(h.Nodes), MaxNodes)
		}
	}
	return nil
}

// spreadNodes places the nodes placed does not name, and fills in each
// node's Host and each host's Nodes in index order.
func spreadNodes(t *Topology, placed []int) {
	count := make([]int, len(t.Hosts))
	for _, h := range placed {
		if h > 0 {
			count[h-1]++
		}
	}
	for i := range placed {
		if placed[i] > 0 {
			continue
		}
		least := 0
		for h := range count {
			if count[h] < count[least] {
				least = h
			}
		}
		placed[i] = least + 1
		count[least]++
	}
	for i := range t.Hosts {
		t.Hosts[i].Nodes = nil
	}
	for i, h := range placed {
		t.Nodes[i].Host = t.Hosts[h-1].Name
		t.Hosts[h-1].Nodes = append(t.Hosts[h-1].Nodes, t.Nodes[i].Name)
	}
}

// host reads hosts[i], recording in placed the nodes it lists.
func (p *parser) host(t *Topology, e *yaml.Node, ep string, i int, placed []int) (Host, error) {
	var h Host
	haveName, haveSSH := false, false
	err := p.Mapping(e, ep, hostFields, func(key string, _, v *yaml.Node, fp string) error {
		if key == "nodes" {
			return p.hostNodes(t, v, fp, i, placed)
		}
		s, err := p.Scalar(v, fp)
		if err != nil {
			return err
		}
		switch key {
		case "name":
			haveName = true
			if msg := checkName(s, "host"); msg != "" {
				return p.ErrAt(v, fp, "%s", msg)
			}
			if _, ok := t.byName[s]; ok {
				return p.ErrAt(v, fp, "host %q has the name of a node, which would make fault selectors ambiguous", s)
			}
			if _, ok := t.Groups[s]; ok {
				return p.ErrAt(v, fp, "host %q has the name of a group, which would make fault selectors ambiguous", s)
			}
			h.Name = s
		case "ssh":
			haveSSH = true
			h.SSH, err = sshAddress(s)
			if err != nil {
				return p.ErrAt(v, fp, "%v", err)
			}
		case "user":
			if !validUser(s) {
				return p.ErrAt(v, fp, "%s is not a user name", bounded.Quote(s))
			}
			h.User = s
		case "key", "known_hosts":
			if s == "" || strings.ContainsRune(s, 0) {
				return p.ErrAt(v, fp, "want a file path")
			}
			if key == "key" {
				h.Key = s
			} else {
				h.KnownHosts = s
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return Host{}, err
	case !haveSSH:
		return Host{}, p.ErrAt(e, ep+".ssh", "missing (want the host's SSH address, host or host:port)")
	case !haveName:
		h.Name = fmt.Sprintf("h%d", i+1)
	}
	return h, nil
}

// hostNodes reads the nodes a host lists.
func (p *parser) hostNodes(t *Topology, v *yaml.Node, fp string, i int, placed []int) error {
	names, err := p.Sequence(v, fp, "a list of node names")
	if err != nil {
		return err
	}
	for j, m := range names {
		mp := fmt.Sprintf("%s[%d]", fp, j)
		name, err := p.Scalar(m, mp)
		if err != nil {
			return err
		}
		n, ok := t.byName[name]
		if !ok {
			return p.ErrAt(m, mp, "unknown node %s", bounded.Quote(name))
		}
		if placed[n] != 0 {
			return p.ErrAt(m, mp, "node %q is listed under two hosts", name)
		}
		placed[n] = i + 1
	}
	return nil
}

// sshAddress checks an ssh field, host or host:port, and returns it as
// host:port.
func sshAddress(s string) (string, error) {
	host, port := s, strconv.Itoa(DefaultSSHPort)
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	} else if strings.Count(s, ":") > 1 {
		// An IPv6 address without a port.
		if _, err := netip.ParseAddr(s); err != nil {
			return "", fmt.Errorf("%s is not host or host:port", bounded.Quote(s))
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%s: port %s is not 1..65535", bounded.Quote(s), bounded.Quote(port))
	}
	if _, err := netip.ParseAddr(host); err != nil && !validHostname(host) {
		return "", fmt.Errorf("%s: %s is neither an IP address nor a host name", bounded.Quote(s), bounded.Quote(host))
	}
	return net.JoinHostPort(host, port), nil
}

// validHostname reports whether s is a DNS name: dot-separated labels of
// letters, digits and inner hyphens, 253 bytes at most.
func validHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// validUser reports whether s can be a POSIX user name.
func validUser(s string) bool {
	if s == "" || len(s) > 32 || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Share returns the part of t that host runs: a copy holding only its
// nodes, each with its index, address and settings as in t, and the links
// between them. It is what the host builds; the others reach its nodes at
// the same addresses.
func (t *Topology) Share(host string) (*Topology, error) {
	i := slices.IndexFunc(t.Hosts, func(h Host) bool { return h.Name == host })
	if i < 0 {
		return nil, fmt.Errorf("topology %s has no host %s", t.Name, bounded.Quote(host))
	}
	s := *t
	s.Nodes = nil
	s.byName = map[string]int{}
	for _, n := range t.Nodes {
		if n.Host == host {
			s.byName[n.Name] = len(s.Nodes)
			s.Nodes = append(s.Nodes, n)
		}
	}
	s.Groups = map[string][]string{}
	for g, members := range t.Groups {
		var local []string
		for _, m := range members {
			if _, ok := s.byName[m]; ok {
				local = append(local, m)
			}
		}
		if len(local) > 0 {
			s.Groups[g] = local
		}
	}
	s.PairImpairs = nil
	s.byPair = map[[2]int]int{}
	for _, p := range t.PairImpairs {
		a, oka := s.byName[p.A]
		b, okb := s.byName[p.B]
		if oka && okb {
			s.byPair[[2]int{a, b}] = len(s.PairImpairs)
			s.PairImpairs = append(s.PairImpairs, p)
		}
	}
	s.Hosts = slices.Clone(t.Hosts)
	return &s, nil
}
