// Package resultstest builds deterministic bench results for tests: a
// sample shaped like a real star16 bench, and a small one with sweeps; and
// it opens the pseudo-terminals that the summary and progress tests write
// to.
package resultstest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// Sample is a deterministic star16 bench shaped like real ones:
// leader-crash runs detect within the failure timeout plus a heartbeat
// phase, then elect in a few milliseconds; the highest survivor usually
// detects first (42 frames), sometimes a lower node does (ELECTIONs and
// ANSWERs too). Run 7 failed on liveness. A latency-sweep point adds delay.
// The seed picks the times and messages.
func Sample(seed uint64) *results.Results {
	rng := rand.New(rand.NewPCG(seed, 99))
	t0 := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	r := &results.Results{
		Schema:   results.Schema,
		Tool:     results.Tool{Name: "bullylab", Version: "v0.4.0", GoVersion: "go1.26.8", Revision: "7371dad"},
		Host:     results.Host{OS: "linux", Arch: "amd64", Kernel: "6.18.2", CPU: "AMD EPYC 7B13", Cores: 2},
		Started:  t0,
		Finished: t0.Add(4 * time.Minute),
		Topology: results.TopologyInfo{Name: "star16", Nodes: 16, Settings: results.Timing{
			HeartbeatNS: int64(100 * time.Millisecond), FailureTimeoutNS: int64(500 * time.Millisecond), ElectionTimeoutNS: int64(200 * time.Millisecond)}},
		Seed:     1,
		Settings: results.RunSettings{Runs: 30, Scenario: "leader-crash", Backend: "netem", SLE2BoundNS: int64(1300 * time.Millisecond)},
	}
	mk := func(name string, labels map[string]string, extra time.Duration) results.ScenarioResult {
		sc := results.ScenarioResult{Name: name, Labels: labels, Algorithm: "bully", Description: "the leader is killed; the survivors elect the highest of them"}
		for i := 1; i <= 30; i++ {
			det := 500*time.Millisecond + time.Duration(rng.IntN(100_000))*time.Microsecond + 3*extra
			elect := 2*time.Millisecond + time.Duration(rng.IntN(3000))*time.Microsecond + 4*extra
			msgs := map[string]int{"HALT": 14, "HALT_ACK": 14, "COORDINATOR": 14}
			if rng.IntN(4) == 0 { // a lower node detected first
				k := 1 + rng.IntN(6)
				msgs["ELECTION"] = k * 3
				msgs["ANSWER"] = k * 2
				elect += 200 * time.Millisecond
			}
			detNS := int64(det)
			conv := int64(det + elect)
			run := results.Run{
				Index: i, Seed: int64(i), Started: t0.Add(time.Duration(i) * 4 * time.Second), OK: true,
				TimeToLeaderNS: int64(det + elect), DetectionNS: &detNS, Leader: "n15", Epoch: 2,
				Messages: msgs, Counters: results.CountersCheck{OK: true},
				Capture:  fmt.Sprintf("captures/%s-run%02d.pcapng", name, i),
				Schedule: []string{"inject crash n16", "wait_leader among n1,...,n15 expect highest-live timeout 30s (measured)"},
				Checks: results.Checks{
					LeadersPerEpoch: []results.EpochLeaders{{Epoch: 1, Leaders: []string{"n16"}}, {Epoch: 2, Leaders: []string{"n15"}}},
					LeaderOverlaps:  []results.LeaderOverlap{}, ConvergenceNS: &conv,
				},
			}
			if name == "leader-crash" && i == 7 {
				run.OK, run.FailureKind = false, results.FailLiveness
				run.Failure = "step 2 (wait_leader): no leader agreed among 15 live nodes within 30s: n3 electing, n9 waiting"
			}
			sc.Runs = append(sc.Runs, run)
		}
		return sc
	}
	r.Scenarios = []results.ScenarioResult{
		mk("leader-crash", nil, 0),
		mk("latency-sweep", map[string]string{"delay": "50ms"}, 50*time.Millisecond),
	}
	r.Summarize()
	return r
}

