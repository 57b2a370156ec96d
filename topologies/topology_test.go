package topologies_test

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node/election"
	"github.com/bullylab/bullylab/topologies"
)

func TestBuiltinsParse(t *testing.T) {
	want := []string{"example", "star1000", "star16", "star250", "star3", "star5", "star500", "star64", "two-site"}
	if got := topologies.Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	sizes := map[string]int{"star3": 3, "star5": 5, "star16": 16, "star64": 64, "star250": 250, "star500": 500, "star1000": 1000, "two-site": 5, "example": 5}
	for _, name := range topologies.Names() {
		topo, err := topologies.Load(name)
		if err != nil {
			t.Fatalf("Load(%q): %v", name, err)
		}
		if topo.Name != name {
			t.Errorf("Load(%q).Name = %q", name, topo.Name)
		}
		if len(topo.Nodes) != sizes[name] {
			t.Errorf("%s: %d nodes, want %d", name, len(topo.Nodes), sizes[name])
		}
		if topo.Port != 7946 {
			t.Errorf("%s: port %d, want 7946", name, topo.Port)
		}
		// The stars past 250 run in one host process: a process per node
		// is too slow to start there.
		wantHosting := topologies.HostingProcess
		if sizes[name] > 250 {
			wantHosting = topologies.HostingShared
		}
		if topo.Hosting != wantHosting {
			t.Errorf("%s: hosting %q, want %q", name, topo.Hosting, wantHosting)
		}
		if topo.Algorithm != topologies.DefaultAlgorithm {
			t.Errorf("%s: algorithm %q, want the default %q", name, topo.Algorithm, topologies.DefaultAlgorithm)
		}
		for i, n := range topo.Nodes {
			if n.Index != i+1 {
				t.Errorf("%s: node %s index %d, want %d", name, n.Name, n.Index, i+1)
			}
			if !topo.Subnet.Contains(n.Addr) {
				t.Errorf("%s: node %s address %s outside %s", name, n.Name, n.Addr, topo.Subnet)
			}
		}
	}
}

func TestStarDefaults(t *testing.T) {
	topo, err := topologies.Load("star5")
	if err != nil {
		t.Fatal(err)
	}
	n3, ok := topo.Node("n3")
	if !ok {
		t.Fatal("star5 has no n3")
	}
	if n3.Index != 3 || n3.Addr != netip.MustParseAddr("10.77.0.4") {
		t.Errorf("n3 = index %d addr %s, want 3 10.77.0.4", n3.Index, n3.Addr)
	}
	if n3.Settings != topologies.DefaultSettings {
		t.Errorf("n3 settings %+v, want %+v", n3.Settings, topologies.DefaultSettings)
	}
	if !n3.Impair.IsZero() || len(topo.PairImpairs) != 0 {
		t.Errorf("star5 is impaired: node %+v, pairs %v", n3.Impair, topo.PairImpairs)
	}
	if got := topo.Prefix(n3).String(); got != "10.77.0.4/16" {
		t.Errorf("Prefix(n3) = %s", got)
	}
}

func TestTwoSite(t *testing.T) {
	topo, err := topologies.Load("two-site")
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Groups["site-b"]; !slices.Equal(got, []string{"n4", "n5"}) {
		t.Errorf("site-b = %v", got)
	}
	if len(topo.PairImpairs) != 6 {
		t.Errorf("%d pair impairments, want 3x2 = 6: %v", len(topo.PairImpairs), topo.PairImpairs)
	}
	for _, pr := range [][2]string{{"n1", "n4"}, {"n5", "n3"}} {
		im, ok := topo.PairImpair(pr[0], pr[1])
		if !ok || im != (topologies.Impair{Delay: 30 * time.Millisecond}) {
			t.Errorf("PairImpair(%s, %s) = %+v %v, want 30ms delay", pr[0], pr[1], im, ok)
		}
	}
	if _, ok := topo.PairImpair("n1", "n2"); ok {
		t.Error("n1 and n2 share a site but have a pair impairment")
	}
}

