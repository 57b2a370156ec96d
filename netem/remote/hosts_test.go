//go:build linux

package remote_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"

	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "bullylab-hosts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hostBinDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	labtest.RemoveBinary()
	os.Exit(code)
}

// hostBinDir is where the spans of this package's tests keep the binary
// on their stand-in hosts, which share this machine's files: copied over
// SSH once, not once a test, as a host keeps it between testbeds. The
// copy to three hosts took some 25 s of each span test on a loaded host.
// The tests of the copy itself have directories of their own.
var hostBinDir string

// spanOptions are the options of a span over hs.
func spanOptions(t testing.TB, hs *remotetest.Hosts) remote.SpanOptions {
	return remote.SpanOptions{CheckOptions: remote.CheckOptions{Binary: labtest.Binary(t), BinaryDir: hostBinDir, Dial: hs.DialTCP}}
}

// Each stand-in host is reached over the underlay, by its own sshd, in its
// own namespace.
func TestStandInHosts(t *testing.T) {
	hs := remotetest.StartHosts(t, 3)
	for i, h := range hs.Hosts {
		c, err := hs.Dial(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Output(t.Context(), "ip -o -4 addr show scope global")
		c.Close()
		addr := strings.TrimSuffix(h.SSH, ":22")
		if err != nil || !strings.Contains(string(out), " "+addr+"/24 ") || strings.Count(string(out), "\n") != 1 {
			t.Errorf("host %d (%s): %q, %v: want its underlay address alone", i+1, h.SSH, out, err)
		}
	}
}

// The controller's binary is copied to each host once, and the agent it
// starts there answers; the hosts share this machine's clock, so each
// measured offset's interval holds 0, within a bound of a few milliseconds.
func TestAgentClock(t *testing.T) {
	hs := remotetest.StartHosts(t, 2)
	bin := labtest.Binary(t)
	for _, h := range hs.Hosts {
		c, err := hs.Dial(t.Context(), h)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		remoteBin := filepath.Join(t.TempDir(), "bullylab")
		if copied, err := c.EnsureFile(t.Context(), bin, remoteBin); err != nil || !copied {
			t.Fatalf("%s: copying the binary: copied %v, %v", h.Name, copied, err)
		}
		a, err := c.StartAgent(t.Context(), remoteBin)
		if err != nil {
			t.Fatal(err)
		}
		info, err := a.Hello()
		if err != nil || info.Version == "" || info.Kernel == "" {
			t.Fatalf("%s: hello: %+v, %v", h.Name, info, err)
		}
		off, err := a.ClockOffset(20)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: agent %s on kernel %s, clock offset %v", h.Name, info.Version, info.Kernel, off)
		if off.Bound <= 0 || off.Bound > 50*time.Millisecond || off.Offset-off.Bound > 0 || off.Offset+off.Bound < 0 {
			t.Errorf("%s: offset %v on the same clock: want an interval holding 0, bound under 50ms", h.Name, off)
		}
		if err := a.Close(); err != nil {
			t.Errorf("%s: closing the agent: %v", h.Name, err)
		}
	}
}

// Check reaches every host, copies the binary once, and finds each fit to
// run a testbed, with a clock offset whose interval holds 0 (one clock).
func TestCheck(t *testing.T) {
	hs := remotetest.StartHosts(t, 3)
	opts := remote.CheckOptions{Binary: labtest.Binary(t), BinaryDir: t.TempDir(), Dial: hs.DialTCP}
	first := remote.Check(t.Context(), hs.Hosts, opts)
	for i, r := range first {
		if r.Err != nil || r.Unfit != "" || r.Agent.Kernel == "" || r.Backend == "" {
			t.Fatalf("host %d: %+v", i+1, r)
		}
		if r.Clock.Offset-r.Clock.Bound > 0 || r.Clock.Offset+r.Clock.Bound < 0 {
			t.Errorf("%s: clock offset %v on one clock", r.Host.Name, r.Clock)
		}
	}
	// The stand-in hosts share a file system: the first to copy wins.
	copies := 0
	for _, r := range first {
		if r.Copied {
			copies++
		}
	}
	if copies < 1 {
		t.Errorf("no host had the binary copied")
	}
	for _, r := range remote.Check(t.Context(), hs.Hosts, opts) {
		if r.Err != nil || r.Copied {
			t.Errorf("second check of %s: copied %v, %v", r.Host.Name, r.Copied, r.Err)
		}
	}
	opts.Version = "not-this-one"
	if r := remote.Check(t.Context(), hs.Hosts[:1], opts)[0]; r.Err == nil || !strings.Contains(r.Err.Error(), `the controller's is "not-this-one"`) {
		t.Errorf("version mismatch: %v", r.Err)
	}
}

// A topology across three stand-in hosts, each share built by its agent,
// is one network; closing the span leaves nothing, and a host whose SSH
// connection is lost tears its share down by itself.
func TestSpan(t *testing.T) {
	hs := remotetest.StartHosts(t, 3)
	file := hs.Topology("nodes: 6\n")
	topo, err := topologies.Parse("span.yaml", file)
	if err != nil {
		t.Fatal(err)
	}
	opts := spanOptions(t, hs)
	sp, err := remote.BuildSpan(t.Context(), topo, "span.yaml", file, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sp.Close()
		netemtest.RequireClean(t, sp.Run())
	})
	ns := func(node string) string {
		n, _ := topo.Node(node)
		k := slices.IndexFunc(topo.Hosts, func(h topologies.Host) bool { return h.Name == n.Host })
		return netem.NodeNamespace(sp.Runs[k], node)
	}
	// Every node reaches a node of each other host.
	for _, pair := range [][2]string{{"n1", "n2"}, {"n2", "n3"}, {"n3", "n1"}, {"n4", "n6"}} {
		from, to := pair[0], pair[1]
		a, _ := topo.Node(from)
		b, _ := topo.Node(to)
		if a.Host == b.Host {
			t.Fatalf("%s and %s are both on %s", from, to, a.Host)
		}
		remotetest.Connect(t, ns(from), ns(to), b.Addr)
	}
	// The first host's connection ends: its agent sees its input end and
	// tears the share down.
	if err := sp.CloseHost(0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for netemtest.CountLeftovers(t, sp.Runs[0]).Namespaces > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("host h1's share still has namespaces 30s after its connection ended")
		}
		time.Sleep(50 * time.Millisecond) // polling the namespaces, with a deadline
	}
	if err := sp.Close(); err != nil {
		t.Errorf("closing the span: %v", err)
	}
}

