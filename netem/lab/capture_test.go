//go:build linux

package lab_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/capture/capturetest"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/gopacket/gopacket"
)

// capturePhase bounds one election phase of the capture tests; star5
// elects in about a second.
const capturePhase = 30 * time.Second

func waitLeader(t *testing.T, lb *lab.Lab, leader string, among ...string) lab.Leader {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), capturePhase)
	defer cancel()
	ag, err := lb.Monitor().WaitLeaderAmong(ctx, among, func(l lab.Leader) bool { return l.Node == leader })
	if err != nil {
		t.Fatalf("waiting for %s to lead %v: %v", leader, among, err)
	}
	return ag
}

// heartbeats is how many HEARTBEATs a leader sends before the test moves
// on: enough for the counts to prove something, few enough to be quick
// (four followers get one each 100 ms in star5).
const heartbeats = 40

// waitHeartbeats waits until leader has counted n HEARTBEATs sent.
func waitHeartbeats(t *testing.T, lb *lab.Lab, leader string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(capturePhase)
	for {
		for _, s := range lb.Monitor().NodeStates() {
			if s.Node == leader && s.View != nil && s.View.Counters.Sent[wire.TypeHeartbeat.String()] >= n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sent fewer than %d HEARTBEATs in %v", leader, n, capturePhase)
		}
		time.Sleep(10 * time.Millisecond) // a poll interval: the deadline bounds the wait
	}
}

