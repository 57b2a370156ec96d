//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
)

// measurement is what measure found of the run.
type measurement struct {
	rep   *capture.Report
	fault *fault.Fault      // the measured fault
	el    *capture.Election // the election it triggered; nil when the capture holds none
	// lossyAtEnd: loss was still in force when the counters were read.
	lossyAtEnd bool
}

// measure reads the nodes' counters once they stand still, stops the
// capture and closes the lab, then analyses the capture: the measured
// election, and the counters against the wire. A failed step (stepErr)
// fails the run once the lab is down.
func (ru *runner) measure(ctx context.Context, stepErr error) (*measurement, *runFailure) {
	end := ru.readEnd(ctx)
	ru.phase(PhaseTeardown)
	if f := ru.teardown(stepErr); f != nil {
		return nil, f
	}
	ru.phase(PhaseMeasure)
	rep, f := ru.analyze()
	if f != nil {
		return nil, f
	}
	mfault, el, f := ru.measureElection(rep)
	if f != nil {
		return nil, f
	}
	if f := ru.checkCounters(rep, end); f != nil {
		return nil, f
	}
	return &measurement{rep: rep, fault: mfault, el: el, lossyAtEnd: end.lossy}, nil
}

// endCounters are the nodes' sent counters at the end of the run.
type endCounters struct {
	after map[string]map[string]uint64
	// cutoff is when the frames written before the read have reached
	// the wire, and none written after it has (with a constant delay).
	cutoff time.Time
	lossy  bool // loss was in force at the read
}

// readEnd reads the counters before teardown, once the election's tail is
// over: a node may still answer a late ELECTION or re-assert itself after
// everyone agreed, and a frame written after this read but on the wire
// before the capture stops would be seen and not counted. Nodes that
// crashed, restarted, left or joined since the baseline lost or reset
// theirs. A stale frame TCP delivers late after a heal can start one more
// round well after the agreement, so it waits for the counters to stand
// still (or gives up after a while: the cut-off still holds), and only
// what was sent before the read is counted on the wire.
func (ru *runner) readEnd(ctx context.Context) endCounters {
	endDelay := ru.lab.MaxDelay()
	waitStill(ctx, ru.lab, max(200*time.Millisecond, 3*messageDelay(endDelay, ru.backend)), 5*time.Second)
	after, read := stillCounters(ctx, ru.lab)
	// A frame written before the read reaches the switch at most the
	// delay in force later; one written after it, no earlier than that
	// when the delay is constant (the usual case; with jitter the two may
	// mix).
	return endCounters{after: after, cutoff: read.Add(endDelay), lossy: ru.lab.Lossy()}
}

// waitStill waits until no running node's election counters move for
// quiet, at most timeout.
func waitStill(ctx context.Context, lb testbed, quiet, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	var last uint64
	since := time.Now()
	for first := true; ; first = false {
		var sum uint64
		for _, s := range lb.NodeStates() {
			if s.View != nil {
				for _, t := range electionTypes {
					sum += s.View.Counters.Sent[t.String()]
				}
			}
		}
		now := time.Now()
		if first || sum != last {
			last, since = sum, now
		} else if now.Sub(since) >= quiet {
			return
		}
		if now.After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(quietPoll):
		}
	}
}

// teardown stops the capture, reads the nodes' event logs and closes the
// lab, then fails the run for the first of a failed step, the capture,
// and the lab's close.
func (ru *runner) teardown(stepErr error) *runFailure {
	// Let frames in flight reach the capture before stopping it: a
	// delayer may hold what a node wrote last for the delay in force.
	time.Sleep(ru.lab.MaxDelay() + 50*time.Millisecond)
	_, capErr := ru.lab.StopCapture()
	failed := ru.lab.Failed()
	// The logs go with the lab's state.
	ru.logs = readLogs(ru.lab)
	closeErr := ru.closeLab()
	if len(failed) > 0 {
		// Before the step's error, which is often this one's consequence
		// (no leader, or not the expected one).
		return nodeFailure(failed)
	}
	if stepErr != nil {
		kind := results.FailStep
		if errors.Is(stepErr, scenario.ErrNoLeader) || errors.Is(stepErr, scenario.ErrUnexpectedLeader) {
			kind = results.FailLiveness
		}
		return failure(kind, "%v", stepErr)
	}
	if capErr != nil {
		return failure(results.FailSetup, "capture: %v", capErr)
	}
	if closeErr != nil {
		return failure(results.FailSetup, "tearing down the lab: %v", closeErr)
	}
	return nil
}

