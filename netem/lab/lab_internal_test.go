//go:build linux

package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"golang.org/x/sys/unix"
)

func TestCombine(t *testing.T) {
	got := combine(fault.Impairment{Delay: 5 * time.Millisecond, Loss: 10, Reorder: 5},
		fault.Impairment{Delay: 30 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 10, Reorder: 1})
	want := fault.Impairment{Delay: 35 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 19, Reorder: 5}
	if got != want {
		t.Errorf("combine = %+v, want %+v", got, want)
	}
	if got := combine(fault.Impairment{Loss: 10}, fault.Impairment{}); got.Loss != 10 {
		t.Errorf("10%% on top of nothing is %v%%", got.Loss)
	}
}

func TestEventWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	// A record from an earlier run in the same log must not count.
	if err := os.WriteFile(path, []byte(`{"event":"status","from":"electing","to":"normal"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := watchEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	step := func(text string, wantStarted, wantNormal bool) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(text)
		f.Close()
		started, normal, err := w.scan()
		if err != nil || started != wantStarted || normal != wantNormal {
			t.Errorf("after %q: started %v normal %v (%v), want %v %v", text, started, normal, err, wantStarted, wantNormal)
		}
	}
	step("", false, false)
	step(`{"event":"node_st`, false, false) // half a record
	step(`arted","pid":7}`+"\n", true, false)
	step("runtime: something not JSON\n", true, false)
	step(`{"event":"status","from":"electing","to":"waiting"}`+"\n", true, false)
	step(`{"event":"status","from":"waiting","to":"normal"}`+"\n", true, true)
}

func TestAgreement(t *testing.T) {
	run := func(node, status, leader string, epoch uint64) NodeState {
		return NodeState{Node: node, State: ProcRunning, Status: status, Leader: leader, Epoch: epoch}
	}
	st := []NodeState{run("n1", "normal", "n3", 2), run("n2", "normal", "n3", 2), run("n3", "normal", "n3", 2),
		{Node: "n4", State: ProcCrashed}}
	if ag, ok := Agreement(st); !ok || ag.Node != "n3" || ag.Epoch != 2 || len(ag.Nodes) != 3 {
		t.Errorf("Agreement = %+v, %v", ag, ok)
	}
	st[1].Epoch = 1
	if _, ok := Agreement(st); ok {
		t.Error("agreement across epochs")
	}
	st[1].Epoch = 2
	st[2] = NodeState{Node: "n3", State: ProcPaused}
	if _, ok := Agreement(st); ok {
		t.Error("agreement on a paused leader")
	}
}

func TestAgreedSince(t *testing.T) {
	const (
		x = "b7d6f661-bbee-4712-8bf0-09df99ae4de2"
		y = "0fe00e12-7516-4f68-8993-68a096f86584"
	)
	rec := func(sec int, event, rest string) string {
		return fmt.Sprintf(`{"time":"2026-11-22T12:00:%02d.5Z","event":%q%s}`+"\n", sec, event, rest)
	}
	status := func(sec int, to string) string { return rec(sec, "status", fmt.Sprintf(`,"from":"x","to":%q`, to)) }
	changed := func(sec int, leader string, epoch int) string {
		return rec(sec, "leader_changed", fmt.Sprintf(`,"leader":%q,"epoch":%d`, leader, epoch))
	}
	for _, tc := range []struct {
		name string
		log  string
		want int // second of the agreement, -1 for none
	}{
		{"follower", rec(1, "node_started", "") + status(2, "normal") + changed(2, x, 3), 2},
		{"runtime noise between records", rec(1, "node_started", "") + "goroutine 1 [running]:\n" + status(2, "normal") + changed(2, x, 3), 2},
		// Bullied, then the same leader re-asserted itself: no leader change
		// is logged, and the agreement starts over when Normal again.
		{"left and came back", status(2, "normal") + changed(2, x, 3) + status(4, "electing") + status(5, "waiting") + status(6, "normal"), 6},
		{"follows another", status(2, "normal") + changed(2, y, 3), -1},
		{"other epoch", status(2, "normal") + changed(2, x, 2), -1},
		// Bullied after the poll asked it, before the poll ended: the
		// poll saw it agree, and the agreement began at second 2.
		{"left after the poll asked it", status(2, "normal") + changed(2, x, 3) + status(7, "electing"), 2},
		{"restarted, leader not logged", status(2, "normal") + changed(2, x, 3) + rec(8, "node_started", "") + status(9, "normal"), -1},
		// The poll (at second 30) saw the first agreement; what the node
		// did after it does not count.
		{"left and came back after the poll", status(2, "normal") + changed(2, x, 3) + status(31, "electing") + status(32, "normal"), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "n1.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			poll := time.Date(2026, 11, 22, 12, 0, 30, 0, time.UTC)
			at, ok, err := agreedSince(path, x, 3, poll)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want < 0 && ok:
				t.Errorf("agreed since %v, want no agreement", at)
			case tc.want >= 0 && (!ok || at.Second() != tc.want):
				t.Errorf("agreed since %v (ok %v), want second %d", at, ok, tc.want)
			}
		})
	}
}

