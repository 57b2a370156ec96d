package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

func analyzeBytes(t testing.TB, data []byte) *Report {
	t.Helper()
	rep, err := Analyze(bytes.NewReader(data), AnalyzeOptions{Name: "test.pcapng"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkCounts asserts the report's counts equal what the generator sent.
func checkCounts(t *testing.T, s *synth, rep *Report) {
	t.Helper()
	if rep.Frames != s.frames {
		t.Errorf("frames: got %d, want %d", rep.Frames, s.frames)
	}
	if got, want := rep.Messages, s.total.typeCounts(); got != want {
		t.Errorf("messages:\n got %+v\nwant %+v", got, want)
	}
	if rep.Packets != s.packets {
		t.Errorf("packets: got %d, want %d", rep.Packets, s.packets)
	}
	for i, n := range rep.Nodes[:len(s.nodes)] {
		if n.Name != s.nodes[i].Name {
			t.Fatalf("node %d is %s, want %s", i, n.Name, s.nodes[i].Name)
		}
		if got, want := n.Sent, s.sent[i].typeCounts(); got != want {
			t.Errorf("%s sent:\n got %+v\nwant %+v", n.Name, got, want)
		}
		if got, want := n.Received, s.recv[i].typeCounts(); got != want {
			t.Errorf("%s received:\n got %+v\nwant %+v", n.Name, got, want)
		}
	}
	if len(rep.Nodes) != len(s.nodes) {
		t.Errorf("%d nodes, want %d", len(rep.Nodes), len(s.nodes))
	}
	var sum TypeCounts
	for _, e := range rep.Elections {
		sum.Election += e.Messages.Election
		sum.Answer += e.Messages.Answer
		sum.Halt += e.Messages.Halt
		sum.HaltAck += e.Messages.HaltAck
		sum.Reject += e.Messages.Reject
		sum.Coordinator += e.Messages.Coordinator
		sum.RingElection += e.Messages.RingElection
		sum.Elected += e.Messages.Elected
	}
	if got, want := sum.ElectionTotal()+rep.OutsideElections.ElectionTotal(), rep.ElectionMessages; got != want {
		t.Errorf("election messages in elections + outside = %d, want %d", got, want)
	}
	if rep.Stream.Corrupt != 0 || rep.Stream.Gaps != 0 || len(rep.StreamErrors) != 0 {
		t.Errorf("stream errors: %+v %+v", rep.Stream, rep.StreamErrors)
	}
}

func TestAnalyzeScenario(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		retransmit, reorder, split float64
	}{
		{"clean", 0, 0, 0},
		{"impaired", 0.05, 0.05, 0.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := newSynth(t, &buf, 5, 1)
			s.retransmit, s.reorder, s.split = tc.retransmit, tc.reorder, tc.split
			s.benchScenario(2000)
			s.close(t)
			rep := analyzeBytes(t, buf.Bytes())
			checkCounts(t, s, rep)
			if tc.reorder > 0 && (rep.Stream.OutOfOrder == 0 || rep.Stream.Retransmitted == 0) {
				t.Errorf("impairments not exercised: %+v", rep.Stream)
			}
			// boot, then per cycle a crash and a restart election.
			if len(rep.Elections) < 3 || len(rep.Elections)%2 != 1 {
				t.Fatalf("%d elections", len(rep.Elections))
			}
			boot := rep.Elections[0]
			if boot.Trigger.Kind != "wire" || boot.DetectionNS != nil || boot.First.Reason != "boot" || boot.Leader != "n5" || boot.Epoch != 1 || !boot.Converged {
				t.Errorf("boot election: %+v", boot)
			}
			for k, e := range rep.Elections[1:] {
				wantKind, wantLeader := "crash", "n4"
				if k%2 == 1 {
					wantKind, wantLeader = "restart", "n5"
				}
				if e.Trigger.Kind != wantKind || e.Leader != wantLeader || e.Epoch != uint64(k+2) || !e.Converged {
					t.Errorf("election %d: trigger %s leader %s epoch %d converged %v, want %s %s %d", e.N, e.Trigger.Kind, e.Leader, e.Epoch, e.Converged, wantKind, wantLeader, k+2)
				}
				if e.DetectionNS == nil || e.TimeToLeaderNS == nil || *e.TimeToLeaderNS < *e.DetectionNS {
					t.Fatalf("election %d: detection %v, time to leader %v", e.N, e.DetectionNS, e.TimeToLeaderNS)
				}
				if wantKind == "crash" {
					// The generator waits 500 ms, then an ELECTION cascade
					// and the 200 ms ElectionTimeout before the HALTs.
					if d := time.Duration(*e.DetectionNS); d < 500*time.Millisecond || d > 510*time.Millisecond {
						t.Errorf("election %d: detection %v", e.N, d)
					}
					if d := time.Duration(*e.TimeToLeaderNS); d < 700*time.Millisecond || d > 800*time.Millisecond {
						t.Errorf("election %d: time to leader %v", e.N, d)
					}
					if e.Messages.Election != 6 || e.Messages.Answer != 6 || e.Messages.Halt != 3 || e.Messages.HaltAck != 3 || e.Messages.Coordinator != 3 {
						t.Errorf("election %d messages %+v", e.N, e.Messages)
					}
				}
			}
			if !rep.Final.Converged || rep.Final.Leader != "n5" || len(rep.Anomalies) != 0 {
				t.Errorf("final %+v anomalies %+v", rep.Final, rep.Anomalies)
			}
			js, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(js, []byte(`"schema":"bullylab.analyze/v2"`)) {
				t.Errorf("JSON lacks the schema: %.200s", js)
			}
			tl, err := rep.ElectionTimeline(2)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(tl.Entries)) != rep.Elections[1].Messages.ElectionTotal() || tl.Entries[0].Type != "ELECTION" || tl.Entries[0].Reason != "leader-failed" {
				t.Errorf("timeline: %+v", tl.Entries[:2])
			}
		})
	}
}

