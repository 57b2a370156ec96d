//go:build linux

package lab_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

func TestMain(m *testing.M) {
	code := m.Run()
	labtest.RemoveBinary()
	os.Exit(code)
}

func labStart(t *testing.T, topoName string) *lab.Lab {
	t.Helper()
	return labStartHosted(t, topoName, "")
}

// labStartHosted starts topoName with its nodes hosted as hosting says (""
// keeps the topology's).
func labStartHosted(t *testing.T, topoName string, hosting topologies.Hosting) *lab.Lab {
	t.Helper()
	bin := labtest.Binary(t)
	lb := labtest.Boot(t, labTopology(t, topoName, hosting), lab.BootOptions{Binary: bin})
	t.Cleanup(func() {
		// Close is idempotent; the cleanup netemtest.Lab registered runs
		// after this one and finds it done.
		if err := lb.Close(); err != nil {
			t.Errorf("tearing down %s: %v", lb.Run(), err)
		}
		netemtest.RequireClean(t, lb.Run())
	})
	return lb
}

// labTopology loads topoName with its nodes hosted as hosting says (""
// keeps the topology's).
func labTopology(t *testing.T, topoName string, hosting topologies.Hosting) *topologies.Topology {
	t.Helper()
	topo, err := topologies.Load(topoName)
	if err != nil {
		t.Fatal(err)
	}
	if hosting != "" {
		topo.Hosting = hosting
	}
	return topo
}

// labCaptured boots topoName, hosted as hosting says ("" keeps the
// topology's), with a capture to a temporary file from the first fault on,
// or with fromBoot from before the nodes start; it returns the lab and the
// capture's path.
func labCaptured(t *testing.T, topoName string, hosting topologies.Hosting, fromBoot bool) (*lab.Lab, string) {
	t.Helper()
	return labCapturedTopology(t, labTopology(t, topoName, hosting), fromBoot)
}

// labCapturedTopology is labCaptured for a topology already loaded.
func labCapturedTopology(t *testing.T, topo *topologies.Topology, fromBoot bool) (*lab.Lab, string) {
	t.Helper()
	bin := labtest.Binary(t)
	topoName := topo.Name
	path := filepath.Join(t.TempDir(), topoName+".pcapng")
	lb := labtest.Boot(t, topo, lab.BootOptions{Binary: bin, Capture: &lab.CaptureOptions{Path: path, FromBoot: fromBoot}})
	return lb, path
}

// labPhase is how long one election phase may take before the test fails;
// the star5 timings elect in well under a second.
const labPhase = 20 * time.Second

// labWait waits for every live node to agree on leader under an epoch
// above after, and returns the agreement.
func labWait(t *testing.T, lb *lab.Lab, what, leader string, after uint64, among ...string) lab.Leader {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), labPhase)
	defer cancel()
	start := time.Now()
	ag, err := lb.Monitor().WaitLeaderAmong(ctx, among, func(l lab.Leader) bool {
		return l.Node == leader && l.Epoch > after
	})
	if err != nil {
		t.Fatalf("%s: want leader %s above epoch %d: %v", what, leader, after, err)
	}
	t.Logf("%s: %s leads %v at epoch %d, %v after asking", what, ag.Node, ag.Nodes, ag.Epoch, ag.At.Sub(start).Round(time.Millisecond))
	return ag
}

// labFirst waits for the first agreement, whatever it is, and checks it.
func labFirst(t *testing.T, lb *lab.Lab, want string) lab.Leader {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), labPhase)
	defer cancel()
	ag, err := lb.Monitor().WaitLeader(ctx, nil)
	if err != nil {
		t.Fatalf("first leader: %v", err)
	}
	if ag.Node != want {
		t.Fatalf("first leader is %s at epoch %d, want the highest node %s", ag.Node, ag.Epoch, want)
	}
	agreed, ok, err := lb.Monitor().AgreedAt(ag)
	if err != nil || !ok || agreed.Before(lb.Times().Started) || agreed.After(ag.At) {
		t.Fatalf("AgreedAt = %v, %v, %v; want a time between the first start %v and the poll %v", agreed, ok, err, lb.Times().Started, ag.At)
	}
	t.Logf("first leader %s at epoch %d, agreed %v after the first node started (seen by a poll %v later)",
		ag.Node, ag.Epoch, agreed.Sub(lb.Times().Started).Round(time.Millisecond), ag.At.Sub(agreed).Round(time.Millisecond))
	return ag
}