// The shared host lifts its open files limit to the kernel's most, or at
// least to its hard limit.
func TestRaiseFileLimit(t *testing.T) {
	var before, after unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &before); err != nil {
		t.Fatal(err)
	}
	got, err := raiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if got != after.Cur {
		t.Errorf("raiseFileLimit returned %d, the limit is %d", got, after.Cur)
	}
	if after.Cur < before.Max {
		t.Errorf("open files limit %d after raising, below the hard limit %d before", after.Cur, before.Max)
	}
	if after.Cur != after.Max {
		t.Errorf("open files limit %d, below its hard limit %d", after.Cur, after.Max)
	}
}

// A host's nodes share an eighth of its open files for connection
// attempts, between 2 and the default each.
func TestDialSlots(t *testing.T) {
	for _, c := range []struct {
		files   uint64
		members int
		want    int
	}{
		{20000, 1000, 2}, {20000, 500, 5}, {20000, 250, 10}, {20000, 10, node.DefaultMaxDialing},
		{1024, 1000, 2}, {1 << 20, 1000, node.DefaultMaxDialing}, {20000, 0, node.DefaultMaxDialing},
	} {
		if got := DialSlots(c.files, c.members); got != c.want {
			t.Errorf("DialSlots(%d, %d) = %d, want %d", c.files, c.members, got, c.want)
		}
	}
}