func TestAnalyzeAnomalies(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 4, 2)
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(0, 0, wire.ReasonBoot) // n4, epoch 1
	s.heartbeats(leader, 1, 3)
	// n2 claims epoch 1 too, and n3 becomes leader of epoch 2 while n4 is
	// up and reachable.
	s.advance(2 * time.Second)
	s.send(1, 0, s.msg(wire.TypeHalt, 1, 1, wire.ReasonManual))
	s.send(1, 0, s.msg(wire.TypeCoordinator, 1, 1, wire.ReasonManual))
	s.advance(2 * time.Second)
	s.send(2, 0, s.msg(wire.TypeHalt, 2, 2, wire.ReasonManual))
	s.send(2, 0, s.msg(wire.TypeCoordinator, 2, 2, wire.ReasonManual))
	s.send(2, 1, s.msg(wire.TypeCoordinator, 2, 2, wire.ReasonManual))
	// A partition hides n4 from n1: n3 leading n1 is no anomaly then.
	s.advance(2 * time.Second)
	s.record(Record{Kind: fault.Partition, Groups: [][]string{{"n1", "n3"}, {"n2", "n4"}}})
	s.advance(600 * time.Millisecond)
	s.send(2, 0, s.msg(wire.TypeHalt, 2, 3, wire.ReasonLeaderFailed))
	s.send(0, 2, s.msg(wire.TypeHaltAck, 0, 3, 0))
	s.send(2, 0, s.msg(wire.TypeCoordinator, 2, 3, wire.ReasonLeaderFailed))
	s.advance(2 * time.Second)
	s.record(Record{Kind: fault.Heal})
	// The leader crashes at the end: no convergence.
	s.advance(2 * time.Second)
	s.crash(2)
	s.advance(100 * time.Millisecond)
	s.close(t)

	rep := analyzeBytes(t, buf.Bytes())
	checkCounts(t, s, rep)
	kinds := map[string]int{}
	for _, a := range rep.Anomalies {
		kinds[a.Kind]++
	}
	if kinds[AnomalyTwoLeaders] != 1 || kinds[AnomalyLowerCoordinator] != 2 || kinds[AnomalyNoConvergence] != 1 {
		t.Errorf("anomalies: %+v", rep.Anomalies)
	}
	if e := rep.Elections[len(rep.Elections)-1]; e.Trigger.Kind != "partition" || !e.Converged || e.Leader != "n3" {
		t.Errorf("partition election: %+v", e)
	}
	if rep.Final.Converged || !strings.Contains(rep.Final.Detail, "not live") {
		t.Errorf("final: %+v", rep.Final)
	}
}