// SampleFirstRuns is Sample(1) with its first n runs per scenario, all
// passed for n < 7 (run 7 of leader-crash failed).
func SampleFirstRuns(n int) *results.Results {
	r := Sample(1)
	for i := range r.Scenarios {
		r.Scenarios[i].Runs = r.Scenarios[i].Runs[:n]
	}
	r.Settings.Runs = n
	r.Summarize()
	return r
}

// ScenarioOfTimes is a scenario of runs that pass with times to leader of
// ms milliseconds, then fail runs that fail on liveness.
func ScenarioOfTimes(name string, labels map[string]string, fail int, ms ...float64) results.ScenarioResult {
	sc := results.ScenarioResult{Name: name, Labels: labels}
	for i, v := range ms {
		sc.Runs = append(sc.Runs, results.Run{Index: len(sc.Runs) + 1, OK: true, TimeToLeaderNS: int64(v * 1e6),
			Messages: map[string]int{"ELECTION": 4 + i, "COORDINATOR": 4}})
	}
	for range fail {
		sc.Runs = append(sc.Runs, results.Run{Index: len(sc.Runs) + 1, FailureKind: results.FailLiveness, Failure: "no leader"})
	}
	sc.Summary = results.Summarize(sc.Runs)
	return sc
}

// Labels is a scenario's labels from key, value pairs.
func Labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// AlgorithmsSample is a star5 leader-crash bench of both algorithms side
// by side, as `bullylab bench --algorithm bully,ring` writes it: Bully's
// runs with the highest survivor detecting (HALT, HALT_ACK and
// COORDINATOR 3 each, 3N-6), the ring's with RING_ELECTION and ELECTED 4
// each (2(N-1)).
func AlgorithmsSample() *results.Results { return AlgorithmsSampleOf("star5", 5) }

// AlgorithmsSampleOf is AlgorithmsSample on topology, of n nodes: Bully's
// runs send HALT, HALT_ACK and COORDINATOR n-2 times each, the ring's
// RING_ELECTION and ELECTED n-1 times each, the closed forms' counts.
func AlgorithmsSampleOf(topology string, n int) *results.Results {
	r := Sample(5)
	r.Topology.Name, r.Topology.Nodes = topology, n
	bully := ScenarioOfTimes("leader-crash", nil, 0, 700, 705, 712)
	ring := ScenarioOfTimes("leader-crash", nil, 1, 702, 709, 731)
	bully.Algorithm, ring.Algorithm = "bully", "ring"
	for i := range bully.Runs {
		bully.Runs[i].Messages = map[string]int{"HALT": n - 2, "HALT_ACK": n - 2, "COORDINATOR": n - 2}
		d := int64(500e6 + i*1e6)
		bully.Runs[i].DetectionNS = &d
	}
	for i := range ring.Runs {
		if ring.Runs[i].OK {
			ring.Runs[i].Messages = map[string]int{"RING_ELECTION": n - 1, "ELECTED": n - 1}
			d := int64(501e6 + i*1e6)
			ring.Runs[i].DetectionNS = &d
		}
	}
	r.Scenarios = []results.ScenarioResult{bully, ring}
	r.Settings.Runs = 4
	r.Summarize()
	return r
}

// SweepSample is Sample(3) cut to star5 with a leader-crash scenario and
// two sweeps: latency-sweep by delay (at 50ms no run passed) and loss.
func SweepSample() *results.Results {
	r := Sample(3)
	r.Topology.Name, r.Topology.Nodes = "star5", 5
	r.Scenarios = []results.ScenarioResult{
		ScenarioOfTimes("leader-crash", nil, 0, 700, 710),
		ScenarioOfTimes("latency-sweep", Labels("delay", "0s"), 0, 700, 720, 750),
		ScenarioOfTimes("latency-sweep", Labels("delay", "10ms"), 0, 760, 790),
		ScenarioOfTimes("latency-sweep", Labels("delay", "50ms"), 2),
		ScenarioOfTimes("latency-sweep", Labels("delay", "100ms"), 1, 1100, 1300),
		ScenarioOfTimes("loss", Labels("loss", "1"), 0, 720),
		ScenarioOfTimes("loss", Labels("loss", "5"), 0, 730),
		ScenarioOfTimes("loss", Labels("loss", "10"), 0, 790),
		ScenarioOfTimes("loss", Labels("loss", "20"), 0, 900),
	}
	return r
}