// labDo fails the test if a fault fails: labDo(t)(lab.Crash("n5")).
func labDo(t *testing.T) func(fault.Fault, error) fault.Fault {
	return func(f fault.Fault, err error) fault.Fault {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}

func labState(t *testing.T, lb *lab.Lab, node string) lab.NodeState {
	t.Helper()
	for _, s := range lb.Monitor().NodeStates() {
		if s.Node == node {
			return s
		}
	}
	t.Fatalf("no status of %s", node)
	return lab.NodeState{}
}

// TestLabFailover crashes, restarts, pauses and resumes the leader, with
// each node in its own process and with all of them in a shared host.
func TestLabFailover(t *testing.T) {
	for _, hosting := range []topologies.Hosting{topologies.HostingProcess, topologies.HostingShared} {
		t.Run(string(hosting), func(t *testing.T) { testLabFailover(t, hosting) })
	}
}

func testLabFailover(t *testing.T, hosting topologies.Hosting) {
	lb := labStartHosted(t, "star5", hosting)
	var faults []fault.Fault
	var mu sync.Mutex
	lb.Faults().OnFault(func(f fault.Fault) {
		mu.Lock()
		faults = append(faults, f)
		mu.Unlock()
	})

	first := labFirst(t, lb, "n5")
	if len(first.Nodes) != 5 {
		t.Fatalf("first agreement among %v, want all 5", first.Nodes)
	}

	labDo(t)(lb.Faults().Crash("n5"))
	if s := labState(t, lb, "n5"); s.State != lab.ProcCrashed || s.PID != 0 {
		t.Fatalf("after crash, n5 is %s with pid %d", s.State, s.PID)
	}
	crashed := labWait(t, lb, "crash n5", "n4", first.Epoch)
	if slices.Contains(crashed.Nodes, "n5") || len(crashed.Nodes) != 4 {
		t.Fatalf("after crash, agreement among %v, want n1-n4", crashed.Nodes)
	}

	labDo(t)(lb.Faults().Restart(t.Context(), "n5"))
	restarted := labWait(t, lb, "restart n5", "n5", crashed.Epoch)
	labRequireKey(t, lb)

	labDo(t)(lb.Faults().Pause("n5"))
	if s := labState(t, lb, "n5"); s.State != lab.ProcPaused || s.PID == 0 {
		t.Fatalf("after pause, n5 is %s with pid %d", s.State, s.PID)
	}
	paused := labWait(t, lb, "pause n5 (grey failure)", "n4", restarted.Epoch)

	labDo(t)(lb.Faults().Resume("n5"))
	labWait(t, lb, "resume n5", "n5", paused.Epoch)

	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for _, f := range faults {
		kinds = append(kinds, string(f.Kind))
		if f.Time.IsZero() || f.Detail == "" || !slices.Equal(f.Nodes, []string{"n5"}) {
			t.Errorf("fault record %+v lacks a time, detail or its node", f)
		}
	}
	if want := []string{"crash", "restart", "pause", "resume"}; !slices.Equal(kinds, want) {
		t.Errorf("observers saw %v, want %v", kinds, want)
	}
}

func TestLabPartition(t *testing.T) {
	lb := labStart(t, "star5")
	first := labFirst(t, lb, "n5")

	f := labDo(t)(lb.Faults().Partition([][]string{{"n1", "n2", "n3"}, {"n4", "n5"}}, false, ""))
	t.Logf("%s: %s", f.Kind, f.Detail)
	left := labWait(t, lb, "minority side", "n3", first.Epoch, "n1", "n2", "n3")
	right := labWait(t, lb, "majority side", "n5", first.Epoch-1, "n4", "n5")
	if s := labState(t, lb, "n1"); !slices.Equal(s.Blocked, []string{"n4", "n5"}) {
		t.Errorf("n1 blocks %v, want n4 and n5", s.Blocked)
	}
	labDo(t)(lb.Faults().Heal())
	labWait(t, lb, "heal", "n5", max(left.Epoch, right.Epoch))
}

// TestLabOneWayPartition cuts one direction between the leader n5 and the
// rest, each way, and shows that on TCP one direction is enough to split
// the brain (observed on kernel 6.18, star5 timings, 6 s runs):
//
//   - n5 -> rest dropped: the followers stop hearing heartbeats and elect
//     n4 (epoch 2) within ~0.6 s. Their ELECTION frames still reach n5 on
//     connections opened before the cut (data arrives, only the ACKs are
//     lost), so n5 answers into the void, HALTs the lower nodes, gets no
//     HALT_ACK and after its election timeout declares itself leader at
//     epoch 3: two leaders, n5 alone with the higher epoch.
//   - rest -> n5 dropped: n5 hears nothing and stays leader at epoch 1. Its
//     heartbeats reach the followers only until TCP stops sending for want
//     of ACKs (about a congestion window of frames), then the followers
//     elect n4 (epoch 2) within ~0.9 s. n5 never notices.
//
// After the heal n5 takes over everyone again, above n4's epoch, within
// 0.02-0.8 s (when the followers' connections stalled, they must fail and
// be redialled first).
func TestLabOneWayPartition(t *testing.T) {
	for _, dir := range []string{"from-leader", "to-leader"} {
		t.Run(dir, func(t *testing.T) {
			lb := labStart(t, "star5")
			first := labFirst(t, lb, "n5")
			rest := []string{"n1", "n2", "n3", "n4"}
			groups := [][]string{{"n5"}, rest}
			if dir == "to-leader" {
				groups[0], groups[1] = groups[1], groups[0]
			}
			f := labDo(t)(lb.Faults().Partition(groups, true, ""))
			t.Logf("%s: %s", f.Kind, f.Detail)
			blocker, blocked := "n4", []string{"n5"}
			if dir == "to-leader" {
				blocker, blocked = "n5", rest
			}
			if s := labState(t, lb, blocker); !slices.Equal(s.Blocked, blocked) {
				t.Errorf("%s blocks %v, want %v: only receivers block", blocker, s.Blocked, blocked)
			}
			cut := labWait(t, lb, "followers", "n4", first.Epoch, rest...)
			labWait(t, lb, "n5 meanwhile", "n5", first.Epoch-1, "n5")
			labDo(t)(lb.Faults().Heal())
			// n5 may keep the epoch it took alone: above n4's is enough.
			labWait(t, lb, "heal", "n5", cut.Epoch)
		})
	}
}

func TestLabFaultErrors(t *testing.T) {
	netemtest.RequireImpairment(t) // two-site's link is impaired
	lb := labStart(t, "two-site")
	labFirst(t, lb, "n5")
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown node", second(lb.Faults().Crash("n9")), `has no node "n9"`},
		{"resume running", second(lb.Faults().Resume("n1")), "node n1 is running, not paused"},
		{"restart running", second(lb.Faults().Restart(t.Context(), "n1")), "node n1 is running; crash it first"},
		{"one group", second(lb.Faults().Partition([][]string{{"n1"}}, false, "")), "want at least 2 groups"},
		{"overlap", second(lb.Faults().Partition([][]string{{"site-a"}, {"n3", "n4"}}, false, "")), "node n3 is in groups 1 and 2"},
		{"unknown group", second(lb.Faults().Partition([][]string{{"site-x"}, {"n4"}}, false, "")), `no node or group "site-x"`},
		{"one-way of three", second(lb.Faults().Partition([][]string{{"n1"}, {"n2"}, {"n3"}}, true, "")), "exactly 2 groups"},
		{"own peer", second(lb.Faults().Delay("n1", "n1", time.Millisecond, 0)), "its own peer"},
		{"bad loss", second(lb.Faults().Loss("n1", "", 120)), "percentages"},
		{"unknown kind", second(lb.Faults().Apply(t.Context(), fault.Fault{Kind: "explode"})), `unknown fault "explode"`},
		{"cut unknown node", second(lb.Faults().Cut([][2]string{{"n1", "n2"}, {"n3", "n9"}}, false, "")), `cut: run ` + lb.Run() + ` has no node "n9"`},
		{"cut a node from itself", second(lb.Faults().Cut([][2]string{{"n2", "n2"}}, false, "")), "cut: pair 1 names node n2 twice"},
		{"cut nothing", second(lb.Faults().Cut(nil, false, "")), "cut: no node pair given"},
		{"bad mode", second(lb.Faults().Apply(t.Context(), fault.Fault{Kind: fault.Cut, Links: [][2]string{{"n1", "n2"}}, Mode: "rst"})), `cut: mode "rst": want drop or reset`},
		{"mode of a crash", second(lb.Faults().Apply(t.Context(), fault.Fault{Kind: fault.Crash, Nodes: []string{"n1"}, Mode: fault.ModeReset})), "crash: a mode is for partition, isolate and cut"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, c.err, c.want)
		}
	}
}