func TestAnalyzeErrors(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 3, 3)
	for i := range s.live {
		s.live[i] = true
	}
	s.elect(0, 0, wire.ReasonBoot)
	s.close(t)
	data := buf.Bytes()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "x.pcapng: empty file"},
		{"not pcapng", []byte("hello, this is not a capture at all"), "x.pcapng: not a pcapng file"},
		{"cut in its section header", data[:20], "x.pcapng: not a pcapng file"},
		// Cut inside a packet: TestAnalyzeTruncated.
	} {
		_, err := Analyze(bytes.NewReader(tc.data), AnalyzeOptions{Name: "x.pcapng"})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want prefix %q", tc.name, err, tc.want)
		}
	}
}

// TestTypeCountsEveryType checks that every wire type has its own count.
func TestTypeCountsEveryType(t *testing.T) {
	for _, ty := range wire.Types {
		var c counts
		c.add(ty)
		tc := c.typeCounts()
		if tc.Get(ty) != 1 || tc.Total() != 1 || tc.Get(0) != 0 {
			t.Errorf("%s: counted %+v", ty, tc)
		}
		if (tc.ElectionTotal() == 1) != IsElectionMessage(ty) || IsElectionType(ty) != (ty.Algorithm() == wire.AlgorithmBully) {
			t.Errorf("%s: election total %d", ty, tc.ElectionTotal())
		}
	}
}

// TestAnalyzeHello analyzes the same run with and without authentication:
// the HELLOs opening the connections are counted, per node too, and
// change nothing else. The two runs have the same packets at the same
// times, a HELLO sharing the segment of its connection's first frame.
func TestAnalyzeHello(t *testing.T) {
	run := func(key *wire.Key) (*synth, *Report) {
		var buf bytes.Buffer
		s := newSynth(t, &buf, 4, 11)
		s.key = key
		for i := range s.live {
			s.live[i] = true
		}
		leader := s.elect(0, 0, wire.ReasonBoot)
		s.heartbeats(leader, 1, 5)
		s.crash(leader)
		s.advance(500 * time.Millisecond)
		leader = s.elect(0, 1, wire.ReasonLeaderFailed)
		s.heartbeats(leader, 2, 5)
		s.close(t)
		rep := analyzeBytes(t, buf.Bytes())
		checkCounts(t, s, rep)
		return s, rep
	}
	_, plain := run(nil)
	s, rep := run(&testKey)
	if rep.Messages.Hello == 0 || rep.Messages.Hello != s.total[wire.TypeHello] || plain.Messages.Hello != 0 {
		t.Errorf("%d HELLOs, sent %d", rep.Messages.Hello, s.total[wire.TypeHello])
	}
	if rep.Frames != plain.Frames+rep.Messages.Hello || rep.ElectionMessages != plain.ElectionMessages || len(rep.Elections) != 2 {
		t.Errorf("%d frames, %d election messages, with HELLOs; %d and %d without", rep.Frames, rep.ElectionMessages, plain.Frames, plain.ElectionMessages)
	}
	for name, pair := range map[string][2]any{
		"elections": {rep.Elections, plain.Elections},
		"anomalies": {rep.Anomalies, plain.Anomalies},
		"final":     {rep.Final, plain.Final},
		"outside":   {rep.OutsideElections, plain.OutsideElections},
	} {
		x, _ := json.Marshal(pair[0])
		y, _ := json.Marshal(pair[1])
		if !bytes.Equal(x, y) {
			t.Errorf("%s with HELLOs:\n%s\nwithout:\n%s", name, x, y)
		}
	}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "HELLOs)") || !strings.Contains(b.String(), "HELLO") {
		t.Errorf("text report:\n%s", b.String())
	}
}

