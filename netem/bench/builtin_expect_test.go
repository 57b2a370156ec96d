//go:build linux

package bench_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node/bully"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// measured is what one built-in scenario's run measured, for its
// expectation.
type measured struct {
	topo  *topologies.Topology
	names []string // lowest ID first: the topology's order
	sc    *scenario.Scenario
	r     results.Run
	rep   *capture.Report
	el    *capture.Election // the measured election
	fault time.Time         // the measured fault: el's trigger
	// before is B, the highest epoch any node led before the measured
	// fault by the capture.
	before uint64
}

// expectation is what a built-in scenario's measured election must be,
// derived from the algorithm (node/bully/doc.go) and the topology's timings,
// not from a run.
type expectation struct {
	// leader is the measured election's winner.
	leader string
	// The measured epoch E less B, the highest epoch led before the
	// measured fault, lies in [minStep, maxStep].
	minStep, maxStep uint64
	// floor is the least time to leader the timeouts allow, and detect
	// the least detection; 0 where they set none.
	floor, detect time.Duration
	why           string // how floor and detect follow from the timings
	// detectedBy is the detection that must start the measured election
	// (results.Run.DetectedBy); "" where either may.
	detectedBy string
}

// unbounded is an expectation's maxStep when E may exceed B by any
// number.
const unbounded = 1 << 62

// hbLate is how late a leader's heartbeat timer may fire on a loaded
// host: the last HEARTBEAT before a crash left at most HeartbeatInterval
// plus this before it.
const hbLate = 25 * time.Millisecond

// top is the k-th highest node (1: the highest).
func (m *measured) top(k int) string { return m.names[len(m.names)-k] }

// settings is node n's timings.
func (m *measured) settings(n string) topologies.Settings {
	tn, _ := m.topo.Node(n)
	return tn.Settings
}

// stagger is the detection stagger of node n watching node above.
func (m *measured) stagger(n, above string) time.Duration {
	s := m.settings(n)
	rank := slices.Index(m.names, above) - slices.Index(m.names, n) - 1
	return bully.StaggerDelay(rank, s.DetectionStagger, s.ElectionTimeout)
}