// nodeFailure fails a run in which nodes stopped by themselves, naming
// them and the first one's reason.
func nodeFailure(failed []lab.NodeFailure) *runFailure {
	names := make([]string, 0, min(len(failed), maxNamed))
	for _, f := range failed[:min(len(failed), maxNamed)] {
		names = append(names, f.Node)
	}
	more := ""
	if len(failed) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(failed)-maxNamed)
	}
	return failure(results.FailNode, "%d node(s) stopped by themselves, no fault stopping them: %s%s; %s: %s",
		len(failed), strings.Join(names, ", "), more, failed[0].Node, failed[0].Reason)
}

// maxNamed is how many nodes a failure names before it counts the rest.
const maxNamed = 8

// analyze analyses the capture and checks its authentication.
func (ru *runner) analyze() (*capture.Report, *runFailure) {
	// The run's key is gone with the lab's state: verify with the copy.
	rep, err := capture.AnalyzeFile(ru.capPath, capture.AnalyzeOptions{Name: ru.capName, Key: &ru.key})
	if err != nil {
		return nil, failure(results.FailSetup, "analyzing the capture: %v", err)
	}
	if a := rep.Auth; a == nil || a.Failed > 0 || a.ReplayCount > 0 {
		return nil, failure(results.FailAuth, "%s", authProblem(a))
	}
	ru.r.FramesVerified, ru.r.FramesUnverified = rep.Auth.Verified, rep.Auth.Unverified
	ru.r.ClockErrorNS = rep.ClockErrorNS
	return rep, nil
}

// authProblem says what is wrong with a run's capture's authentication.
func authProblem(a *capture.AuthReport) string {
	switch {
	case a == nil:
		return "the capture holds no authenticated frame, though the nodes had a cluster key"
	case a.Failed > 0 && len(a.Failures) > 0:
		f := a.Failures[0]
		return fmt.Sprintf("%d frames failed the cluster key's check; the first, packet %d (%s, frame %d of its connection, %s from %s): %s",
			a.Failed, f.Packet, f.Stream, f.Frame, f.Type, f.From, f.Reason)
	case a.Failed > 0:
		return fmt.Sprintf("%d frames failed the cluster key's check", a.Failed)
	}
	return fmt.Sprintf("%d HELLOs replayed an earlier one's nonce", a.ReplayCount)
}

// measureElection finds the measured fault, the last one applied before
// the measured wait_leader, and the election it triggered in the capture,
// and records the election's leader, time to leader, detection and
// messages.
func (ru *runner) measureElection(rep *capture.Report) (*fault.Fault, *capture.Election, *runFailure) {
	var mfault *fault.Fault
	if len(ru.faultsBefore) > 0 {
		mfault = &ru.faultsBefore[len(ru.faultsBefore)-1]
	}
	if mfault == nil || ru.measuredAg == nil {
		return nil, nil, failure(results.FailStep, "the scenario measured no election (no fault before its measured wait_leader)")
	}
	ru.r.Leader, ru.r.Epoch = ru.measuredAg.Node, ru.measuredAg.Epoch
	el := measuredElection(rep, mfault.Time, ru.measuredAg.Node)
	if el != nil {
		ru.recordElection(el)
	}
	if el != nil && el.TimeToLeaderNS != nil {
		ru.r.TimeToLeaderFrom = results.TimeFromCapture
	} else {
		// The capture saw no converged election: fall back to the lab's
		// agreement, which is within a poll of the truth.
		ru.r.TimeToLeaderNS = int64(ru.measuredAg.At.Sub(mfault.Time))
		ru.r.TimeToLeaderFrom = results.TimeFromLabPoll
	}
	return mfault, el, nil
}