// TestAnalyzePhases runs partition-minority on star5: the majority elects
// n3 while the minority keeps n5, and after the heal n5 takes over again.
// Each phase has its own election, measured from its own record, and the
// heal's traffic is not counted in the partition's election.
func TestAnalyzePhases(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 3)
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(0, 0, wire.ReasonBoot) // n5, epoch 1
	s.heartbeats(leader, 1, 3)
	s.advance(time.Second)
	s.record(Record{Kind: fault.Partition, Groups: [][]string{{"n4", "n5"}, {"n1", "n2", "n3"}}})
	partition := s.t
	s.heartbeatsTo(4, 1, 3, 3) // n5 to n4 only, its side
	majority := []int{0, 1}
	s.electAmong(2, majority, 2, wire.ReasonLeaderFailed) // n3 leads epoch 2
	s.heartbeatsTo(2, 2, 3, majority...)
	s.advance(time.Second)
	s.record(Record{Kind: fault.Heal})
	heal := s.t
	s.advance(300 * time.Millisecond)
	s.electAmong(4, []int{0, 1, 2, 3}, 3, wire.ReasonLowerLeader) // n5 leads epoch 3
	s.heartbeats(4, 3, 2)
	s.close(t)

	rep := analyzeBytes(t, buf.Bytes())
	checkCounts(t, s, rep)
	if len(rep.Elections) != 3 {
		t.Fatalf("%d elections, want boot, partition and heal: %+v", len(rep.Elections), rep.Elections)
	}
	p, h := rep.Elections[1], rep.Elections[2]
	if p.Trigger.Kind != "partition" || p.Leader != "n3" || p.Epoch != 2 || !p.Converged {
		t.Errorf("partition election: %+v", p)
	}
	if p.End.UnixNano() >= heal || p.TimeToLeaderNS == nil || *p.TimeToLeaderNS > heal-partition {
		t.Errorf("partition election runs past the heal: %+v", p)
	}
	if got := p.Messages.Get(wire.TypeHalt); got != 2 {
		t.Errorf("partition election counts %d HALTs, want n3's 2", got)
	}
	if h.Trigger.Kind != "heal" || h.Leader != "n5" || h.Epoch != 3 || !h.Converged {
		t.Errorf("heal election: %+v", h)
	}
	var claims []string
	for _, c := range rep.Claims {
		claims = append(claims, fmt.Sprintf("%s e%d", c.Node, c.Epoch))
	}
	if got := strings.Join(claims, ", "); got != "n5 e1, n3 e2, n5 e3" {
		t.Errorf("claims to lead: %s", got)
	}
}

// TestAnalyzeScopes has both sides of a partition elect at once: each side
// is its own election, with its own leader, both measured from the
// partition.
func TestAnalyzeScopes(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 4)
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(0, 0, wire.ReasonBoot) // n5, epoch 1
	s.heartbeats(leader, 1, 3)
	s.advance(time.Second)
	s.record(Record{Kind: fault.Partition, Groups: [][]string{{"n1", "n2"}, {"n3", "n4", "n5"}}})
	s.advance(700 * time.Millisecond)
	// Interleaved: n2 takes over its side while n5 re-asserts on its own.
	for _, pair := range [][2]int{{1, 0}, {4, 2}, {4, 3}} {
		s.send(pair[0], pair[1], s.msg(wire.TypeHalt, pair[0], uint64(2+pair[0]/4), wire.ReasonLeaderFailed))
		s.advance(50 * time.Microsecond)
		s.send(pair[1], pair[0], s.msg(wire.TypeHaltAck, pair[1], uint64(2+pair[0]/4), 0))
		s.advance(50 * time.Microsecond)
	}
	for _, pair := range [][2]int{{1, 0}, {4, 2}, {4, 3}} {
		s.send(pair[0], pair[1], s.msg(wire.TypeCoordinator, pair[0], uint64(2+pair[0]/4), wire.ReasonLeaderFailed))
		s.advance(50 * time.Microsecond)
	}
	s.advance(2 * time.Second)
	s.close(t)

	rep := analyzeBytes(t, buf.Bytes())
	checkCounts(t, s, rep)
	if len(rep.Elections) != 3 {
		t.Fatalf("%d elections, want boot and one per side: %+v", len(rep.Elections), rep.Elections)
	}
	sides := map[string]Election{}
	for _, e := range rep.Elections[1:] {
		sides[e.Leader] = e
		if e.Trigger.Kind != "partition" || !e.Converged || e.TimeToLeaderNS == nil {
			t.Errorf("side election: %+v", e)
		}
	}
	if sides["n2"].Epoch != 2 || sides["n5"].Epoch != 3 {
		t.Errorf("side leaders and epochs: %+v", sides)
	}
	if n := sides["n5"].Messages.Get(wire.TypeHalt); n != 2 {
		t.Errorf("n5's side counts %d HALTs, want 2", n)
	}
}

// TestSomeNames: a detail names up to ten nodes and counts the rest.
func TestSomeNames(t *testing.T) {
	names := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("n%d", i+1))
		}
		return out
	}
	for n, want := range map[int]string{
		1:  "[n1] was",
		3:  "[n1 n2 n3] were",
		10: "[n1 n2 n3 n4 n5 n6 n7 n8 n9 n10] were",
		12: "[n1 n2 n3 n4 n5 n6 n7 n8 n9 n10] and 2 more (12 nodes) were",
	} {
		if got := someNames(names(n)); got != want {
			t.Errorf("%d names: %q, want %q", n, got, want)
		}
	}
}