// TestLabImpairments checks the topology's links reach the Impairers and
// that delay, loss and clear compose with them.
func TestLabImpairments(t *testing.T) {
	netemtest.RequireImpairment(t)
	lb := labStart(t, "two-site")
	labFirst(t, lb, "n5")
	imp := func(node string) string { return labState(t, lb, node).Impairment }
	if got, want := imp("n1"), "to n4,n5: delay 30ms"; got != want {
		t.Errorf("n1 impairment %q, want %q", got, want)
	}
	f := labDo(t)(lb.Faults().Delay("n1", "", 10*time.Millisecond, 2*time.Millisecond))
	if f.Impair == nil || f.Impair.Delay != 10*time.Millisecond {
		t.Errorf("delay fault record %+v", f)
	}
	if got, want := imp("n1"), "delay 10ms±2ms; to n4,n5: delay 40ms±2ms"; got != want {
		t.Errorf("after delay, n1 impairment %q, want %q", got, want)
	}
	labDo(t)(lb.Faults().Loss("n1", "n4", 10))
	if got, want := imp("n1"), "delay 10ms±2ms; to n4: delay 40ms±2ms loss 10%; to n5: delay 40ms±2ms"; got != want {
		t.Errorf("after loss, n1 impairment %q, want %q", got, want)
	}
	if b := labState(t, lb, "n1").Backend; b == "" {
		t.Error("n1 has impairments but no backend")
	}
	if b := labState(t, lb, "n2").Backend; b == "" {
		t.Error("n2 has the topology's 30ms but no backend")
	}
	labDo(t)(lb.Faults().Clear("n1"))
	if got, want := imp("n1"), "to n4,n5: delay 30ms"; got != want {
		t.Errorf("after clear, n1 impairment %q, want %q", got, want)
	}
	// The elections still work across the 30 ms link.
	labDo(t)(lb.Faults().Campaign(t.Context(), "n2"))
	labWait(t, lb, "campaign n2", "n5", 0)
}