// expect derives the expectation of scenario m.sc (on a topology whose
// nodes are in ID order, the last one leading before the scenario).
func (m *measured) expect() (expectation, error) {
	crashEvidence := func(detector string, d time.Duration) expectation {
		// The killed leader's host closes its connections and refuses
		// new ones: the highest survivor (rank 0: no stagger) reads the
		// end of its connection, a FIN that crossed the leader's egress,
		// and probes: its SYN and the reset cross the egresses again. It
		// then halts at once; the HALT_ACK and the COORDINATOR follow.
		return expectation{leader: detector, minStep: 1, maxStep: 1, detect: 2 * d, floor: 4 * d, detectedBy: results.DetectedByCrash,
			why: "crash evidence: a FIN, then a probe's SYN and its reset, each one delay; a HALT_ACK and a COORDINATOR after"}
	}
	leaderCrash := func(detector string, d time.Duration) expectation {
		// The leader stops sending: its last HEARTBEAT left at most
		// HeartbeatInterval before the fault and reached the highest
		// survivor d later, whose detector (rank 0 below the leader: no
		// stagger) fires FailureTimeout after that; it leaves the leader
		// it suspects out, so with nobody else above it halts at once,
		// its HALT on the wire d later. The winning COORDINATOR follows
		// a HALT and a HALT_ACK, each on the wire d after it was sent.
		s := m.settings(detector)
		det := s.FailureTimeout - s.Heartbeat - hbLate + 2*d
		return expectation{leader: detector, minStep: 1, maxStep: 1, detect: det, floor: det + 2*d,
			why: "FailureTimeout - HeartbeatInterval after the fault, plus the delays of a HEARTBEAT, a HALT, a HALT_ACK and a COORDINATOR"}
	}
	switch m.sc.Name {
	case "cold-start":
		// Every node restarts at once from its state: the highest boots,
		// finds nobody above, and halts at once with its epoch + 1
		// (nobody promised more: the cluster was quiet at B). A boot
		// election is not staggered and waits on no timeout.
		return expectation{leader: m.top(1), minStep: 1, maxStep: 1, why: "a boot election halts at once"}, nil
	case "leader-pause", "one-way-partition":
		// A pause silences the leader, its sockets open; a one-way
		// partition drops all the leader sends: no connection ends, so
		// the failure timeout detects it.
		x := leaderCrash(m.top(2), 0)
		x.detectedBy = results.DetectedByTimeout
		return x, nil
	case "leader-crash":
		return crashEvidence(m.top(2), 0), nil
	case "loss":
		// Killed, under loss: the crash evidence (a FIN, a probe's SYN
		// and its reset) may be lost and the failure timeout detect it,
		// so no timeout bounds it from below.
		return expectation{leader: m.top(2), minStep: 1, maxStep: 1, why: "crash evidence, or the failure timeout when loss hides it"}, nil
	case "latency-sweep":
		d, err := time.ParseDuration(m.sc.Labels["delay"])
		if err != nil {
			return expectation{}, err
		}
		return crashEvidence(m.top(2), d), nil
	case "crash-during-election":
		return m.crashDuringElection(), nil
	case "cascade":
		// The k highest crash at once. The highest survivor detects
		// first, on the crash evidence: not being the highest below the
		// leader (k-1 nodes between), it waits ElectionTimeout and its
		// stagger after it; it ELECTIONs the dead ones above it but the
		// leader it suspects and, refused or not, waits ElectionTimeout
		// for an ANSWER, then halts with B + 1.
		k, err := cascadeK(m.sc)
		if err != nil {
			return expectation{}, err
		}
		w := m.top(k + 1)
		s := m.settings(w)
		det := s.ElectionTimeout + m.stagger(w, m.top(1))
		return expectation{leader: w, minStep: 1, maxStep: 1, detect: det, floor: det + s.ElectionTimeout,
			why: "ElectionTimeout and the survivor's stagger after the crash evidence, then an ELECTION's ElectionTimeout"}, nil
	case "partition-minority":
		// The majority's highest (its leader and the node below it are
		// cut off) detects one stagger step after FailureTimeout -
		// HeartbeatInterval, ELECTIONs the cut-off node below the leader,
		// hears nothing for ElectionTimeout, and halts with B + 1.
		w := m.top(3)
		s := m.settings(w)
		det := s.FailureTimeout - s.Heartbeat - hbLate + m.stagger(w, m.top(1))
		return expectation{leader: w, minStep: 1, maxStep: 1, detect: det, floor: det + s.ElectionTimeout,
			why: "FailureTimeout - HeartbeatInterval + one stagger step, then an ELECTION's ElectionTimeout"}, nil
	case "partition-majority":
		// Measured from the heal: the leader takes the cluster back once
		// it hears the cut-off side's leader's HEARTBEAT (epoch B), with
		// B + 1. A HEARTBEAT may be on its way at the heal: no timeout
		// bounds the time from below.
		return expectation{leader: m.top(1), minStep: 1, maxStep: 1, why: "the next HEARTBEAT may come at once"}, nil
	case "churn":
		// Measured from the leader's leave: its LEAVE starts the
		// election at once (leader-left), and the highest remaining
		// node halts with B + 1.
		return expectation{leader: m.top(2), minStep: 1, maxStep: 1, why: "a LEAVE starts the election at once"}, nil
	case "chained", "quorum-loss", "bridge":
		// Measured from the heal: whatever the cut led to (r2 or rN
		// electing itself while r1 still led others, or no election at
		// all), the nodes hear each other again and the highest, r1,
		// leads, at the highest epoch yet. No timeout bounds it from
		// below: the first HEARTBEAT across a healed link may come at once.
		return expectation{leader: m.top(1), minStep: 0, maxStep: unbounded, why: "partial connectivity healed; measured from the heal"}, nil
	case "chaos":
		// Everything healed, restarted and resumed: the highest node
		// leads, at the highest epoch yet, B itself when it led B all
		// along (checked below).
		return expectation{leader: m.top(1), minStep: 0, maxStep: unbounded, why: "random faults; measured from the last"}, nil
	}
	return expectation{}, fmt.Errorf("no expectation for scenario %s", m.sc.Name)
}