// TestLabCapture captures a star5 lab from before its nodes start: boot,
// a crash of the leader, a new leader, the old leader restarted and back
// in charge, then every node leaving. Leaving is the cut: a node that
// leaves flushes its transport, closes it and logs its final counters
// (node_counters), so those must equal the frames the capture holds from
// it, type by type. The crashed incarnation of n5 has no final counters;
// its second one is compared with n5's frames after the restart record.
func TestLabCapture(t *testing.T) {
	bin := labtest.Binary(t)
	topo, err := topologies.Load("star5")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "star5.pcapng")
	logDir := filepath.Join(dir, "logs")
	lb := labtest.Boot(t, topo, lab.BootOptions{Binary: bin, LogDir: logDir,
		Capture: &lab.CaptureOptions{Path: path, FromBoot: true}})
	lc := lb.Capture()
	names := lb.Nodes()
	start := time.Now()
	waitLeader(t, lb, "n5", names...)
	crash, err := lb.Faults().Crash("n5")
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, lb, "n4", names[:4]...)
	waitHeartbeats(t, lb, "n4", heartbeats)
	restart, err := lb.Faults().Restart(t.Context(), "n5")
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, lb, "n5", names...)
	waitHeartbeats(t, lb, "n5", heartbeats)
	leave, err := lb.Faults().Leave(t.Context(), names...)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := lc.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := lc.Stop(); again != stats || err != nil {
		t.Errorf("second Stop: %+v, %v; the first returned %+v", again, err, stats)
	}
	// The lab outlives the capture: this fault must not reach the file
	// (the records subtest lists what is there).
	if _, err := lb.Faults().Heal(); err != nil {
		t.Fatal(err)
	}
	t.Logf("scenario %v; capture: %d packets written, socket accepted %d frames, %d dropped, %d freezes, %d late, %d unmatched, %d wrong source",
		time.Since(start).Round(time.Millisecond), stats.Written, stats.Packets, stats.Drops, stats.Freezes, stats.Late, stats.Unmatched, stats.WrongSource)
	if stats.Drops != 0 || stats.Freezes != 0 {
		// A drop makes the counts below differ; say so first.
		t.Errorf("the capture lost frames: %d dropped, %d queue freezes", stats.Drops, stats.Freezes)
	}

	rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Capture == nil || rep.Capture.Drops != stats.Drops || rep.Capture.Packets != stats.Packets {
		t.Errorf("end record %+v, Stop returned %+v", rep.Capture, stats)
	}

	t.Run("records", func(t *testing.T) {
		var got []string
		for _, r := range rep.Records {
			if r.Kind != capture.KindTestbed && r.Kind != capture.KindEnd {
				got = append(got, fmt.Sprintf("%s %s %s", r.Time.Format(time.RFC3339Nano), r.Kind, strings.Join(r.Nodes, ",")))
			}
		}
		var want []string
		for _, f := range []fault.Fault{crash, restart, leave} {
			want = append(want, fmt.Sprintf("%s %s %s", f.Time.Format(time.RFC3339Nano), f.Kind, strings.Join(f.Nodes, ",")))
		}
		if !slices.Equal(got, want) {
			t.Errorf("fault records\n%s\nwant the faults as applied\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("counters", func(t *testing.T) {
		// Frames from n5 before its restart are its crashed incarnation's.
		since := map[string]time.Time{"n5": restart.Time}
		onWire, err := capture.CountSent(path, func(n string, at time.Time) bool { return !at.Before(since[n]) })
		if err != nil {
			t.Fatal(err)
		}
		var heartbeats uint64
		for _, n := range names {
			counted, err := capturetest.FinalCounters(filepath.Join(logDir, n+".log"))
			if err != nil {
				t.Fatalf("node %s: %v", n, err)
			}
			heartbeats += counted[wire.TypeHeartbeat.String()]
			if !sameCounts(counted, onWire[n]) {
				t.Errorf("node %s counted %v sent, the capture holds %v from it", n, counted, onWire[n])
			} else {
				t.Logf("node %s: counters and capture agree: %v", n, counted)
			}
		}
		if heartbeats == 0 {
			t.Error("no node counted a HEARTBEAT: the comparison proves nothing")
		}
	})

	t.Run("signed HELLOs", func(t *testing.T) {
		key := lb.Key()
		rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{Key: &key})
		if err != nil {
			t.Fatal(err)
		}
		if a := rep.Auth; a == nil || a.Failed != 0 || a.Verified == 0 || a.Streams == 0 {
			t.Fatalf("analyze with the cluster key: %+v", a)
		}
		peers, err := node.ReadPeersFile(lb.PeersFile())
		if err != nil {
			t.Fatal(err)
		}
		if len(peers.Keys) != len(names) {
			t.Fatalf("the peers file gives %d member keys for %d nodes", len(peers.Keys), len(names))
		}
		hellos := captureHellos(t, path)
		if len(hellos) != int(rep.Auth.Streams) {
			t.Errorf("%d HELLOs dissected, analyze opened %d streams with one", len(hellos), rep.Auth.Streams)
		}
		for _, h := range hellos {
			if err := h.CheckSignature(); err != nil {
				t.Errorf("packet %d: %v", h.packet, err)
			} else if want := wire.EncodePublicKey(peers.Keys[h.From]); h.PublicKey() != want {
				t.Errorf("packet %d: HELLO from %s signed by %s, the peers file gives %s", h.packet, h.From, h.PublicKey(), want)
			}
		}
	})

	t.Run("tshark", func(t *testing.T) {
		tshark := capturetest.RequireTshark(t)
		got, _ := capturetest.Types(t, tshark, filepath.Join("..", "..", "scripts", "bullylab.lua"), path, capturetest.TsharkOptions...)
		var total int64
		for ty, n := range got {
			total += n
			if !ty.Valid() {
				t.Errorf("tshark found %d frames of type %d", n, ty)
			}
		}
		for _, ty := range wire.Types {
			if got[ty] != rep.Messages.Get(ty) {
				t.Errorf("%s: tshark found %d, bullylab analyze %d", ty, got[ty], rep.Messages.Get(ty))
			}
		}
		if total != rep.Frames {
			t.Errorf("tshark found %d frames, bullylab analyze %d", total, rep.Frames)
		}
		t.Logf("%d packets, %d frames; tshark and analyze agree: %+v", rep.Packets, rep.Frames, rep.Messages)
	})
}

// capturedHello is a HELLO of a capture, in the packet that completed it.
type capturedHello struct {
	capture.Bullylab
	packet int64
}

// captureHellos returns the HELLOs of the capture at path.
func captureHellos(t *testing.T, path string) []capturedHello {
	t.Helper()
	h := &helloCollector{}
	dissectCapture(t, path, h)
	return h.hellos
}

// readCapture opens the capture at path for reading until the test ends.
func readCapture(t *testing.T, path string) *capture.FileReader {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	rd, err := capture.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	return rd
}

// dissectCapture hands h the frames of the capture at path, dissected as
// the analysis does.
func dissectCapture(t *testing.T, path string, h capture.Handler) {
	t.Helper()
	rd := readCapture(t, path)
	d := capture.NewDissector(h, capture.DissectorOptions{})
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Record != nil || p.Iface == nil || p.Iface.Events {
			continue
		}
		ci := p.CI
		d.Packet(p.Num, p.Iface.LinkType, p.Data, &ci)
	}
	d.Flush()
}

type helloCollector struct{ hellos []capturedHello }

func (c *helloCollector) Frame(f *capture.Frame) {
	if f.Msg.Type != wire.TypeHello {
		return
	}
	var l capture.Bullylab
	if err := l.DecodeFromBytes(wire.Append(nil, &f.Msg), gopacket.NilDecodeFeedback); err == nil {
		c.hellos = append(c.hellos, capturedHello{l, f.Packet})
	}
}