// The nodes of a span, started by the agents, elect one leader across the
// hosts: the node with the highest ID, the last in topology order,
// whichever host runs it; when it crashes, the next highest.
//
// Each host captures its own nodes from before any host's first node
// starts; the merged capture shows the boot election and every frame
// verifiable with the cluster key, in time order, and the crash's
// election as on one host: the next highest leads, after exactly N-2
// HALTs, HALT_ACKs and COORDINATORs, and the time to it is known within
// the merged clocks' bound.
func TestSpanElects(t *testing.T) {
	start := time.Now()
	path := filepath.Join(t.TempDir(), "span.pcapng")
	topo, sp := startElectingSpan(t, path)
	first := waitAgreed(t, sp, "n6", "")
	t.Logf("6 nodes over 3 hosts agree on the highest at epoch %d, %v after the span began", first, time.Since(start).Round(time.Millisecond))

	// The leader crashes on its host; the next highest, on whichever
	// host, takes over under a new epoch.
	crashed := time.Now()
	rec, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Crash, Nodes: []string{"n6"}})
	if err != nil {
		t.Fatal(err)
	}
	if rec.InForce.Before(rec.Time) || rec.Time.Before(crashed.Add(-time.Second)) {
		t.Errorf("crash record from %v in force %v: want in force after begun, begun about now", rec.Time, rec.InForce)
	}
	if epoch := waitAgreed(t, sp, "n5", "n6"); epoch <= first {
		t.Errorf("new leader at epoch %d, not above %d", epoch, first)
	}
	n6, _ := topo.Node("n6")
	n5, _ := topo.Node("n5")
	t.Logf("leader n6 on %s crashed; n5 on %s leads the other 5, %v later", n6.Host, n5.Host, time.Since(crashed).Round(time.Millisecond))

	stats, err := sp.StopCapture()
	if err != nil {
		t.Fatal(err)
	}
	sc := sp.Captured()
	for _, h := range sc.Merge.Hosts {
		t.Logf("%s: clock %+v ± %v (measured %+v ± %v; %d acknowledgements)", h.Name, time.Duration(h.OffsetNS), time.Duration(h.BoundNS),
			time.Duration(h.MeasuredNS), time.Duration(h.MeasuredBoundNS), h.Acks)
		if h.Acks == 0 || h.BoundNS > h.MeasuredBoundNS {
			t.Errorf("%s: no tighter than measured", h.Name)
		}
	}
	rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{Key: &[]wire.Key{sp.Key()}[0]})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Auth == nil {
		t.Fatal("merged capture: no authenticated frames")
	}
	order := fileOrder(t, path)
	t.Logf("merged capture: %d frames, %d verified with the key, %d unverified, %d HELLOs, %d streams without HELLO; %d packets out of order, %d before the testbed record",
		rep.Frames, rep.Auth.Verified, rep.Auth.Unverified, rep.Messages.Hello, rep.Auth.WithoutHello, order.outOfOrder, order.beforeStart)
	// Every host captured before any node started: every connection's
	// HELLO is in the file, so every frame verifies with the key, and the
	// file is in time order from its start.
	if stats.Drops != 0 || rep.Auth.Failed != 0 || rep.Auth.Frames == 0 {
		t.Errorf("capture: %+v, auth %+v", stats, rep.Auth)
	}
	if rep.Auth.Verified != rep.Frames || rep.Auth.Unverified != 0 || rep.Auth.WithoutHello != 0 || rep.Messages.Hello == 0 {
		t.Errorf("%d of %d frames verified, %d HELLOs, %d streams without one: want every frame verified", rep.Auth.Verified, rep.Frames, rep.Messages.Hello, rep.Auth.WithoutHello)
	}
	if order.outOfOrder != 0 || order.beforeStart != 0 {
		t.Errorf("merged capture: %d packets out of order, %d before its start", order.outOfOrder, order.beforeStart)
	}
	if len(rep.Elections) == 0 || rep.Elections[0].First.Reason != "boot" || rep.Elections[0].Leader != "n6" {
		t.Errorf("the merged capture's first election: %+v; want the boot election, won by n6", rep.Elections)
	}
	var el *capture.Election
	for i := range rep.Elections {
		if rep.Elections[i].Trigger.Kind == string(fault.Crash) {
			el = &rep.Elections[i]
		}
	}
	if el == nil || el.Leader != "n5" || !el.Converged || el.TimeToLeaderNS == nil {
		t.Fatalf("the merged capture's crash election: %+v (elections %d)", el, len(rep.Elections))
	}
	if m := el.Messages; m.Halt != 4 || m.HaltAck != 4 || m.Coordinator != 4 {
		t.Errorf("crash election messages %+v: want 4 HALT, HALT_ACK and COORDINATOR", m)
	}
	if rep.ClockErrorNS <= 0 || rep.ClockErrorNS != int64(sc.Merge.ErrorBound) {
		t.Errorf("report's clock error %d ns, merge's %v", rep.ClockErrorNS, sc.Merge.ErrorBound)
	}
	t.Logf("merged capture: time to leader %v ± %v, detection %v", time.Duration(*el.TimeToLeaderNS), sc.Merge.ErrorBound, time.Duration(*el.DetectionNS))
}