// measuredElection is the election the measured fault triggered and the
// measured wait_leader waited for: of those whose trigger is that record
// (one per side of a partition), the one leader won, else the first of
// them, else the first election after the record.
func measuredElection(rep *capture.Report, fault time.Time, leader string) *capture.Election {
	var first *capture.Election
	for i := range rep.Elections {
		e := &rep.Elections[i]
		if e.Trigger.Kind == "wire" || !e.Trigger.Time.Equal(fault) {
			continue
		}
		if e.Leader == leader {
			return e
		}
		if first == nil {
			first = e
		}
	}
	if first != nil {
		return first
	}
	for i := range rep.Elections {
		if e := &rep.Elections[i]; !e.Start.Before(fault) || !e.End.Before(fault) {
			return e
		}
	}
	return nil
}

// recordElection records what the capture measured of el: its number,
// its time to leader, its detection (none for a cold start, where nothing
// had to be detected) and its messages but the HEARTBEATs.
func (ru *runner) recordElection(el *capture.Election) {
	ru.r.Election = el.N
	if el.TimeToLeaderNS != nil {
		ru.r.TimeToLeaderNS = *el.TimeToLeaderNS
	}
	if el.DetectionNS != nil && ru.sc.Start != scenario.StartCold {
		v := *el.DetectionNS
		ru.r.DetectionNS = &v
		ru.r.DetectedBy = results.DetectedByReason(el.First.Reason)
	}
	for _, t := range wire.Types {
		if t == wire.TypeHeartbeat {
			continue
		}
		if n := el.Messages.Get(t); n > 0 || t.Algorithm() == ru.algorithm {
			ru.r.Messages[t.String()] = int(n)
		}
	}
}

// checkCounters cross-checks the nodes' counters from the baseline to end
// with what the capture saw them send in that time.
func (ru *runner) checkCounters(rep *capture.Report, end endCounters) *runFailure {
	wireSent, err := capture.CountSent(ru.capPath, func(_ string, at time.Time) bool {
		return !at.Before(ru.baseline) && !at.After(end.cutoff)
	})
	if err != nil {
		return failure(results.FailSetup, "counting the capture: %v", err)
	}
	faults := ru.faults.faults
	ru.r.Counters = crossCheck(ru.names, ru.before, end.after, wireSent, disturbedNodes(faults), dropping(ru.opts.Topology, faults, ru.names))
	if cs := rep.Capture; cs != nil && cs.Drops > 0 {
		// Frames the ring had no room for are missing from every count
		// the capture gives; comparing them with the counters would only
		// list the losses node by node.
		ru.r.Counters = results.CountersCheck{Mismatches: []string{fmt.Sprintf(
			"the capture dropped %d of %d packets (its ring was full), so it cannot be compared with the counters", cs.Drops, cs.Packets)}}
	}
	return nil
}

// electionTypes are the types cross-checked against the nodes' counters:
// HEARTBEATs race the counter reads at both ends. HELLO, which opens each
// connection a node dials when the cluster has a key, is transport, but
// nodes count it as sent like any frame, and dial only to send to a peer
// they have no connection to, which a settled cluster does not do: it is
// compared too.
var electionTypes = []wire.Type{wire.TypeElection, wire.TypeAnswer, wire.TypeHalt, wire.TypeHaltAck,
	wire.TypeReject, wire.TypeCoordinator, wire.TypeJoin, wire.TypeLeave, wire.TypeMembers, wire.TypeHello,
	wire.TypeRingElection, wire.TypeElected}

// stillCounters reads the running nodes' sent counters twice in a row
// until the two reads agree, and returns them with a time between the
// reads: every node's counters were the same before and after it, so a
// frame on the wire before that time was counted and one after it was
// not (with no delay in force). It gives up after a few tries, returning
// the last read, when the nodes keep sending.
func stillCounters(ctx context.Context, lb testbed) (map[string]map[string]uint64, time.Time) {
	prev := sentCounters(lb.NodeStates())
	for range 20 {
		at := time.Now()
		cur := sentCounters(lb.NodeStates())
		if sameCounters(prev, cur) || ctx.Err() != nil {
			return cur, at
		}
		prev = cur
	}
	return prev, time.Now()
}