// TestLabIsolateLeave isolates, restarts, leaves and joins a node, with each
// node in its own process and with all of them in a shared host.
func TestLabIsolateLeave(t *testing.T) {
	for _, hosting := range []topologies.Hosting{topologies.HostingProcess, topologies.HostingShared} {
		t.Run(string(hosting), func(t *testing.T) { testLabIsolateLeave(t, hosting) })
	}
}

func testLabIsolateLeave(t *testing.T, hosting topologies.Hosting) {
	lb := labStartHosted(t, "star5", hosting)
	first := labFirst(t, lb, "n5")
	labDo(t)(lb.Faults().Isolate("", "n5"))
	isolated := labWait(t, lb, "isolate n5", "n4", first.Epoch, "n1", "n2", "n3", "n4")
	if s := labState(t, lb, "n5"); !s.Isolated || s.State != lab.ProcRunning {
		t.Errorf("isolated n5: %+v", s)
	}
	// A node restarts with its link down as well: a lab whose nodes booted
	// while it was built must not wait for that link.
	labDo(t)(lb.Faults().Crash("n5"))
	labDo(t)(lb.Faults().Restart(t.Context(), "n5"))
	if s := labState(t, lb, "n5"); !s.Isolated || s.State != lab.ProcRunning {
		t.Errorf("n5 restarted while isolated: %+v", s)
	}
	labDo(t)(lb.Faults().Unisolate("n5"))
	// At the epoch n4 leads or above: n5, restarted alone, may have won
	// its own election at that epoch before its link came back, and its
	// ballot (e, n5) is above n4's (e, n4), so all follow it there
	// (seen on a loaded host); otherwise it elects above it.
	back := labWait(t, lb, "unisolate n5", "n5", isolated.Epoch-1)

	labDo(t)(lb.Faults().Leave(t.Context(), "n5"))
	if s := labState(t, lb, "n5"); s.State != lab.ProcExited {
		t.Errorf("after leave, n5 is %s", s.State)
	}
	left := labWait(t, lb, "leave n5", "n4", back.Epoch)
	if f := labDo(t)(lb.Faults().Join(t.Context(), "n5")); f.Kind != fault.Join {
		t.Errorf("join record %+v", f)
	}
	if err := second(lb.Faults().Join(t.Context(), "n5")); err == nil || !strings.Contains(err.Error(), "node n5 is running") {
		t.Errorf("joining a running node: %v", err)
	}
	labWait(t, lb, "n5 joins", "n5", left.Epoch)
	if f := lb.Monitor().Failed(); len(f) != 0 {
		t.Errorf("after leave and join, failed by themselves: %+v", f)
	}

	// A node that cannot save its state stops, by itself: the lab names
	// it and its reason. A directory where n1's state file goes fails its
	// next save, root or not; n4 halting n1, once n5 crashed, makes it
	// save its promise.
	state := filepath.Join(lab.DataRoot(lb.Run()), "n1", "state.json")
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	labDo(t)(lb.Faults().Crash("n5"))
	deadline := time.Now().Add(30 * time.Second)
	for len(lb.Monitor().Failed()) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling the lab's view, with a deadline
	}
	f := lb.Monitor().Failed()
	if len(f) != 1 || f[0].Node != "n1" || !strings.HasPrefix(f[0].Reason, "bullylab: ") || !strings.Contains(f[0].Reason, "n1") {
		t.Errorf("n1 unable to save: failed %+v, want n1 with its reason", f)
	}
}

