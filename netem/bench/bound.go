//go:build linux

package bench

import (
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/bully"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// Parts of node/bully/doc.go's d that no impairment configures.
const (
	// delayerOverhead is what the NFQUEUE delayer adds to a delayed
	// packet beyond its configured delay: 50 ms configured measured 50.8 ms
	// at p50 and 51.8 ms at p99 (../shared/notes/linux-testbed.md).
	delayerOverhead = 2 * time.Millisecond
	// hostSlack covers a node process waiting for a core on a loaded
	// host, and the lab's status polls that time agreement.
	hostSlack = 5 * time.Millisecond
	// tcpDelays is how many one-way packet delays a message may need:
	// a node sends to a peer it has no connection to (in a stable Bully
	// cluster followers never talk to each other, so most election
	// messages open one) only after the handshake, SYN one way, SYN-ACK
	// back, then the data with the ACK. A latency-sweep at 100 ms showed an
	// ELECTION to a node never talked to on the wire 300 ms after those to
	// nodes already connected.
	tcpDelays = 3
)

// messageDelay is node/bully/doc.go's d, the largest delay of one message, for
// a network whose largest one-way packet delay (jitter included, per
// direction) is owd: tcpDelays of them, each with the delayer's overhead
// when the NFQUEUE backend applies it, plus hostSlack.
func messageDelay(owd time.Duration, backend string) time.Duration {
	if owd > 0 && backend == netem.BackendNFQueue {
		owd += delayerOverhead
	}
	return tcpDelays*owd + hostSlack
}

// sle2Bound is node/bully/doc.go's SLE2 bound for the topology's slowest node,
//
//	max(FailureTimeout + d + S, WaitFactor×ElectionTimeout + A + S, Heartbeat + d) + 3×ElectionTimeout + 2A + 10d,
//
// d the largest message delay (messageDelay), S the largest detection
// stagger a node of this many can have (bully.MaxStaggerDelay), A the
// longest an election takes to ask every member above (bully.MaxAskSpread).
func sle2Bound(topo *topologies.Topology, d time.Duration) time.Duration {
	var b time.Duration
	for _, n := range topo.Nodes {
		s := n.Settings
		stagger := bully.MaxStaggerDelay(len(topo.Nodes), s.DetectionStagger, s.ElectionTimeout)
		spread := bully.MaxAskSpread(len(topo.Nodes), s.DetectionStagger)
		first := max(s.FailureTimeout+d+stagger, bully.WaitFactor*s.ElectionTimeout+spread+stagger, s.Heartbeat+d)
		b = max(b, first+3*s.ElectionTimeout+2*spread+10*d)
	}
	return b
}

// topologyDelay is the largest one-way delay the topology's own
// impairments give a packet, per direction: the sender's link, with the
// pair's link between the two on top of it (lab.Faults.MaxDelay, before any
// fault).
func topologyDelay(topo *topologies.Topology) time.Duration {
	var d time.Duration
	for _, s := range topo.Nodes {
		for _, r := range topo.Nodes {
			if s.Name == r.Name {
				continue
			}
			owd := s.Impair.Delay + s.Impair.Jitter
			if p, ok := topo.PairImpair(s.Name, r.Name); ok {
				owd += p.Delay + p.Jitter
			}
			d = max(d, owd)
		}
	}
	return d
}

// healStretched is bound for a run whose last fault healed links (heal,
// unisolate): SLE2 counts from the network being whole again, but a node's
// transport may still be backing off from the dials that failed across the
// cut, and sends nothing to those peers until the backoff ends
// (node.TCPConfig.ReconnectDelay, 1.5 s by default). A star16 quorum-loss
// whose 14 cut-off leaders all had to reach r1 after a 30 s cut agreed
// 1.9 s after the heal.
func healStretched(bound time.Duration, faults []fault.Fault) time.Duration {
	if len(faults) == 0 {
		return bound
	}
	switch faults[len(faults)-1].Kind {
	case fault.Heal, fault.Unisolate:
		return bound + node.TCPConfig{}.ReconnectDelay()
	}
	return bound
}

// clockStretched is bound for a run whose clock faults may have slowed
// nodes' clocks: a node's timers run at its clock's rate, so a rate of
// -r ppm stretches each of its timeouts, on the host's clock, by
// 1/(1 - r/1e6). The slowest rate any clock fault set stretches the whole
// bound; offsets move no timer.
func clockStretched(bound time.Duration, faults []fault.Fault) time.Duration {
	slowest := 0.0
	for _, f := range faults {
		if f.Kind == fault.Clock && f.Clock != nil {
			slowest = min(slowest, f.Clock.RatePPM)
		}
	}
	if slowest >= 0 {
		return bound
	}
	return time.Duration(float64(bound) / (1 + slowest/1e6))
}