// A shared topology across hosts boots as on one host, held: every node
// of every host starts held but the highest, which boots alone once all
// listen, so the whole span boots in one election of exactly N-1 HALTs,
// HALT_ACKs and COORDINATORs, no ELECTION or ANSWER, and no other
// election, where each host booting its own highest would start three.
func TestSpanHeldBoot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "span.pcapng")
	_, sp := startSpan(t, "nodes: 9\nhosting: shared\nsettings: {heartbeat: 100ms, failure_timeout: 500ms, election_timeout: 300ms}\n", path)
	epoch := waitAgreed(t, sp, "n9", "")
	if _, err := sp.StopCapture(); err != nil {
		t.Fatal(err)
	}
	rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{Key: &[]wire.Key{sp.Key()}[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Elections) != 1 {
		t.Fatalf("%d elections in the capture, want the boot's alone: %+v", len(rep.Elections), rep.Elections)
	}
	el := rep.Elections[0]
	if el.First.Reason != "boot" || el.Leader != "n9" || !el.Converged || el.Epoch != epoch {
		t.Errorf("boot election %+v: want n9's boot election, converged at epoch %d", el, epoch)
	}
	if m := rep.Messages; m.Halt != 8 || m.HaltAck != 8 || m.Coordinator != 8 || m.Election != 0 || m.Answer != 0 || m.Reject != 0 {
		t.Errorf("messages %+v: want 8 HALT, HALT_ACK and COORDINATOR, no ELECTION, ANSWER or REJECT", m)
	}
}