func (c *helloCollector) StreamError(*capture.StreamError) {}

// sameCounts reports whether the node's counters and the capture's counts are
// the same, a missing type counting as 0.
func sameCounts(counted map[string]uint64, seen map[string]uint64) bool {
	for k, v := range counted {
		if seen[k] != v {
			return false
		}
	}
	for k, v := range seen {
		if counted[k] != v {
			return false
		}
	}
	return true
}

// TestLabFaultsInForce checks what the capture analysis needs to judge
// faults and time messages: every fault comes back, and reaches the
// capture, with the time its change was in force, no earlier than the
// time it began; and the capture's testbed record says how to read the
// nodes' TCP timestamps.
func TestLabFaultsInForce(t *testing.T) {
	lb, path := labCaptured(t, "star3", "", false)
	gone := map[int]bool{} // crashed PIDs, as observers saw them
	lb.Faults().OnFault(func(f fault.Fault) {
		if f.Kind != fault.Crash {
			return
		}
		for _, s := range strings.Fields(strings.TrimPrefix(f.Detail, "SIGKILL to process ")) {
			pid, _ := strconv.Atoi(strings.TrimSuffix(s, ","))
			gone[pid] = syscall.Kill(pid, 0) == syscall.ESRCH
		}
	})

	applied := []fault.Fault{
		labDo(t)(lb.Faults().Crash("n1")),
		labDo(t)(lb.Faults().Pause("n2")),
		labDo(t)(lb.Faults().Resume("n2")),
		labDo(t)(lb.Faults().Partition([][]string{{"n2"}, {"n3"}}, false, "")),
		labDo(t)(lb.Faults().Heal()),
	}
	for _, f := range applied {
		if f.InForce.IsZero() || f.InForce.Before(f.Time) {
			t.Errorf("%s %v: began %v, in force %v; want in force no earlier than it began", f.Kind, f.Nodes, f.Time, f.InForce)
		}
	}
	if len(gone) != 1 {
		t.Errorf("the crash record names processes %v, want one", gone)
	}
	for pid, ok := range gone {
		if !ok {
			t.Errorf("process %d of n1 was still there when the crash was recorded in force", pid)
		}
	}
	if _, err := lb.Capture().Stop(); err != nil {
		t.Fatal(err)
	}

	rd := readCapture(t, path)
	var recs []*capture.Record
	for {
		p, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Record != nil {
			recs = append(recs, p.Record)
		}
	}
	if len(recs) == 0 || recs[0].Testbed == nil {
		t.Fatal("the capture has no testbed record first")
	}
	clock := recs[0].Testbed.Clock
	unit := lb.Testbed().TCPTimestampUnit()
	offset, offsetErr, err := netem.MonotonicOffset()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case clock == nil:
		t.Errorf("the testbed record has no clock; the testbed's TSval unit is %v", unit)
	case clock.TSUnitNS != unit.Nanoseconds() || unit == 0:
		t.Errorf("the testbed record's TSval unit is %dns, the testbed's %v", clock.TSUnitNS, unit)
	case clock.OffsetErrorNS <= 0 || clock.OffsetErrorNS > int64(time.Millisecond):
		t.Errorf("the testbed record's clock offset error is %dns, want within (0, 1ms]", clock.OffsetErrorNS)
	case (time.Duration(clock.MonotonicOffsetNS) - offset).Abs() > offsetErr+time.Duration(clock.OffsetErrorNS)+time.Millisecond:
		t.Errorf("the testbed record's clock offset is %dns, now it is %v ± %v", clock.MonotonicOffsetNS, offset, offsetErr)
	default:
		t.Logf("testbed clock: %+v", *clock)
	}

	var got []string
	for _, r := range recs[1:] {
		if r.Kind == capture.KindEnd {
			continue
		}
		got = append(got, fmt.Sprintf("%s %v %s %s", r.Kind, r.Nodes, r.Time.Format(time.RFC3339Nano), r.InForce.Format(time.RFC3339Nano)))
	}
	var want []string
	for _, f := range applied {
		want = append(want, fmt.Sprintf("%s %v %s %s", f.Kind, f.Nodes, f.Time.Format(time.RFC3339Nano), f.InForce.Format(time.RFC3339Nano)))
	}
	if !slices.Equal(got, want) {
		t.Errorf("fault records (kind, nodes, time, in force)\n%s\nwant the faults as applied\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
