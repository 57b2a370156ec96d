//go:build linux

package bench_test

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bullylab/bullylab/netem/bench/results"
)

// sampleResults is a deterministic star16 bench shaped like real ones:
// leader-crash runs detect within the failure timeout plus a heartbeat
// phase, then elect in a few milliseconds; the highest survivor usually
// detects first (42 frames), sometimes a lower node does (ELECTIONs and
// ANSWERs too). Run 7 failed on liveness. A latency-sweep point adds delay.
func sampleResults(seed uint64) *results.Results {
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
		sc := results.ScenarioResult{Name: name, Labels: labels, Description: "the leader is killed; the survivors elect the highest of them"}
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
					SplitBrain:      []results.SplitBrain{}, ConvergenceNS: &conv,
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