// waitAgreed polls sp until its running nodes agree on leader, and
// returns the epoch; it fails the test on another agreed leader than
// leader or gone, the one the nodes follow until they detect its crash,
// or after 30 s.
func waitAgreed(t *testing.T, sp *remote.Span, leader, gone string) uint64 {
	t.Helper()
	return pollSpan(t, sp, "agreement on "+leader, func(states []lab.NodeState) (uint64, bool) {
		ag, ok := lab.Agreement(states)
		got, epoch := ag.Node, ag.Epoch
		if ok && got != gone && got != leader {
			t.Fatalf("the nodes agree on %s at epoch %d, want %s", got, epoch, leader)
		}
		return epoch, ok && got == leader
	})
}

// pollSpan reads sp's nodes until done says so, and returns what it
// returned; it fails the test after 30 s.
func pollSpan(t *testing.T, sp *remote.Span, what string, done func([]lab.NodeState) (uint64, bool)) uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		states, err := sp.Status()
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := done(states); ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s 30s in: %+v", what, states)
		}
		time.Sleep(50 * time.Millisecond) // polling the agents, with a deadline
	}
}

// A partition between whole hosts, named by their hosts entries: the
// nodes of the first host are cut from the nodes of the other two. Each
// side agrees on its own highest; once healed, all six agree on the
// highest again, under a new epoch.
func TestSpanPartitionHosts(t *testing.T) {
	topo, sp := startElectingSpan(t)
	var first, rest []string
	for _, n := range topo.Nodes {
		if n.Host == topo.Hosts[0].Name {
			first = append(first, n.Name)
		} else {
			rest = append(rest, n.Name)
		}
	}
	all := append(slices.Clone(first), rest...)
	before := waitAgreedAmong(t, sp, all, "n6")
	cut := time.Now()
	rec, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Partition, Groups: [][]string{{topo.Hosts[0].Name}, {topo.Hosts[1].Name, topo.Hosts[2].Name}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Groups[0], first) || !slices.Equal(rec.Groups[1], rest) {
		t.Errorf("partition record's groups %v: want %v and %v", rec.Groups, first, rest)
	}
	// The side without the leader elects its own highest; the other keeps
	// or re-elects its own.
	waitAgreedAmong(t, sp, first, highest(first))
	waitAgreedAmong(t, sp, rest, highest(rest))
	t.Logf("host %s cut from the other two: both sides lead themselves %v later", topo.Hosts[0].Name, time.Since(cut).Round(time.Millisecond))
	healed := time.Now()
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Heal}); err != nil {
		t.Fatal(err)
	}
	if epoch := waitAgreedAmong(t, sp, all, "n6"); epoch <= before {
		t.Errorf("after healing, epoch %d, not above %d", epoch, before)
	}
	t.Logf("healed: all six follow the highest again %v later", time.Since(healed).Round(time.Millisecond))
}

// highest is the highest of nodes n1..n9: the last in topology order.
func highest(names []string) string { return slices.Max(names) }

// waitAgreedAmong polls sp until the nodes named agree on leader, and
// returns their epoch; it fails the test after 30 s.
func waitAgreedAmong(t *testing.T, sp *remote.Span, names []string, leader string) uint64 {
	t.Helper()
	return pollSpan(t, sp, fmt.Sprintf("agreement of %v on %s", names, leader), func(states []lab.NodeState) (uint64, bool) {
		var among []lab.NodeState
		for _, s := range states {
			if slices.Contains(names, s.Node) {
				among = append(among, s)
			}
		}
		ag, ok := lab.Agreement(among)
		return ag.Epoch, ok && ag.Node == leader
	})
}