func TestNodeListOverrides(t *testing.T) {
	src := `
name: custom
nodes:
  - name: a
  - {name: b, heartbeat: 50ms, detection_stagger: 0s, impair: {delay: 5ms}}
  - c
subnet: 192.168.7.0/24
port: 9000
impair: {jitter: 1ms, loss: 2.5%}
settings: {heartbeat: 80ms, failure_timeout: 400ms, election_timeout: 150ms, detection_stagger: 30ms}
groups: {x: [a], y: [b, c]}
links:
  - between: [x, y]
    impair: {delay: 10ms, loss: 1}
  - between: [a, c]
    impair: {delay: 20ms}
`
	topo, err := topologies.Parse("custom.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := topo.Node("b")
	wantB := topologies.Node{
		Name: "b", Index: 2, Addr: netip.MustParseAddr("192.168.7.3"),
		Settings: topologies.Settings{Heartbeat: 50 * time.Millisecond, FailureTimeout: 400 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond},
		Impair:   topologies.Impair{Delay: 5 * time.Millisecond, Jitter: time.Millisecond, Loss: 2.5},
	}
	if *b != wantB {
		t.Errorf("b = %+v\nwant %+v", *b, wantB)
	}
	c, _ := topo.Node("c")
	if c.Settings.Heartbeat != 80*time.Millisecond || c.Settings.DetectionStagger != 30*time.Millisecond || c.Impair.Delay != 0 {
		t.Errorf("c = %+v, want topology defaults", *c)
	}
	if im, _ := topo.PairImpair("c", "a"); im != (topologies.Impair{Delay: 20 * time.Millisecond, Loss: 1}) {
		t.Errorf("a-c = %+v, want the later link's delay over the earlier one's loss", im)
	}
	if topo.Port != 9000 || topo.Subnet.String() != "192.168.7.0/24" {
		t.Errorf("port %d subnet %s", topo.Port, topo.Subnet)
	}
}

// TestTimingFloors: the floors themselves are accepted, and 0 still turns
// the stagger off.
func TestTimingFloors(t *testing.T) {
	topo, err := topologies.Parse("x.yaml", []byte("nodes: [a, {name: b, detection_stagger: 0s}]\n"+
		"settings: {heartbeat: 10ms, failure_timeout: 50ms, election_timeout: 20ms, detection_stagger: 1ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := topologies.Settings{Heartbeat: topologies.MinHeartbeat, FailureTimeout: topologies.MinFailureTimeout,
		ElectionTimeout: topologies.MinElectionTimeout, DetectionStagger: topologies.MinDetectionStagger}
	if got := topo.Nodes[0].Settings; got != want {
		t.Errorf("a: %+v, want %+v", got, want)
	}
	if got := topo.Nodes[1].Settings.DetectionStagger; got != 0 {
		t.Errorf("b: stagger %v, want 0 (off)", got)
	}
}

func TestSubnetEdges(t *testing.T) {
	// /24 holds hosts .2 .. .254.
	if _, err := topologies.Parse("x.yaml", []byte("nodes: 253\nsubnet: 10.1.2.0/24\n")); err != nil {
		t.Errorf("253 nodes in a /24: %v", err)
	}
	topo, err := topologies.Parse("x.yaml", []byte("nodes: 1\nsubnet: 10.1.2.4/30\n"))
	if err != nil {
		t.Fatalf("1 node in a /30: %v", err)
	}
	if topo.Nodes[0].Addr != netip.MustParseAddr("10.1.2.6") {
		t.Errorf("n1 in 10.1.2.4/30 = %s", topo.Nodes[0].Addr)
	}
	if _, err := topologies.Parse("x.yaml", []byte("nodes: 1000\n")); err != nil {
		t.Errorf("1000 nodes: %v", err)
	}
}

func TestAlgorithm(t *testing.T) {
	for _, algorithm := range topologies.Algorithms {
		topo, err := topologies.Parse("a.yaml", []byte("nodes: 3\nalgorithm: "+algorithm+"\n"))
		if err != nil {
			t.Fatalf("algorithm %s: %v", algorithm, err)
		}
		if topo.Algorithm != algorithm {
			t.Errorf("algorithm: %s parsed as %q", algorithm, topo.Algorithm)
		}
	}
}

func TestBadFiles(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      string // prefix "file:line: field:" or the whole start of the message
	}{
		{"empty", "", "bad.yaml: empty topology"},
		{"null", "~\n", "bad.yaml:1: empty topology"},
		{"list", "- 1\n", "bad.yaml:1: want a mapping"},
		{"syntax", "nodes: 3\nsubnet: [\n", "bad.yaml:2: did not find expected node content"},
		{"tab", "nodes: 3\n\tport: 1\n", "bad.yaml:2: found a tab"},
		{"two documents", "nodes: 3\n---\nnodes: 4\n", "bad.yaml:2: more than one YAML document"},
		{"missing nodes", "port: 9000\n", "bad.yaml:1: nodes: missing"},
		{"unknown top field", "nodes: 3\nnode: 4\n", "bad.yaml:2: node: unknown field"},
		{"unknown nested field", "nodes: 3\nsettings:\n  heartbeat: 10ms\n  hartbeat: 10ms\n", "bad.yaml:4: settings.hartbeat: unknown field"},
		{"repeated field", "nodes: 3\nport: 1\nport: 2\n", "bad.yaml:3: port: repeated (first at line 2)"},
		{"bad hosting", "nodes: 3\nhosting: threads\n", `bad.yaml:2: hosting: "threads" is not a hosting (want process or shared)`},
		{"hosting list", "nodes: 3\nhosting: [shared]\n", "bad.yaml:2: hosting: "},
		{"bad algorithm", "nodes: 3\nalgorithm: raft\n", `bad.yaml:2: algorithm: "raft" is not an election algorithm (want bully or ring)`},
		{"algorithm list", "nodes: 3\nalgorithm: [ring]\n", "bad.yaml:2: algorithm: "},
		{"algorithm in capitals", "nodes: 3\nalgorithm: Ring\n", `bad.yaml:2: algorithm: "Ring" is not an election algorithm`},
		{"no hosts", "nodes: 3\nhosts: []\n", "bad.yaml:2: hosts: no hosts"},
		{"host without ssh", "nodes: 3\nhosts:\n  - name: a\n", "bad.yaml:3: hosts[0].ssh: missing"},
		{"host bad port", "nodes: 3\nhosts:\n  - ssh: a.example:99999\n", `bad.yaml:3: hosts[0].ssh: "a.example:99999": port "99999" is not 1..65535`},
		{"host bad name", "nodes: 3\nhosts:\n  - ssh: 'a b'\n", `bad.yaml:3: hosts[0].ssh: "a b": "a b" is neither an IP address nor a host name`},
		{"host named as node", "nodes: 3\nhosts:\n  - {name: n1, ssh: a}\n", `bad.yaml:3: hosts[0].name: host "n1" has the name of a node`},
		{"host repeated", "nodes: 3\nhosts:\n  - {name: a, ssh: a}\n  - {name: a, ssh: b}\n", `bad.yaml:4: hosts[1]: host "a" is repeated (first at line 3)`},
		{"host unknown node", "nodes: 3\nhosts:\n  - {ssh: a, nodes: [n4]}\n", `bad.yaml:3: hosts[0].nodes[0]: unknown node "n4"`},
		{"node on two hosts", "nodes: 3\nhosts:\n  - {ssh: a, nodes: [n1]}\n  - {ssh: b, nodes: [n1]}\n", `bad.yaml:4: hosts[1].nodes[0]: node "n1" is listed under two hosts`},
		{"more hosts than nodes", "nodes: 1\nhosts: [{ssh: a}, {ssh: b}]\n", "bad.yaml:2: hosts: 2 hosts for 1 nodes"},
		{"host bad user", "nodes: 3\nhosts:\n  - {ssh: a, user: '-x'}\n", `bad.yaml:3: hosts[0].user: "-x" is not a user name`},
		{"host unknown field", "nodes: 3\nhosts:\n  - {ssh: a, password: x}\n", "bad.yaml:3: hosts[0].password: unknown field"},
		{"zero nodes", "nodes: 0\n", "bad.yaml:1: nodes: 0 nodes; want 1..1000 (5000 across hosts)"},
		{"too many nodes", "nodes: 1001\n", "bad.yaml:1: nodes: 1001 nodes; want 1..1000 (5000 across hosts)"},
		{"too many nodes across hosts", "nodes: 5001\nhosts: [{ssh: a}, {ssh: b}, {ssh: c}, {ssh: d}, {ssh: e}, {ssh: f}]\n", "bad.yaml:1: nodes: 5001 nodes; want 1..1000 (5000 across hosts)"},
		{"too many nodes on a host", "nodes: 2001\nhosts: [{ssh: a}, {ssh: b}]\n", "bad.yaml:2: hosts[0]: host h1 runs 1001 nodes; a host builds 1000 at most"},
		{"count as string", "nodes: \"5\"\n", `bad.yaml:1: nodes: want a count or a list of nodes, got "5"`},
		{"count float", "nodes: 2.5\n", "bad.yaml:1: nodes: want a count"},
		{"empty node list", "nodes: []\n", "bad.yaml:1: nodes: 0 nodes"},
		{"bad node name", "nodes:\n  - name: a\n  - name: B\n", "bad.yaml:3: nodes[1].name: invalid node name \"B\""},
		{"long node name", "nodes: [abcdefghijklmnopq]\n", "bad.yaml:1: nodes[0]: invalid node name"},
		{"leading hyphen", "nodes: [\"-a\"]\n", "bad.yaml:1: nodes[0]: invalid node name"},
		{"reserved node name", "nodes: [a, sw]\n", "bad.yaml:1: nodes[1]: node name \"sw\" is reserved"},
		{"duplicate node", "nodes:\n  - a\n  - b\n  - a\n", "bad.yaml:4: nodes[2]: node \"a\" is repeated (first at line 2)"},
		{"node without name", "nodes:\n  - heartbeat: 10ms\n", "bad.yaml:2: nodes[0].name: missing"},
		{"node unknown field", "nodes:\n  - {name: a, delay: 5ms}\n", "bad.yaml:2: nodes[0].delay: unknown field"},
		{"subnet ipv6", "nodes: 3\nsubnet: fd00::/64\n", "bad.yaml:2: subnet: fd00::/64 is not IPv4"},
		{"subnet loopback", "nodes: 3\nsubnet: 127.0.0.0/8\n", "bad.yaml:2: subnet: 127.0.0.0/8 is loopback; pick a private range such as 10.77.0.0/16"},
		{"subnet in loopback", "nodes: 3\nsubnet: 127.1.0.0/16\n", "bad.yaml:2: subnet: 127.1.0.0/16 overlaps 127.0.0.0/8, loopback"},
		{"subnet over loopback", "nodes: 3\nsubnet: 96.0.0.0/3\n", "bad.yaml:2: subnet: 96.0.0.0/3 overlaps 127.0.0.0/8, loopback"},
		{"subnet loopback host bits", "nodes: 3\nsubnet: 127.0.0.1/8\n", "bad.yaml:2: subnet: 127.0.0.1/8 is loopback"},
		{"subnet multicast", "nodes: 3\nsubnet: 239.1.0.0/16\n", "bad.yaml:2: subnet: 239.1.0.0/16 overlaps 224.0.0.0/4, multicast"},
		{"subnet everything", "nodes: 3\nsubnet: 0.0.0.0/0\n", "bad.yaml:2: subnet: 0.0.0.0/0 overlaps 0.0.0.0/8, \"this network\" (0.0.0.0 is the unspecified address)"},
		{"subnet this network", "nodes: 3\nsubnet: 0.0.0.0/16\n", "bad.yaml:2: subnet: 0.0.0.0/16 overlaps 0.0.0.0/8"},
		{"subnet broadcast", "nodes: 3\nsubnet: 255.255.255.0/24\n", "bad.yaml:2: subnet: 255.255.255.0/24 overlaps 240.0.0.0/4, reserved"},
		{"subnet ipv6 loopback", "nodes: 3\nsubnet: ::1/128\n", "bad.yaml:2: subnet: ::1/128 is loopback"},
		{"subnet ipv6 everything", "nodes: 3\nsubnet: ::/0\n", "bad.yaml:2: subnet: ::/0 overlaps ::/128, the unspecified address"},
		{"subnet ipv6 multicast", "nodes: 3\nsubnet: ff02::/16\n", "bad.yaml:2: subnet: ff02::/16 overlaps ff00::/8, multicast"},
		{"subnet host bits", "nodes: 3\nsubnet: 10.0.0.1/24\n", "bad.yaml:2: subnet: 10.0.0.1/24 has host bits set"},
		{"subnet garbage", "nodes: 3\nsubnet: ten\n", "bad.yaml:2: subnet: \"ten\" is not a subnet"},
		{"subnet too small", "nodes: 254\nsubnet: 10.0.0.0/24\n", "bad.yaml:2: subnet: 10.0.0.0/24 holds 253 nodes, the topology has 254"},
		{"subnet /31", "nodes: 1\nsubnet: 10.0.0.0/31\n", "bad.yaml:2: subnet: 10.0.0.0/31 holds 0 nodes"},
		{"port zero", "nodes: 3\nport: 0\n", "bad.yaml:2: port: 0 is not a port number"},
		{"port big", "nodes: 3\nport: 65536\n", "bad.yaml:2: port: 65536 is not a port number"},
		{"port 7000", "nodes: 3\nport: 7000\n", "bad.yaml:2: port: 7000 is claimed by Wireshark's Gryphon dissector"},
		{"negative delay", "nodes: 3\nimpair: {delay: -5ms}\n", "bad.yaml:2: impair.delay: -5ms is negative"},
		{"bad duration", "nodes: 3\nimpair:\n  jitter: 5\n", "bad.yaml:3: impair.jitter: \"5\" is not a duration"},
		{"loss over 100", "nodes: 3\nimpair: {loss: 100.5%}\n", "bad.yaml:2: impair.loss: \"100.5%\" is not a percentage 0..100"},
		{"negative reorder", "nodes: 3\nimpair: {reorder: -1%}\n", "bad.yaml:2: impair.reorder: \"-1%\" is not a percentage"},
		{"nan duplicate", "nodes: 3\nimpair: {duplicate: NaN}\n", "bad.yaml:2: impair.duplicate: \"NaN\" is not a percentage"},
		{"node impair", "nodes:\n  - name: a\n    impair: {loss: 200}\n", "bad.yaml:3: nodes[0].impair.loss: \"200\" is not a percentage"},
		{"zero heartbeat", "nodes: 3\nsettings: {heartbeat: 0s}\n", "bad.yaml:2: settings.heartbeat: must be positive"},
		{"heartbeat below floor", "nodes: 3\nsettings: {heartbeat: 5ms}\n", "bad.yaml:2: settings.heartbeat: 5ms is below the floor of 10ms"},
		{"failure timeout below floor", "nodes: 3\nsettings: {heartbeat: 10ms, failure_timeout: 40ms}\n", "bad.yaml:2: settings.failure_timeout: 40ms is below the floor of 50ms"},
		{"election timeout below floor", "nodes: 3\nsettings:\n  election_timeout: 19ms\n", "bad.yaml:3: settings.election_timeout: 19ms is below the floor of 20ms"},
		{"stagger below floor", "nodes: 3\nsettings: {detection_stagger: 500us}\n", "bad.yaml:2: settings.detection_stagger: 500µs is below the floor of 1ms"},
		{"node heartbeat below floor", "nodes:\n  - a\n  - {name: b, heartbeat: 1ms}\n", "bad.yaml:3: nodes[1].heartbeat: 1ms is below the floor of 10ms"},
		{"negative stagger", "nodes: 3\nsettings:\n  detection_stagger: -1ms\n", "bad.yaml:3: settings.detection_stagger: -1ms is negative"},
		{"node stagger", "nodes:\n  - a\n  - {name: b, detection_stagger: soon}\n", "bad.yaml:3: nodes[1].detection_stagger: \"soon\" is not a duration"},
		{"heartbeat not below failure", "nodes: 3\nsettings:\n  heartbeat: 500ms\n", "bad.yaml:3: settings.heartbeat: heartbeat 500ms must be below failure_timeout 500ms"},
		{"failure below heartbeat", "nodes: 3\nsettings:\n  failure_timeout: 50ms\n", "bad.yaml:3: settings.failure_timeout: heartbeat 100ms must be below"},
		{"node heartbeat", "nodes:\n  - a\n  - {name: b, heartbeat: 2s}\n", "bad.yaml:3: nodes[1].heartbeat: heartbeat 2s must be below"},
		{"settings not a mapping", "nodes: 3\nsettings: 100ms\n", "bad.yaml:2: settings: want a mapping, got a single value"},
		{"unknown group member", "name: two-site\nnodes: 5\ngroups:\n  site-a: [n1, n2, n3]\n  site-b: [n4, n5]\n  site-c:\n    - n1\n    - n2\n    - n9\n", "bad.yaml:9: groups.site-c[2]: unknown node \"n9\""},
		{"group member twice", "nodes: 3\ngroups: {g: [n1, n1]}\n", "bad.yaml:2: groups.g[1]: node \"n1\" is listed twice"},
		{"empty group", "nodes: 3\ngroups:\n  g: []\n", "bad.yaml:3: groups.g: group has no members"},
		{"group named like node", "nodes: 3\ngroups:\n  n1: [n2]\n", "bad.yaml:3: groups.n1: group \"n1\" has the name of a node"},
		{"bad group name", "nodes: 3\ngroups:\n  Site: [n2]\n", "bad.yaml:3: groups.Site: invalid group name"},
		{"group not a list", "nodes: 3\ngroups: {g: n1}\n", "bad.yaml:2: groups.g: want a list of node names"},
		{"link unknown end", "nodes: 3\nlinks:\n  - between: [n1, nope]\n    impair: {delay: 1ms}\n", "bad.yaml:3: links[0].between[1]: unknown node or group \"nope\""},
		{"link three ends", "nodes: 3\nlinks:\n  - between: [n1, n2, n3]\n    impair: {delay: 1ms}\n", "bad.yaml:3: links[0].between: want two node or group names, got 3"},
		{"link same node", "nodes: 3\nlinks:\n  - between: [n1, n1]\n    impair: {delay: 1ms}\n", "bad.yaml:3: links[0].between: a link needs two different nodes"},
		{"link without impair", "nodes: 3\nlinks:\n  - between: [n1, n2]\n", "bad.yaml:3: links[0].impair: missing"},
		{"link without between", "nodes: 3\nlinks:\n  - impair: {delay: 1ms}\n", "bad.yaml:3: links[0].between: missing"},
		{"link bad impair", "nodes: 3\nlinks:\n  - between: [n1, n2]\n    impair: {delay: 1ms, lost: 1%}\n", "bad.yaml:4: links[0].impair.lost: unknown field"},
		{"links not a list", "nodes: 3\nlinks: {between: [n1, n2]}\n", "bad.yaml:2: links: want a list of links"},
		{"bad name", "name: \"my topology\"\nnodes: 3\n", "bad.yaml:1: name: invalid name \"my topology\""},
		{"complex key", "nodes: 3\n? [a]\n: 1\n", "bad.yaml:2: keys must be plain names"},
		{"newline in key", "nodes: 3\n\"a\\nb\": 1\n", `bad.yaml:2: a\nb: unknown field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := topologies.Parse("bad.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("parsed %q into %+v, want error %q", tc.src, topo, tc.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.want) {
				t.Errorf("error\n  %s\nwant prefix\n  %s", msg, tc.want)
			}
			if strings.ContainsAny(msg, "\r\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			var te *topologies.Error
			if !errors.As(err, &te) || te.File != "bad.yaml" {
				t.Errorf("error %v is not a *topologies.Error for bad.yaml", err)
			}
		})
	}
}

// maxAliasAllocs is ten times what parsing the alias bomb below allocates
// (509,216 when it was written).
const maxAliasAllocs = 5_000_000

func TestAliasBlowupIsBounded(t *testing.T) {
	// Every *l repeats a link across all 1000 nodes for two bytes.
	var b strings.Builder
	b.WriteString("nodes: 1000\ngroups: {all: [")
	for i := 1; i <= 1000; i++ {
		if i > 1 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "n%d", i)
	}
	b.WriteString("]}\nlinks: [&l {between: [all, all], impair: {delay: 1ms}}")
	for range 500 {
		b.WriteString(", *l")
	}
	b.WriteString("]\n")
	var err error
	// Work, not wall-clock time, shows the bound stops the expansion early:
	// expanding all 501 links would allocate for 501 million node pairs.
	allocs := testing.AllocsPerRun(1, func() {
		_, err = topologies.Parse("big.yaml", []byte(b.String()))
	})
	if err == nil || !strings.Contains(err.Error(), "links[") || !strings.Contains(err.Error(), "node pairs") {
		t.Errorf("error = %v, want the pair bound at a links entry", err)
	}
	t.Logf("%.0f allocations", allocs)
	if allocs > maxAliasAllocs {
		t.Errorf("parsing made %.0f allocations, want at most %d: the pair bound did not stop the expansion early", allocs, maxAliasAllocs)
	}
}

func TestLoadPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	if err := os.WriteFile(file, []byte("nodes: 2\ngroups: {g: [n3]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := topologies.Load(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+":2: groups.g[0]: unknown node \"n3\"") {
		t.Errorf("Load(%s) error = %v, want it to name the file, line 2 and groups.g[0]", file, err)
	}
	if err := os.WriteFile(file, []byte("nodes: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	topo, err := topologies.Load(file)
	if err != nil || topo.Name != "mine" || len(topo.Nodes) != 2 {
		t.Errorf("Load(%s) = %+v, %v; want topology mine with 2 nodes", file, topo, err)
	}
	if _, err := topologies.Load("star6"); err == nil || !strings.Contains(err.Error(), "star5") {
		t.Errorf("Load(star6) error = %v, want it to list the built-in names", err)
	}
	if topo, err := topologies.Load("two-site.yaml"); err != nil || topo.Name != "two-site" {
		t.Errorf("Load(two-site.yaml) = %v, %v; want the built-in", topo, err)
	}
	if _, err := topologies.Load(filepath.Join(dir, "star5")); err == nil {
		t.Error("a path with a slash fell back to a built-in")
	}
}

func TestStar(t *testing.T) {
	topo, err := topologies.Star(7)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Name != "star7" || len(topo.Nodes) != 7 || topo.Nodes[6].Name != "n7" {
		t.Errorf("Star(7) = %s with %d nodes", topo.Name, len(topo.Nodes))
	}
	if _, err := topologies.Star(0); err == nil {
		t.Error("Star(0) succeeded")
	}
}

// TestDefaultSettingsMatchNode: a topology that names no settings runs its
// nodes as `bullylab node` without timing flags would.
func TestDefaultSettingsMatchNode(t *testing.T) {
	def := election.DefaultConfig()
	want := topologies.Settings{
		Heartbeat: def.HeartbeatInterval, FailureTimeout: def.FailureTimeout,
		ElectionTimeout: def.ElectionTimeout, DetectionStagger: def.DetectionStagger,
	}
	if topologies.DefaultSettings != want {
		t.Errorf("DefaultSettings = %+v, election.DefaultConfig has %+v", topologies.DefaultSettings, want)
	}
}

// Files that never end or never open are refused in one line: /dev/zero
// by the size bound, a FIFO nobody writes to as empty, without blocking.
func TestLoadSpecialFiles(t *testing.T) {
	_, err := topologies.Load("/dev/zero")
	if want := "topology /dev/zero: larger than 8 MiB"; err == nil || err.Error() != want {
		t.Errorf("Load(/dev/zero) error = %v, want %s", err, want)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = topologies.Load(fifo)
	if want := fifo + ": empty topology"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load(FIFO) error = %v, want prefix %s", err, want)
	}
}

// TestLoadStdin: /dev/stdin reads what the process was given, a pipe or a
// file. The test runs itself with TOPOLOGIES_LOAD_STDIN set, which makes
// it load /dev/stdin and print what it got.
func TestLoadStdin(t *testing.T) {
	if os.Getenv("TOPOLOGIES_LOAD_STDIN") == "1" {
		topo, err := topologies.Load("/dev/stdin")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d nodes\n", topo.Name, len(topo.Nodes))
		return
	}
	const src = "name: piped\nnodes: 4\n"
	file := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for what, stdin := range map[string]io.Reader{"pipe": strings.NewReader(src), "file": f} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoadStdin$")
		cmd.Env = append(os.Environ(), "TOPOLOGIES_LOAD_STDIN=1")
		cmd.Stdin = stdin
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "piped: 4 nodes") {
			t.Errorf("/dev/stdin from a %s: %v\n%s", what, err, out)
		}
	}
}

// TestLongValuesInErrors: an error quoting a value or key of the file
// shows its start and its length, not all of it.
func TestLongValuesInErrors(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	key := strings.Repeat("x", 1000) // YAML keys end at 1024 bytes
	for _, src := range []string{
		"nodes: 3\nsubnet: " + long + "\n",
		"nodes: [" + long + "]\n",
		"nodes: 3\n" + key + ": 1\n",
		"nodes: 3\nsettings: {" + long + ": 1}\n",
		"nodes: 3\ngroups: {g: [" + long + "]}\n",
		"nodes: 3\ngroups: {" + key + ": [n1]}\n",
		"nodes: 3\nlinks: [{between: [n1, " + long + "], impair: {delay: 1ms}}]\n",
		"nodes: 3\nimpair: {delay: " + long + "}\n",
		"nodes: 3\nimpair: {delay: -" + strings.Repeat("0", 1<<20) + "1ms}\n",
		"nodes: 3\nimpair: {loss: " + long + "}\n",
		"nodes: 3\nport: " + long + "\n",
		"nodes: 3\nport: 1" + strings.Repeat("0", 1<<20) + "\n",
		"nodes: " + long + "\n",
		"name: " + long + "\nnodes: 3\n",
		"nodes: *" + long + "\n",
		"nodes: 3\n\"" + long + "\n",
	} {
		_, err := topologies.Parse("long.yaml", []byte(src))
		if err == nil {
			t.Errorf("%.40q... parsed", src)
			continue
		}
		msg := err.Error()
		if len(msg) > 400 || strings.ContainsAny(msg, "\r\n") || !strings.HasPrefix(msg, "long.yaml:") {
			t.Errorf("%.40q...: error of %d bytes: %.500s", src, len(msg), msg)
		}
		if strings.Contains(msg, "xxxxx") && !strings.Contains(msg, "bytes)") {
			t.Errorf("%.40q...: a value is cut without saying so: %s", src, msg)
		}
	}
}

// Nodes a host lists run there; the others go to the host with the fewest
// so far, in node order; the ssh address gets its port.
func TestHosts(t *testing.T) {
	topo, err := topologies.Parse("hosts.yaml", []byte(`nodes: 7
hosts:
  - {name: rack-a, ssh: 192.0.2.10, user: root, key: /root/.ssh/id_ed25519, nodes: [n7, n6, n5]}
  - {ssh: "b.example:2222"}
  - {ssh: "[2001:db8::1]:22", known_hosts: /etc/ssh/ssh_known_hosts}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []topologies.Host{
		{Name: "rack-a", SSH: "192.0.2.10:22", User: "root", Key: "/root/.ssh/id_ed25519", Nodes: []string{"n5", "n6", "n7"}},
		{Name: "h2", SSH: "b.example:2222", Nodes: []string{"n1", "n3"}},
		{Name: "h3", SSH: "[2001:db8::1]:22", KnownHosts: "/etc/ssh/ssh_known_hosts", Nodes: []string{"n2", "n4"}},
	}
	if !reflect.DeepEqual(topo.Hosts, want) {
		t.Errorf("hosts\n  %+v\nwant\n  %+v", topo.Hosts, want)
	}
	for _, h := range topo.Hosts {
		for _, name := range h.Nodes {
			if n, _ := topo.Node(name); n.Host != h.Name {
				t.Errorf("node %s on host %q, listed under %s", name, n.Host, h.Name)
			}
		}
	}
	one, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	if one.Hosts != nil || one.Nodes[0].Host != "" {
		t.Errorf("a topology without hosts has hosts %+v, n1 on %q", one.Hosts, one.Nodes[0].Host)
	}
}

// A host's share holds its nodes as the whole topology has them, and the
// links between them.
func TestShare(t *testing.T) {
	topo, err := topologies.Parse("share.yaml", []byte(`nodes: 4
groups: {odd: [n1, n3], even: [n2, n4]}
links:
  - {between: [n1, n3], impair: {delay: 5ms}}
  - {between: [n1, n2], impair: {delay: 9ms}}
hosts: [{name: a, ssh: 192.0.2.1}, {name: b, ssh: 192.0.2.2}]
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := topo.Share("a")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range s.Nodes {
		full, _ := topo.Node(n.Name)
		if n != *full {
			t.Errorf("share's %s is %+v, the topology's %+v", n.Name, n, *full)
		}
		got = append(got, n.Name)
	}
	if !reflect.DeepEqual(got, []string{"n1", "n3"}) {
		t.Errorf("host a's share: %v, want [n1 n3]", got)
	}
	if im, ok := s.PairImpair("n3", "n1"); !ok || im.Delay != 5*time.Millisecond {
		t.Errorf("n1-n3 in the share: %+v, %v", im, ok)
	}
	if _, ok := s.PairImpair("n1", "n2"); ok {
		t.Error("the share has a link to a node of another host")
	}
	if !reflect.DeepEqual(s.Groups, map[string][]string{"odd": {"n1", "n3"}}) {
		t.Errorf("share's groups: %v", s.Groups)
	}
	if _, err := topo.Share("c"); err == nil || !strings.Contains(err.Error(), `no host "c"`) {
		t.Errorf("unknown host: %v", err)
	}
}
