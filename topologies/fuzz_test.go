package topologies_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/topologies"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"nodes: 3\n",
		"nodes: [a, {name: b, heartbeat: 50ms, impair: {delay: 5ms}}]\nsubnet: 10.0.0.0/29\n",
		"nodes: 5\ngroups: {a: [n1, n2], b: [n3]}\nlinks:\n  - between: [a, b]\n    impair: {delay: 30ms, loss: 1%}\n",
		"x: &a [1, 2]\ny: *a\n",
		"nodes: &n [a, b]\ngroups: {g: *n}\n",
		"nodes: 3\nport: 7000\n",
		"nodes: 3\nalgorithm: ring\n",
		"nodes: 3\nalgorithm: \"\"\n",
		"nodes: 3\nsettings: {heartbeat: 1s}\n",
		"nodes: [a, {name: b, detection_stagger: 0s}]\nsettings: {detection_stagger: 20ms}\n",
		"\"a\\nb\": 1\n",
		"? [a]\n: 1\n",
		"nodes: 3\nsubnet: 127.0.0.0/8\n",
		"nodes: 3\nsubnet: ::/0\n",
		"nodes: 3\nsettings: {heartbeat: 10ms, failure_timeout: 50ms, election_timeout: 20ms, detection_stagger: 1ms}\n",
		"nodes: 3\nsubnet: " + strings.Repeat("x", 300) + "\n",
		"nodes: 5\nhosts:\n  - {name: a, ssh: 192.0.2.1, nodes: [n5]}\n  - {ssh: \"b.example:2222\", user: root, key: k}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		topo, err := topologies.Parse("fuzz.yaml", data)
		if err != nil {
			msg := err.Error()
			if strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			if len(msg) > 1024 {
				t.Fatalf("error of %d bytes: %.2000q", len(msg), msg)
			}
			if !strings.HasPrefix(msg, "fuzz.yaml") {
				t.Fatalf("error does not name the file: %q", msg)
			}
			return
		}
		if !slices.Contains(topologies.Algorithms, topo.Algorithm) {
			t.Fatalf("algorithm %q accepted", topo.Algorithm)
		}
		if len(topo.Nodes) < 1 || len(topo.Nodes) > topologies.MaxSpanNodes || len(topo.Hosts) == 0 && len(topo.Nodes) > topologies.MaxNodes {
			t.Fatalf("parsed %d nodes on %d hosts", len(topo.Nodes), len(topo.Hosts))
		}
		for _, h := range topo.Hosts {
			if len(h.Nodes) > topologies.MaxNodes {
				t.Fatalf("host %s runs %d nodes", h.Name, len(h.Nodes))
			}
		}
		if !topo.Subnet.Addr().Is4() || topo.Subnet.Addr().IsLoopback() || topo.Subnet.Addr().IsMulticast() || topo.Subnet.Addr().IsUnspecified() {
			t.Fatalf("subnet %s accepted", topo.Subnet)
		}
		onHost := map[string]string{}
		for _, h := range topo.Hosts {
			if len(h.Nodes) == 0 {
				t.Fatalf("host %s runs no node", h.Name)
			}
			for _, name := range h.Nodes {
				onHost[name] = h.Name
			}
		}
		for i, n := range topo.Nodes {
			if len(topo.Hosts) > 0 && onHost[n.Name] != n.Host {
				t.Fatalf("node %s on host %q, listed under %q", n.Name, n.Host, onHost[n.Name])
			}
			s := n.Settings
			if n.Index != i+1 || !topo.Subnet.Contains(n.Addr) || s.Heartbeat >= s.FailureTimeout ||
				n.Addr.IsLoopback() || n.Addr.IsMulticast() || !n.Addr.IsGlobalUnicast() && !n.Addr.IsLinkLocalUnicast() {
				t.Fatalf("invalid node %+v in %s", n, topo.Subnet)
			}
			if s.Heartbeat < topologies.MinHeartbeat || s.FailureTimeout < topologies.MinFailureTimeout ||
				s.ElectionTimeout < topologies.MinElectionTimeout || s.DetectionStagger != 0 && s.DetectionStagger < topologies.MinDetectionStagger {
				t.Fatalf("node %s has timings below the floors: %+v", n.Name, s)
			}
		}
	})
}