// crashDuringElection: the leader crashed, and once an election ran the
// highest survivor (top 2) was crashed: the measured fault. The next one
// (top 3) wins, by the first of three ways the wire tells apart:
//
//   - top 2 had won (its COORDINATOR is on the wire before the fault): top
//     3 follows it, detects its crash on the evidence at once (rank 0
//     below it), or its failure FailureTimeout after its last HEARTBEAT,
//     ELECTIONs the old leader (not the one it suspects) and waits
//     ElectionTimeout; E = B + 1, B top 2's epoch;
//   - top 2 was halting and its HALT reached top 3 at h: top 3 waits
//     WaitFactor x ElectionTimeout (rank 0 below top 2: no stagger) from
//     h, then ELECTIONs both above it and waits ElectionTimeout; E = B +
//     2, top 2's proposal B + 1 being promised. The election opens that
//     late only if top 2's HALTs reached every node below it: the crash
//     can land inside its HALT round (96 µs after its HALT to top 3 was
//     seen once), and a node it did not halt is still Normal under the
//     dead leader, whose own detector fires in its time and opens the
//     election with its ELECTIONs;
//   - no HALT reached top 3: it detects the old leader's failure itself
//     and ELECTIONs top 2, silent for ElectionTimeout; E = B + 1, or B +
//     2 if others promised top 2's ballot and REJECT it.
func (m *measured) crashDuringElection() expectation {
	w, dead := m.top(3), m.top(2)
	s := m.settings(w)
	var won bool
	var halt time.Time
	halted := map[string]bool{}
	for _, en := range m.entries() {
		if !en.Time.Before(m.fault) || en.From != dead {
			continue
		}
		switch {
		case en.Type == wire.TypeCoordinator.String():
			won = true
		case en.Type == wire.TypeHalt.String():
			halted[en.To] = true
			if en.To == w {
				halt = en.Time
			}
		}
	}
	switch {
	case won:
		return expectation{leader: w, minStep: 1, maxStep: 1, floor: s.ElectionTimeout,
			why: fmt.Sprintf("%s had won: crash evidence at once, then an ELECTION's ElectionTimeout", dead)}
	case !halt.IsZero():
		floor := halt.Sub(m.fault) + (bully.WaitFactor+1)*s.ElectionTimeout
		x := expectation{leader: w, minStep: 2, maxStep: 2, floor: floor, detect: floor - s.ElectionTimeout,
			why: fmt.Sprintf("%s halted %s at %s: WaitFactor x ElectionTimeout, then an ELECTION's ElectionTimeout", dead, w, halt.Sub(m.fault))}
		for k := 4; k <= len(m.names); k++ {
			if !halted[m.top(k)] {
				x.detect = 0
				x.why += fmt.Sprintf("; %s was not halted and detects on its own, so detection has no floor", m.top(k))
				break
			}
		}
		return x
	}
	return expectation{leader: w, minStep: 1, maxStep: 2, floor: s.ElectionTimeout,
		why: fmt.Sprintf("no HALT of %s reached %s: an ELECTION's ElectionTimeout", dead, w)}
}

// cascadeK is the k of a cascade scenario.
func cascadeK(sc *scenario.Scenario) (int, error) {
	var k int
	_, err := fmt.Sscan(sc.Labels["k"], &k)
	return k, err
}

// entries are the election messages of every election in the capture.
func (m *measured) entries() []capture.TimelineEntry {
	var out []capture.TimelineEntry
	for _, e := range m.rep.Elections {
		if tl, err := m.rep.ElectionTimeline(e.N); err == nil {
			out = append(out, tl.Entries...)
		}
	}
	return out
}