// TestLabImpairSeveral sets delay and loss on several nodes, and on pairs,
// each as one fault, and checks what the lab reports as in force.
func TestLabImpairSeveral(t *testing.T) {
	netemtest.RequireImpairment(t)
	lb := labStart(t, "star5")
	labFirst(t, lb, "n5")
	var records []fault.Fault
	lb.Faults().OnFault(func(f fault.Fault) { records = append(records, f) })
	imp := func(node string) string { return labState(t, lb, node).Impairment }
	labDo(t)(lb.Faults().DelayNodes([]string{"n1", "n2"}, nil, 20*time.Millisecond, 5*time.Millisecond))
	if len(records) != 1 || !slices.Equal(records[0].Nodes, []string{"n1", "n2"}) {
		t.Fatalf("records %+v, want one delay fault on n1 and n2", records)
	}
	for _, n := range []string{"n1", "n2"} {
		if got, want := imp(n), "delay 20ms±5ms"; got != want {
			t.Errorf("%s impairment %q, want %q", n, got, want)
		}
	}
	if d := lb.Faults().MaxDelay(); d != 25*time.Millisecond {
		t.Errorf("MaxDelay %v, want 25ms", d)
	}
	if lb.Faults().Lossy() {
		t.Error("Lossy with delay alone")
	}
	labDo(t)(lb.Faults().LossNodes([]string{"n3", "n4"}, []string{"n1", "n2"}, 10))
	if got, want := imp("n3"), "to n1,n2: loss 10%"; got != want {
		t.Errorf("n3 impairment %q, want %q", got, want)
	}
	if !lb.Faults().Lossy() {
		t.Error("not Lossy with loss in force")
	}
	if err := second(lb.Faults().LossNodes([]string{"n1"}, []string{"n1"}, 10)); err == nil || !strings.Contains(err.Error(), "its own peer") {
		t.Errorf("own peer: %v", err)
	}
	labDo(t)(lb.Faults().Apply(t.Context(), fault.Fault{Kind: fault.Clear, Nodes: []string{"n3"}, Peers: []string{"n1"}}))
	if got, want := imp("n3"), "to n2: loss 10%"; got != want {
		t.Errorf("after clear n3:n1, n3 impairment %q, want %q", got, want)
	}
	if rec := records[len(records)-1]; rec.Kind != fault.Clear || !slices.Equal(rec.Peers, []string{"n1"}) {
		t.Errorf("clear n3:n1 recorded as %+v", rec)
	}
	if err := second(lb.Faults().ClearPairs([]string{"n1"}, []string{"n3"})); err == nil || !strings.Contains(err.Error(), "clear n1 restores it") {
		t.Errorf("clear n1:n3 with n1 delayed to everyone: %v", err)
	}
	labDo(t)(lb.Faults().Clear())
	if lb.Faults().Lossy() || lb.Faults().MaxDelay() != 0 {
		t.Errorf("after clear: lossy %v, max delay %v", lb.Faults().Lossy(), lb.Faults().MaxDelay())
	}
	// The cluster still elects after the impairments are gone.
	labDo(t)(lb.Faults().Crash("n5"))
	labWait(t, lb, "crash n5", "n4", 0, "n1", "n2", "n3", "n4")
}

