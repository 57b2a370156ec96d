package capture

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// bootRing writes a 5-node cluster's cold start by the ring election,
// initiator starting it, and rounds of the winner's HEARTBEATs; it
// returns the winner and when the last node but it was sent ELECTED.
func bootRing(s *synth, initiator, rounds int) (leader int, reached int64) {
	for i := range s.live {
		s.live[i] = true
	}
	leader, reached = s.ringElect(initiator, 1, wire.ReasonBoot)
	s.heartbeats(leader, 1, rounds)
	return leader, reached
}

// TestAnalyzeRingBoot: a cold start by the ring election, all 5 nodes
// live, costs N + j RING_ELECTIONs for an initiator j hops before the
// highest node, and N ELECTEDs: 2N when the highest initiates, 3N-1 when
// its successor does. Its leader is the node the ELECTEDs name, known
// when the last node but it is sent one.
func TestAnalyzeRingBoot(t *testing.T) {
	const n = 5
	for _, c := range []struct {
		initiator int
		j         int64
	}{{4, 0}, {2, 2}, {0, n - 1}} {
		var buf bytes.Buffer
		s := newSynth(t, &buf, n, 3)
		_, reached := bootRing(s, c.initiator, 5)
		s.close(t)
		rep := analyzeBytes(t, buf.Bytes())
		checkCounts(t, s, rep)
		if rep.Algorithm != wire.AlgorithmRing || len(rep.Elections) != 1 {
			t.Fatalf("initiator n%d: algorithm %q, %d elections", c.initiator+1, rep.Algorithm, len(rep.Elections))
		}
		e := rep.Elections[0]
		if e.Messages.RingElection != n+c.j || e.Messages.Elected != n || e.Messages.ElectionTotal() != 2*n+c.j {
			t.Errorf("initiator n%d: messages %+v, want %d RING_ELECTION and %d ELECTED", c.initiator+1, e.Messages, n+c.j, n)
		}
		if e.Algorithm != wire.AlgorithmRing || e.Leader != "n5" || e.LeaderID != s.nodes[4].ID || e.Epoch != 1 || !e.Converged || len(e.Pending) != 0 {
			t.Errorf("initiator n%d: election %+v", c.initiator+1, e)
		}
		if e.Trigger.Kind != "wire" || e.First.Type != "RING_ELECTION" || e.First.From != s.nodes[c.initiator].Name || e.First.Reason != "boot" || e.DetectionNS != nil {
			t.Errorf("initiator n%d: trigger %+v, first %+v", c.initiator+1, e.Trigger, e.First)
		}
		if want := reached - e.First.Time.UnixNano(); e.TimeToLeaderNS == nil || *e.TimeToLeaderNS != want {
			t.Errorf("initiator n%d: time to leader %v, want %v", c.initiator+1, e.TimeToLeaderNS, time.Duration(want))
		}
		if !rep.Final.Converged || rep.Final.Leader != "n5" || rep.Final.Epoch != 1 || len(rep.Anomalies) != 0 || rep.OutsideElections.ElectionTotal() != 0 {
			t.Errorf("initiator n%d: final %+v, anomalies %+v, outside %+v", c.initiator+1, rep.Final, rep.Anomalies, rep.OutsideElections)
		}
		if len(rep.Claims) != 1 || rep.Claims[0].Node != "n5" || rep.Claims[0].Epoch != 1 {
			t.Errorf("initiator n%d: claims %+v, want n5's of epoch 1", c.initiator+1, rep.Claims)
		}
	}
}

// TestAnalyzeRingLeaderCrash: after the leader's crash the highest
// survivor initiates and the ring of the N-1 survivors elects it with
// N-1 RING_ELECTIONs and N-1 ELECTEDs, nothing to the dead node;
// detection and time to leader run from the crash record.
func TestAnalyzeRingLeaderCrash(t *testing.T) {
	const n = 5
	var buf bytes.Buffer
	s := newSynth(t, &buf, n, 4)
	s.split, s.reorder, s.retransmit = 0.1, 0.05, 0.05
	leader, _ := bootRing(s, 4, 20)
	crashed := s.t + int64(time.Microsecond) // the record's time: s.record advances 1µs
	s.crash(leader)
	s.advance(500 * time.Millisecond)
	next, reached := s.ringElect(3, 2, wire.ReasonLeaderFailed)
	s.heartbeats(next, 2, 20)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	checkCounts(t, s, rep)
	if rep.Algorithm != wire.AlgorithmRing || len(rep.Elections) != 2 {
		t.Fatalf("algorithm %q, %d elections", rep.Algorithm, len(rep.Elections))
	}
	e := rep.Elections[1]
	if e.Messages.RingElection != n-1 || e.Messages.Elected != n-1 || e.Messages.Total() != 2*(n-1) {
		t.Errorf("messages %+v, want %d RING_ELECTION and %d ELECTED", e.Messages, n-1, n-1)
	}
	if e.Trigger.Kind != string(fault.Crash) || e.Trigger.Time.UnixNano() != crashed || e.Leader != "n4" || e.Epoch != 2 || !e.Converged {
		t.Errorf("election %+v", e)
	}
	if want := e.First.Time.UnixNano() - crashed; e.DetectionNS == nil || *e.DetectionNS != want || want < int64(500*time.Millisecond) {
		t.Errorf("detection %v, want %v", e.DetectionNS, time.Duration(want))
	}
	if want := reached - crashed; e.TimeToLeaderNS == nil || *e.TimeToLeaderNS != want {
		t.Errorf("time to leader %v, want %v", e.TimeToLeaderNS, time.Duration(want))
	}
	if rep.Nodes[4].Received.RingElection != 1 || rep.Nodes[4].Received.Elected != 1 {
		t.Errorf("the dead n5 was sent %+v after the crash, want only the boot election's", rep.Nodes[4].Received)
	}
	if !rep.Final.Converged || rep.Final.Leader != "n4" || len(rep.Anomalies) != 0 {
		t.Errorf("final %+v, anomalies %+v", rep.Final, rep.Anomalies)
	}
	tl, err := rep.ElectionTimeline(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Entries) != 2*(n-1) || tl.Entries[0].Type != "RING_ELECTION" || tl.Entries[0].Reason != "leader-failed" || tl.Entries[n-1].Type != "ELECTED" {
		t.Errorf("timeline %+v", tl.Entries)
	}
}