// checkMeasured holds run r of built-in scenario sc, whose outputs are in
// out, to the scenario's expectation: the measured election's leader, its
// epoch against the epoch led before the fault and the epoch of the
// winner's COORDINATOR frames, and its time to leader between the floor
// the timeouts set and the SLE2 bound.
func checkMeasured(t *testing.T, topo *topologies.Topology, sc *scenario.Scenario, r results.Run, out string) {
	t.Helper()
	m := &measured{topo: topo, sc: sc, r: r}
	for _, n := range topo.Nodes {
		m.names = append(m.names, n.Name)
	}
	rep, err := capture.AnalyzeFile(filepath.Join(out, r.Capture), capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.rep = rep
	if r.Election < 1 || r.Election > len(rep.Elections) {
		t.Fatalf("the run names election %d of the capture's %d", r.Election, len(rep.Elections))
	}
	m.el = &rep.Elections[r.Election-1]
	if m.el.Trigger.Kind == "wire" {
		t.Fatalf("measured election %d has no fault record for a trigger: %+v", m.el.N, m.el.Trigger)
	}
	m.fault = m.el.Trigger.Time
	before := false
	for _, tn := range r.Checks.Tenures {
		if tn.StartNS < 0 && (!before || tn.Epoch > m.before) {
			m.before, before = tn.Epoch, true
		}
	}
	if !before {
		t.Fatalf("no tenure began before the measured fault: %+v", r.Checks.Tenures)
	}
	x, err := m.expect()
	if err != nil {
		t.Fatal(err)
	}
	var det time.Duration
	if r.DetectionNS != nil {
		det = time.Duration(*r.DetectionNS)
	}
	steps := fmt.Sprintf("B+%d..B+%d", x.minStep, x.maxStep)
	if x.maxStep >= unbounded {
		steps = fmt.Sprintf("B+%d or more", x.minStep)
	}
	upper := time.Duration(r.Checks.BoundNS).String()
	if r.Checks.BoundNS == 0 {
		upper = "none (loss in force at the end)"
	}
	t.Logf("expected: leader %s, epoch %s (B=%d), time to leader from %s up to %s, detection at least %s (%s)",
		x.leader, steps, m.before, x.floor, upper, x.detect, x.why)
	t.Logf("measured: leader %s epoch %d (capture: election %d won by %s at epoch %d), time to leader %s, detection %s by %s",
		r.Leader, r.Epoch, m.el.N, m.el.Leader, m.el.Epoch, time.Duration(r.TimeToLeaderNS), det, r.DetectedBy)

	// The leader, by the lab and by the capture.
	if r.Leader != x.leader || m.el.Leader != x.leader {
		t.Errorf("measured leader %s (capture: %s), want %s", r.Leader, m.el.Leader, x.leader)
	}
	// The epoch: the winner's COORDINATOR frames carry the one the nodes
	// report, both sources show its lead, and it relates to B as the
	// algorithm says.
	if m.el.Epoch != r.Epoch {
		t.Errorf("the nodes report epoch %d, the winner's COORDINATOR frames carry %d", r.Epoch, m.el.Epoch)
	}
	if !coordinatorCarries(m, r.Leader, r.Epoch) {
		t.Errorf("no COORDINATOR from %s at epoch %d after the measured fault", r.Leader, r.Epoch)
	}
	for _, src := range []struct {
		name string
		ts   []results.TenureRecord
	}{{"capture", r.Checks.Tenures}, {"logs", r.Checks.LogTenures}} {
		if !slices.ContainsFunc(src.ts, func(tn results.TenureRecord) bool { return tn.Node == r.Leader && tn.Epoch == r.Epoch }) {
			t.Errorf("the %s show no lead of %s at epoch %d: %+v", src.name, r.Leader, r.Epoch, src.ts)
		}
	}
	if step := r.Epoch - m.before; r.Epoch < m.before || step < x.minStep || step > x.maxStep {
		t.Errorf("measured epoch %d is B+%d, B=%d; want B+%d..B+%d", r.Epoch, int64(r.Epoch)-int64(m.before), m.before, x.minStep, x.maxStep)
	}
	if r.Epoch == m.before && !slices.ContainsFunc(r.Checks.Tenures, func(tn results.TenureRecord) bool {
		return tn.Epoch == m.before && tn.Node == r.Leader && tn.StartNS < 0
	}) {
		t.Errorf("measured epoch %d is B, which %s did not lead before the fault", r.Epoch, r.Leader)
	}
	// Who followed whom: with E = B + 1 the leads of B name the measured
	// leader and epoch as next.
	if x.minStep == 1 && x.maxStep == 1 {
		for _, tn := range r.Checks.Tenures {
			if tn.Epoch == m.before && (tn.NextLeader != r.Leader || tn.NextEpoch != r.Epoch) {
				t.Errorf("%s's lead of epoch %d names %s at epoch %d next, want %s at %d", tn.Node, tn.Epoch, tn.NextLeader, tn.NextEpoch, r.Leader, r.Epoch)
			}
		}
	}
	// The time bounds.
	ttl := time.Duration(r.TimeToLeaderNS)
	if ttl < x.floor {
		t.Errorf("time to leader %s, below the %s the timeouts allow (%s)", ttl, x.floor, x.why)
	}
	if x.detectedBy != "" && r.DetectedBy != x.detectedBy {
		t.Errorf("detected by %q, want %q (%s)", r.DetectedBy, x.detectedBy, x.why)
	}
	if x.detect > 0 && (r.DetectionNS == nil || det < x.detect) {
		t.Errorf("detection %v, below the %s the timeouts allow (%s)", det, x.detect, x.why)
	}
	if r.Checks.BoundNS > 0 && r.TimeToLeaderNS > r.Checks.BoundNS {
		t.Errorf("time to leader %s over the SLE2 bound %s", ttl, time.Duration(r.Checks.BoundNS))
	}
}

// coordinatorCarries reports whether leader sent COORDINATOR frames of
// epoch after the measured fault, in the capture; on the ring, the
// ELECTED that the leader starts round the ring.
func coordinatorCarries(m *measured, leader string, epoch uint64) bool {
	announce := wire.TypeCoordinator.String()
	if _, ring := m.r.Messages[wire.TypeRingElection.String()]; ring {
		announce = wire.TypeElected.String()
	}
	return slices.ContainsFunc(m.entries(), func(en capture.TimelineEntry) bool {
		return en.Type == announce && en.From == leader && en.Epoch == epoch && !en.Time.Before(m.fault)
	})
}