// startElectingSpan builds 6 nodes over three stand-in hosts, and closes
// it, checking nothing is left, when the test ends.
func startElectingSpan(t *testing.T, capturePath ...string) (*topologies.Topology, *remote.Span) {
	t.Helper()
	return startSpan(t, "nodes: 6\nsettings: {heartbeat: 100ms, failure_timeout: 500ms, election_timeout: 300ms}\n", capturePath...)
}

// startSpan builds the topology head over three stand-in hosts, and
// closes it, checking nothing is left, when the test ends.
func startSpan(t *testing.T, head string, capturePath ...string) (*topologies.Topology, *remote.Span) {
	t.Helper()
	hs := remotetest.StartHosts(t, 3)
	file := hs.Topology(head)
	topo, err := topologies.Parse("six.yaml", file)
	if err != nil {
		t.Fatal(err)
	}
	opts := spanOptions(t, hs)
	if len(capturePath) > 0 {
		opts.Capture = capturePath[0]
	}
	sp, err := remote.BuildSpan(t.Context(), topo, "six.yaml", file, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sp.Close(); err != nil {
			t.Errorf("closing the span: %v", err)
		}
		netemtest.RequireClean(t, sp.Run())
	})
	return topo, sp
}

// The leader pauses (SIGSTOP, a node that hangs) on its host: the other
// five elect the next highest; once it resumes, all six follow it again
// under a new epoch.
func TestSpanPause(t *testing.T) {
	topo, sp := startElectingSpan(t)
	first := waitAgreed(t, sp, "n6", "")
	paused := time.Now()
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Pause, Nodes: []string{"n6"}}); err != nil {
		t.Fatal(err)
	}
	second := waitAgreed(t, sp, "n5", "n6")
	n6, _ := topo.Node("n6")
	t.Logf("leader n6 on %s paused: the other five follow the next highest %v later", n6.Host, time.Since(paused).Round(time.Millisecond))
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Resume, Nodes: []string{"n6"}}); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	third := pollSpan(t, sp, "agreement on the resumed leader", func(states []lab.NodeState) (uint64, bool) {
		ag, ok := lab.Agreement(states)
		return ag.Epoch, ok && ag.Node == "n6" && ag.Epoch > second
	})
	if !(first < second && second < third) {
		t.Errorf("epochs %d, %d, %d: want each above the one before", first, second, third)
	}
	t.Logf("resumed: all six follow n6 again at epoch %d, %v later", third, time.Since(resumed).Round(time.Millisecond))
}