func sameCounters(a, b map[string]map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for n, ca := range a {
		cb, ok := b[n]
		if !ok {
			return false
		}
		for _, t := range electionTypes {
			if ca[t.String()] != cb[t.String()] {
				return false
			}
		}
	}
	return true
}

// sentCounters reads the running nodes' sent counters by node and type.
func sentCounters(st []lab.NodeState) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, s := range st {
		if s.State == lab.ProcRunning && s.View != nil {
			out[s.Node] = s.View.Counters.Sent
		}
	}
	return out
}

// crossCheck compares, per node that ran from the baseline to the end
// undisturbed, the frames of each election type its counters say it sent
// with the frames the capture saw from it.
//
// What it can compare exactly: a node counts a frame as sent once the
// kernel took all its bytes, and the lab drops packets only at the
// receivers (partitions, isolation and loss alike), so every frame that
// left a node crossed the switch and the capture saw it once (TCP
// retransmissions are reassembled away). A frame can still be counted and
// never leave: written into a connection whose earlier segments go
// unacknowledged (the peer's side drops them), it waits in the kernel
// behind them, and when TCP_USER_TIMEOUT aborts the connection it is
// discarded unsent. So for the nodes in lossy, which sent while a
// partition, isolation or loss was in force, the counters only bound the
// capture from above; for every other node the two must be equal.
func crossCheck(names []string, before, after map[string]map[string]uint64, wireSent capture.SentCounts, disturbed, lossy map[string]bool) results.CountersCheck {
	cc := results.CountersCheck{OK: true}
	for _, n := range names {
		b, okb := before[n]
		a, oka := after[n]
		if disturbed[n] || !okb || !oka {
			continue // crashed or restarted: its counters are gone or reset
		}
		if lossy[n] {
			cc.AtMost = append(cc.AtMost, n)
		}
		for _, t := range electionTypes {
			ts := t.String()
			got := int(a[ts]) - int(b[ts])
			w := int(wireSent[n][ts])
			switch {
			case w == got:
			case lossy[n] && w < got:
			case lossy[n]:
				cc.OK = false
				cc.Mismatches = append(cc.Mismatches, fmt.Sprintf("%s sent %d %s by its counters, the capture saw more: %d", n, got, ts, w))
			default:
				cc.OK = false
				cc.Mismatches = append(cc.Mismatches, fmt.Sprintf("%s sent %d %s by its counters, the capture saw %d", n, got, ts, w))
			}
		}
	}
	return cc
}

// dropping returns the nodes that may have written into a network that
// dropped their packets or the acknowledgements of them during the run:
// with a partition, a cut or an isolation every node may have (each may
// send to a node cut off; with mode reset TCP aborts the connection and
// drops what it had not sent), and with loss every node whose sends or whose peers'
// sends were lossy, which for simplicity is every node too; the same when
// the topology itself loses packets.
func dropping(topo *topologies.Topology, faults []fault.Fault, names []string) map[string]bool {
	out := map[string]bool{}
	lossy := slices.ContainsFunc(topo.Nodes, func(n topologies.Node) bool { return n.Impair.Loss > 0 }) ||
		slices.ContainsFunc(topo.PairImpairs, func(p topologies.PairImpair) bool { return p.Impair.Loss > 0 })
	for _, f := range faults {
		if lossy {
			break
		}
		switch f.Kind {
		case fault.Partition, fault.Isolate, fault.Cut, fault.Loss:
			lossy = true
		}
	}
	if lossy {
		for _, n := range names {
			out[n] = true
		}
	}
	return out
}

// disturbedNodes returns the nodes that crashed, restarted, left or joined:
// their counters were lost or reset.
func disturbedNodes(faults []fault.Fault) map[string]bool {
	out := map[string]bool{}
	for _, f := range faults {
		switch f.Kind {
		case fault.Crash, fault.Restart, fault.Leave, fault.Join:
			for _, n := range f.Nodes {
				out[n] = true
			}
		}
	}
	return out
}