// TestAnalyzeRingAnomalies: a ring that leaves out a live higher node
// elects a lower leader (lower-elected), and that node leading the same
// epoch as well is two leaders.
func TestAnalyzeRingAnomalies(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 5)
	bootRing(s, 4, 3)
	s.advance(time.Second)
	leader, _ := s.ringElectAmong([]int{0, 1, 2, 3}, 3, 2, wire.ReasonManual)
	s.heartbeats(4, 2, 2)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	if leader != 3 || len(rep.Elections) != 2 || rep.Elections[1].Leader != "n4" {
		t.Fatalf("leader %d, elections %+v", leader, rep.Elections)
	}
	kinds := map[string]Anomaly{}
	for _, a := range rep.Anomalies {
		kinds[a.Kind] = a
	}
	if a, ok := kinds[AnomalyLowerElected]; !ok || a.Election != 2 || a.Epoch != 2 || strings.Join(a.Nodes, ",") != "n4,n5" {
		t.Errorf("lower-elected: %+v (anomalies %+v)", a, rep.Anomalies)
	}
	if a, ok := kinds[AnomalyTwoLeaders]; !ok || a.Epoch != 2 || strings.Join(a.Nodes, ",") != "n4,n5" {
		t.Errorf("two-leaders: %+v (anomalies %+v)", a, rep.Anomalies)
	}
	if _, ok := kinds[AnomalyLowerCoordinator]; ok {
		t.Errorf("a ring capture has a lower-coordinator anomaly: %+v", rep.Anomalies)
	}
}

// TestAnalyzeMixedAlgorithms: a capture with Bully's and the ring's
// elections says so and reports it as an anomaly, at the first frame of
// the algorithm that came second, and measures each election by its own
// algorithm.
func TestAnalyzeMixedAlgorithms(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 6)
	for i := range s.live {
		s.live[i] = true
	}
	leader := s.elect(0, 0, wire.ReasonBoot)
	s.heartbeats(leader, 1, 5)
	s.advance(time.Second)
	ring, _ := s.ringElect(4, 2, wire.ReasonManual)
	s.heartbeats(ring, 2, 5)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	checkCounts(t, s, rep)
	if rep.Algorithm != AlgorithmMixed || len(rep.Elections) != 2 {
		t.Fatalf("algorithm %q, %d elections", rep.Algorithm, len(rep.Elections))
	}
	b, r := rep.Elections[0], rep.Elections[1]
	if b.Algorithm != wire.AlgorithmBully || b.Leader != "n5" || b.Epoch != 1 || !b.Converged || b.Messages.RingElection+b.Messages.Elected != 0 {
		t.Errorf("Bully's election %+v", b)
	}
	if r.Algorithm != wire.AlgorithmRing || r.Leader != "n5" || r.Epoch != 2 || !r.Converged || r.Messages.RingElection != 5 || r.Messages.Elected != 5 {
		t.Errorf("the ring's election %+v", r)
	}
	if len(rep.Anomalies) != 1 || rep.Anomalies[0].Kind != AnomalyMixedAlgorithms || rep.Anomalies[0].Packet != r.First.Packet ||
		!strings.Contains(rep.Anomalies[0].Detail, "RING_ELECTION (ring)") || !strings.Contains(rep.Anomalies[0].Detail, "(bully)") {
		t.Errorf("anomalies %+v, want one mixed-algorithms at packet %d", rep.Anomalies, r.First.Packet)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"│ algorithm ", "mixed: Bully's and the ring's messages", "COORDINATOR", "RING_ELECTION", "ELECTED", "mixed-algorithms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAnalyzeRingOutputs: a ring capture's JSON says so and counts the
// ring's types; its text shows the ring's columns and not Bully's, and a
// Bully capture's text the reverse.
func TestAnalyzeRingOutputs(t *testing.T) {
	var buf bytes.Buffer
	s := newSynth(t, &buf, 5, 8)
	bootRing(s, 2, 3)
	s.close(t)
	rep := analyzeBytes(t, buf.Bytes())
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"algorithm":"ring"`, `"election_messages":12`, `"RING_ELECTION":7,"ELECTED":5`} {
		if !bytes.Contains(js, []byte(want)) {
			t.Errorf("JSON lacks %s: %.400s", want, js)
		}
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, "│ algorithm       │ ring") || !strings.Contains(text, "RING_ELECTION") || strings.Contains(text, "HALT_ACK") {
		t.Errorf("ring capture's text:\n%s", text)
	}

	buf.Reset()
	s = newSynth(t, &buf, 5, 8)
	s.benchScenario(200)
	s.close(t)
	out.Reset()
	if err := analyzeBytes(t, buf.Bytes()).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text = out.String()
	if !strings.Contains(text, "│ algorithm       │ bully") || !strings.Contains(text, "HALT_ACK") || strings.Contains(text, "RING_ELECTION") {
		t.Errorf("Bully capture's text:\n%s", text)
	}
}