// A topology that spans hosts is refused, naming them, before anything is
// built: it is not run on this machine instead.
func TestBootRefusesHosts(t *testing.T) {
	topo, err := topologies.Parse("two-hosts.yaml", []byte("nodes: 4\nhosts: [{ssh: 192.0.2.1}, {ssh: 192.0.2.2}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Boot(t.Context(), topo, BootOptions{})
	if err == nil || !strings.Contains(err.Error(), "spans 2 hosts") {
		t.Errorf("Boot: %v, want a refusal naming the 2 hosts", err)
	}
}

// Every node a lab starts, as a process or in the shared host, runs the
// topology's algorithm; a Topology built by hand runs Bully.
func TestNodesRunTopologyAlgorithm(t *testing.T) {
	for _, want := range append([]string{""}, topologies.Algorithms...) {
		topo, err := topologies.Star(3)
		if err != nil {
			t.Fatal(err)
		}
		topo.Algorithm = want
		if want == "" {
			want = topologies.DefaultAlgorithm
		}
		ids, err := node.NewIDs(len(topo.Nodes), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps := &nodeProcs{roster: newRoster("r1", topo, BootOptions{Binary: "bullylab"}, ids, nodeKeys{})}
		for _, n := range ps.nodes {
			i := slices.Index(n.argv, "--algorithm")
			if i < 0 || i+1 == len(n.argv) || n.argv[i+1] != want {
				t.Errorf("algorithm %q: node %s starts as %q", want, n.name, n.argv)
			}
			if got := ps.hostedSpec(n, false, fault.ClockSkew{}).Algorithm; got != want {
				t.Errorf("algorithm %q: the shared host starts node %s with %q", want, n.name, got)
			}
		}
	}
}

// A node of a topology of more members than a node takes by default (a
// span's) starts with room for them, as a process and in a shared host;
// below that, with the default.
func TestNodesMemberLimit(t *testing.T) {
	for _, c := range []struct{ nodes, want int }{{3, 0}, {1500, 3000}} {
		topo, err := topologies.Star(min(c.nodes, topologies.MaxNodes))
		if err != nil {
			t.Fatal(err)
		}
		for i := len(topo.Nodes); i < c.nodes; i++ {
			tn := topo.Nodes[0]
			tn.Name = fmt.Sprintf("n%d", i+1)
			topo.Nodes = append(topo.Nodes, tn)
		}
		ids, err := node.NewIDs(len(topo.Nodes), 1)
		if err != nil {
			t.Fatal(err)
		}
		ps := &nodeProcs{roster: newRoster("r1", topo, BootOptions{Binary: "bullylab"}, ids, nodeKeys{})}
		n := ps.nodes[0]
		got := 0
		if i := slices.Index(n.argv, "--max-members"); i >= 0 && i+1 < len(n.argv) {
			got, _ = strconv.Atoi(n.argv[i+1])
		}
		if got != c.want {
			t.Errorf("%d nodes: the process starts with %q, want --max-members %d (0: none)", c.nodes, n.argv, c.want)
		}
		if got := ps.hostedSpec(n, false, fault.ClockSkew{}).MaxMembers; got != c.want {
			t.Errorf("%d nodes: the shared host starts a node with MaxMembers %d, want %d", c.nodes, got, c.want)
		}
	}
}

// TestWantBlocked: a cut, a partition and an isolation in force compose
// per receiver and source, a drop winning over a reset on the same pair.
func TestWantBlocked(t *testing.T) {
	r := &roster{byName: map[string]*labNode{}}
	for _, name := range []string{"n1", "n2", "n3", "n4"} {
		n := &labNode{name: name}
		r.nodes = append(r.nodes, n)
		r.byName[name] = n
	}
	nw := &network{roster: r}
	nw.cut = blockMap{}
	nw.cut.add("n2", "n1", fault.ModeReset) // a one-way reset partition n1 -> n2
	nw.links = blockMap{}
	nw.links.add("n2", "n1", "") // a drop cut of n1 <-> n2
	nw.links.add("n1", "n2", fault.ModeDrop)
	r.byName["n4"].net.isolated, r.byName["n4"].net.isoMode = true, fault.ModeReset
	got := nw.wantBlocked()
	want := blockMap{
		"n1": {"n2": fault.ModeDrop, "n4": fault.ModeReset},
		"n2": {"n1": fault.ModeDrop, "n4": fault.ModeReset},
		"n3": {"n4": fault.ModeReset},
		"n4": {"n1": fault.ModeReset, "n2": fault.ModeReset, "n3": fault.ModeReset},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("wantBlocked = %v, want %v", got, want)
	}
	nw.links = nil
	if got := nw.wantBlocked()["n2"]["n1"]; got != fault.ModeReset {
		t.Errorf("with the cut gone, n2 cuts n1 as %q, want the partition's reset", got)
	}
}

func TestNotifyGrowth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	grew, poll, stop := notifyGrowth(path)
	defer stop()
	if grew == nil || poll != nil {
		t.Fatal("inotify is not watching the log")
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("{\"event\":\"node_started\"}\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-grew:
	case <-time.After(10 * time.Second):
		t.Fatal("no wakeup after a write to the log")
	}

	// Without a file to watch, it polls.
	grew, poll, stop = notifyGrowth(filepath.Join(t.TempDir(), "missing.log"))
	defer stop()
	if grew != nil || poll == nil {
		t.Fatal("no poll where inotify cannot watch")
	}
	select {
	case <-poll:
	case <-time.After(10 * time.Second):
		t.Fatal("the poll does not tick")
	}
}