// Delay and loss on a host-to-host link, named by hosts: what the first
// host's nodes send to the second's is delayed, at the senders, and what
// the second's send to the first's is lost, at the receivers (another
// host's lab applies it); the third host's links are untouched. Clearing
// the second host's pair with the first, by the hosts' names, lifts the
// loss and keeps the delay; clear puts the topology's links back.
func TestSpanImpairHosts(t *testing.T) {
	topo, sp := startElectingSpan(t)
	h1, h2, h3 := topo.Hosts[0].Name, topo.Hosts[1].Name, topo.Hosts[2].Name
	on := func(host string) topologies.Node {
		i := slices.IndexFunc(topo.Nodes, func(n topologies.Node) bool { return n.Host == host })
		return topo.Nodes[i]
	}
	a, b, c := on(h1), on(h2), on(h3)
	ns := func(n topologies.Node) string {
		k, _ := sp.HostOf(n.Name)
		return netem.NodeNamespace(sp.Runs[k], n.Name)
	}
	const delay = 400 * time.Millisecond
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Delay, Nodes: []string{h1}, Peers: []string{h2}, Impair: &fault.Impairment{Delay: delay}}); err != nil {
		t.Fatal(err)
	}
	if rtt, err := remotetest.ConnectTime(t, ns(a), ns(b), b.Addr, 5*time.Second); err != nil || rtt < delay {
		t.Errorf("%s (%s) to %s (%s): connect took %v, %v: want at least the link's %v", a.Name, h1, b.Name, h2, rtt, err, delay)
	}
	if rtt, err := remotetest.ConnectTime(t, ns(a), ns(c), c.Addr, 5*time.Second); err != nil || rtt >= delay {
		t.Errorf("%s (%s) to %s (%s): connect took %v, %v: want under %v, that link is not delayed", a.Name, h1, c.Name, h3, rtt, err, delay)
	}
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Loss, Nodes: []string{h2}, Peers: []string{h1}, Impair: &fault.Impairment{Loss: 100}}); err != nil {
		t.Fatal(err)
	}
	// The SYN-ACK from the second host is lost at the first.
	if rtt, err := remotetest.ConnectTime(t, ns(a), ns(b), b.Addr, 2*time.Second); err == nil {
		t.Errorf("%s to %s connected in %v, with everything %s sends %s lost", a.Name, b.Name, rtt, h2, h1)
	}
	states, err := sp.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.Node == b.Name && !strings.Contains(s.Impairment, "loss 100%") {
			t.Errorf("%s's impairment %q: want its loss to %s", b.Name, s.Impairment, h1)
		}
	}
	rec, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Clear, Nodes: []string{h2}, Peers: []string{h1}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rec.Nodes, b.Name) || !slices.Contains(rec.Peers, a.Name) || slices.Contains(rec.Peers, c.Name) {
		t.Errorf("clear %s:%s recorded nodes %v peers %v: want %s's nodes to %s's", h2, h1, rec.Nodes, rec.Peers, h2, h1)
	}
	if rtt, err := remotetest.ConnectTime(t, ns(a), ns(b), b.Addr, 5*time.Second); err != nil || rtt < delay {
		t.Errorf("after clear %s:%s, %s to %s: connect took %v, %v: want it through, the delay of %v kept", h2, h1, a.Name, b.Name, rtt, err, delay)
	}
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Clear}); err != nil {
		t.Fatal(err)
	}
	if rtt, err := remotetest.ConnectTime(t, ns(a), ns(b), b.Addr, 5*time.Second); err != nil || rtt >= delay {
		t.Errorf("after clear, %s to %s: connect took %v, %v: want under %v", a.Name, b.Name, rtt, err, delay)
	}
}

// A cut in mode reset between nodes of two hosts goes through the span
// like a partition: every host applies it, each receiver blocks the other
// end of the pair as the mode says, the record keeps links and mode, and
// heal removes it.
func TestSpanCut(t *testing.T) {
	topo, sp := startElectingSpan(t)
	var all []string
	for _, n := range topo.Nodes {
		all = append(all, n.Name)
	}
	waitAgreedAmong(t, sp, all, "n6")
	leader, _ := topo.Node("n6")
	var other string
	for _, n := range topo.Nodes {
		if n.Host != leader.Host {
			other = n.Name
			break
		}
	}
	links := [][2]string{{"n6", other}}
	rec, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Cut, Links: links, Mode: fault.ModeReset})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Links, links) || rec.Mode != fault.ModeReset || rec.Detail == "" {
		t.Errorf("cut record %+v, want links %v in mode reset, with a detail", rec, links)
	}
	t.Logf("cut record: %s", rec.Detail)
	blocked := func(want map[string][]string) {
		t.Helper()
		states, err := sp.Status()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range states {
			if !slices.Equal(s.Blocked, want[s.Node]) {
				t.Errorf("%s blocks %v, want %v", s.Node, s.Blocked, want[s.Node])
			}
		}
	}
	blocked(map[string][]string{"n6": {other}, other: {"n6"}})
	if _, err := sp.Apply(t.Context(), fault.Fault{Kind: fault.Heal}); err != nil {
		t.Fatal(err)
	}
	blocked(nil)
	waitAgreedAmong(t, sp, all, "n6")
}

// captureOrder is how a capture file's packets are ordered.
type captureOrder struct {
	// outOfOrder counts the packets stamped before the packet ahead of
	// them; beforeStart those stamped before the testbed record.
	outOfOrder, beforeStart int
}

// fileOrder reads the capture at path for its packets' order.
func fileOrder(t *testing.T, path string) captureOrder {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := capture.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var o captureOrder
	var start, last time.Time
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return o
		}
		if err != nil {
			t.Fatal(err)
		}
		ts := p.CI.Timestamp
		if p.Record != nil && p.Record.Kind == capture.KindTestbed {
			start = ts
		}
		if ts.Before(last) {
			o.outOfOrder++
		}
		if !start.IsZero() && ts.Before(start) || start.IsZero() && p.Record == nil {
			o.beforeStart++
		}
		last = ts
	}
}