func second(_ fault.Fault, err error) error { return err }

// labRequireKey checks that the lab's nodes, restarted ones included, run
// with the run's cluster key file, which state.json records.
// labRequireMemberKeys checks that each node has its own member key, in a
// file of mode 0600 in its data dir, whose public half the peers file
// gives.
func labRequireMemberKeys(t *testing.T, lb *lab.Lab) {
	t.Helper()
	peers, err := node.ReadPeersFile(lb.PeersFile())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range peers.Members {
		name := ""
		for _, s := range lb.Monitor().NodeStates() {
			if s.ID == m.ID {
				name = s.Node
			}
		}
		path := filepath.Join(lab.DataRoot(lb.Run()), name, lab.MemberKeyName)
		priv, err := wire.ReadMemberKeyFile(path) // refuses a mode other than 0600
		if err != nil {
			t.Fatal(err)
		}
		pub := peers.Keys[m.ID]
		if pub == nil || !pub.Equal(priv.Public()) || seen[string(pub)] {
			t.Errorf("node %s: the peers file gives key %x, its own is %x (or another node's)", name, pub, priv.Public())
		}
		seen[string(pub)] = true
	}
}

func labRequireKey(t *testing.T, lb *lab.Lab) {
	t.Helper()
	path := lb.KeyFile()
	if path != netem.KeyPath(lb.Run()) || lb.Testbed().KeyFile() != path {
		t.Fatalf("key file %q (testbed: %q), want %s", path, lb.Testbed().KeyFile(), netem.KeyPath(lb.Run()))
	}
	k, err := wire.ReadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if k != lb.Key() {
		t.Error("the key file does not hold Lab.Key")
	}
	st, err := netem.ReadState(lb.Run())
	if err != nil {
		t.Fatal(err)
	}
	if st.KeyFile != path {
		t.Fatalf("state.json: key file %q", st.KeyFile)
	}
	labRequireMemberKeys(t, lb)
	if lb.Topology().Hosting == topologies.HostingShared {
		// The host reads the key file named in each node's start.
		if len(st.Processes) != 1 || st.Processes[0].Node != "host" || !slices.Contains(st.Processes[0].Argv, "lab-host") {
			t.Fatalf("state.json of a shared host: processes %+v, want the one host", st.Processes)
		}
		return
	}
	if len(st.Processes) != len(lb.Nodes()) {
		t.Fatalf("state.json: %d processes", len(st.Processes))
	}
	for _, p := range st.Processes {
		if i := slices.Index(p.Argv, "--cluster-key"); i < 0 || i+1 >= len(p.Argv) || p.Argv[i+1] != path {
			t.Errorf("node %s runs %v, without --cluster-key %s", p.Node, p.Argv, path)
		}
		want := filepath.Join(lab.DataRoot(lb.Run()), p.Node, lab.MemberKeyName)
		if i := slices.Index(p.Argv, "--member-key"); i < 0 || i+1 >= len(p.Argv) || p.Argv[i+1] != want {
			t.Errorf("node %s runs %v, without --member-key %s", p.Node, p.Argv, want)
		}
	}
	if ls := lb.Status(); ls.KeyFile != path {
		t.Errorf("LabStatus.KeyFile %q, want %s", ls.KeyFile, path)
	}
}
