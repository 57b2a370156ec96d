//go:build linux

package bench

import (
	"slices"
	"time"

	"github.com/bullylab/bullylab/netem/bench/report"
)

// election5 is a five-node election after n5 was lost: n1 detects, its
// ELECTION climbs, each node above answers the lower ones and elects in
// turn, n4 hears nothing from n5, halts the lower nodes, waits for their
// HALT_ACKs and sends its COORDINATORs. Every message is sent as soon as
// the one it answers arrived, and takes delay on its sender's egress;
// what goes to n5 is never acknowledged. Without a delay it all happens
// within a millisecond and a half. lost is how n5 was lost: crash, or
// partition (healed after the election).
func election5(delay time.Duration, lost string) report.Sequence {
	t0 := time.Date(2026, 3, 14, 9, 27, 0, 0, time.UTC)
	e := &electionBuilder{delay: delay, lost: "n5", seq: report.Sequence{
		Title:  "five nodes, " + lost + " of n5, delay " + delay.String(),
		Nodes:  []string{"n1", "n2", "n3", "n4", "n5"},
		Origin: t0,
	}}
	all := []string{"n1", "n2", "n3", "n4", "n5"}
	if delay > 0 {
		e.seq.Faults = append(e.seq.Faults, report.FaultMark{Kind: "delay", Time: t0.Add(-400 * time.Millisecond), Text: "delay all 5 nodes (delay " + delay.String() + ")", Nodes: all})
	}
	switch lost {
	case "crash":
		e.seq.Faults = append(e.seq.Faults, report.FaultMark{Kind: "crash", Time: t0, Text: "crash n5", Nodes: []string{"n5"}})
	case "partition":
		e.seq.Faults = append(e.seq.Faults, report.FaultMark{Kind: "partition", Time: t0, Text: "partition n1,n2,n3,n4 | n5", Groups: [][]string{{"n1", "n2", "n3", "n4"}, {"n5"}}})
	}
	at := t0.Add(500 * time.Millisecond)
	recv := e.send(at, "ELECTION", 1, "n1", "n2", "n3", "n4", "n5")
	// Each node answers every ELECTION from below, and elects upwards on
	// the first one it hears.
	var n4elected time.Time
	for _, n := range []string{"n2", "n3", "n4"} {
		first := recv[n]
		e.send(first.Add(20*time.Microsecond), "ANSWER", 1, n, "n1")
		var higher []string
		for _, h := range all[slices.Index(all, n)+1:] {
			higher = append(higher, h)
		}
		r := e.send(first.Add(40*time.Microsecond), "ELECTION", 1, n, higher...)
		for _, h := range higher {
			if h != "n5" {
				e.send(r[h].Add(20*time.Microsecond), "ANSWER", 1, h, n)
			}
		}
		if n == "n4" {
			n4elected = first.Add(40 * time.Microsecond)
		}
	}
	halted := e.send(n4elected.Add(300*time.Microsecond+2*delay), "HALT", 2, "n4", "n3", "n2", "n1")
	var lastAck time.Time
	for _, n := range []string{"n3", "n2", "n1"} {
		r := e.send(halted[n].Add(20*time.Microsecond), "HALT_ACK", 2, n, "n4")
		lastAck = latest(lastAck, r["n4"])
	}
	done := e.send(lastAck.Add(20*time.Microsecond), "COORDINATOR", 2, "n4", "n3", "n2", "n1")
	if lost == "partition" {
		e.seq.Faults = append(e.seq.Faults, report.FaultMark{Kind: "heal", Time: done["n1"].Add(3 * time.Millisecond), Text: "heal"})
	}
	return e.seq
}

type electionBuilder struct {
	delay time.Duration
	lost  string // what is sent to it is never acknowledged
	seq   report.Sequence
}

// send sends typ from from to each of to, 15µs apart, and returns when
// each receiver had it; what goes to the lost node is dropped.
func (e *electionBuilder) send(at time.Time, typ string, epoch uint64, from string, to ...string) map[string]time.Time {
	recv := map[string]time.Time{}
	for i, n := range to {
		sent := at.Add(time.Duration(i) * 15 * time.Microsecond)
		arrived := sent.Add(e.delay + 40*time.Microsecond)
		e.seq.Messages = append(e.seq.Messages, report.SequenceMessage{Time: sent, RecvTime: arrived, Dropped: n == e.lost, From: from, To: n, Type: typ, Epoch: epoch})
		recv[n] = arrived
	}
	return recv
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
