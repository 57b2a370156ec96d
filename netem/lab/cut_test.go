//go:build linux

package lab_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/topologies/fault"
)

// TestLabCut cuts the leader n5 from n4 alone on a star5 testbed with a
// capture on, has n1 campaign so that every pair has something to say,
// and reads the capture: from the cut on no frame crossed between n4 and
// n5 (the analysis's cut check, which sees each frame acknowledged or
// not), while every other pair exchanged frames. In mode reset the
// capture also shows the resets each side answered the other with.
func TestLabCut(t *testing.T) {
	for _, mode := range []fault.CutMode{fault.ModeDrop, fault.ModeReset} {
		t.Run(string(mode), func(t *testing.T) { testLabCut(t, mode) })
	}
}

func testLabCut(t *testing.T, mode fault.CutMode) {
	topo := labTopology(t, "star5", "")
	for i := range topo.Nodes {
		// Without the stagger an election asks every node above it at
		// once, not in waves that stop at the first ANSWER (node/bully):
		// each campaign below then reaches every pair.
		topo.Nodes[i].Settings.DetectionStagger = 0
	}
	lb, path := labCapturedTopology(t, topo, false)
	names := lb.Nodes()
	first := labFirst(t, lb, "n5")

	cut := labDo(t)(lb.Faults().Apply(t.Context(), fault.Fault{Kind: fault.Cut, Links: [][2]string{{"n5", "n4"}}, Mode: mode}))
	t.Logf("%s: %s", cut.Kind, cut.Detail)
	if !slices.Equal(cut.Links, [][2]string{{"n5", "n4"}}) || cut.Mode != mode || cut.OneWay {
		t.Errorf("record %+v, want the cut as asked", cut)
	}
	for _, c := range []struct {
		node    string
		blocked []string
	}{{"n4", []string{"n5"}}, {"n5", []string{"n4"}}, {"n1", nil}} {
		if s := labState(t, lb, c.node); !slices.Equal(s.Blocked, c.blocked) {
			t.Errorf("%s blocks %v, want %v: a cut blocks the pair alone", c.node, s.Blocked, c.blocked)
		}
	}
	// n4, hearing n5 no more, takes over the side it reaches. Then n1, n2
	// and n3 each start an election, sending ELECTION to every node above
	// it at once, so every pair has talked (n4 and n5 may disagree from here on:
	// no leader need emerge). n1 campaigns once more last: it can start
	// only once its first election is over, an election timeout on, when
	// the others' ELECTIONs are long on the wire.
	labWait(t, lb, "n4 without n5", "n4", first.Epoch, "n4")
	campaignEach(t, lb, "n1", "n2", "n3", "n1")
	if _, err := lb.Capture().Stop(); err != nil {
		t.Fatal(err)
	}
	heal := labDo(t)(lb.Faults().Heal())
	if !slices.Equal(heal.Nodes, []string{"n4", "n5"}) {
		t.Errorf("heal names %v, want the cut pair", heal.Nodes)
	}
	for _, n := range []string{"n4", "n5"} {
		if s := labState(t, lb, n); len(s.Blocked) != 0 {
			t.Errorf("%s still blocks %v after heal", n, s.Blocked)
		}
	}

	addrs := map[netip.Addr]string{}
	for _, s := range lb.Monitor().NodeStates() {
		addrs[netip.MustParseAddrPort(s.Addr).Addr()] = s.Node
	}
	obs := observeCapture(t, path, addrs, cut.InForce)
	for i, a := range names {
		for _, b := range names[i+1:] {
			n := obs.frames[[2]string{a, b}] + obs.frames[[2]string{b, a}]
			cutPair := a == "n4" && b == "n5"
			t.Logf("%s-%s: %d frames on the wire since the cut", a, b, n)
			if !cutPair && n == 0 {
				t.Errorf("%s and %s exchanged no frame while only n4-n5 was cut", a, b)
			}
		}
	}

	rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var check *capture.FaultCheck
	for i, c := range rep.FaultChecks {
		if c.Check == capture.CheckCut && c.Kind == string(fault.Cut) {
			check = &rep.FaultChecks[i]
		}
	}
	if check == nil {
		t.Fatalf("no cut check of the cut: %+v", rep.FaultChecks)
	}
	t.Log(check.Detail)
	if !check.OK || !check.Verified {
		t.Errorf("cut check failed: %s", check.Detail)
	}
	for _, o := range check.Cuts {
		if pair := [2]string{o.From, o.To}; pair != [2]string{"n5", "n4"} && pair != [2]string{"n4", "n5"} {
			t.Errorf("the cut check counts %s -> %s, which the cut left up", o.From, o.To)
		}
		if o.Crossed != 0 {
			t.Errorf("%d frames crossed %s -> %s", o.Crossed, o.From, o.To)
		}
	}

	resets := obs.resets[[2]string{"n4", "n5"}] + obs.resets[[2]string{"n5", "n4"}]
	t.Logf("resets between n4 and n5 since the cut: n4->n5 %d, n5->n4 %d", obs.resets[[2]string{"n4", "n5"}], obs.resets[[2]string{"n5", "n4"}])
	switch {
	case mode == fault.ModeReset && (obs.resets[[2]string{"n4", "n5"}] == 0 || obs.resets[[2]string{"n5", "n4"}] == 0):
		t.Errorf("a reset cut: want resets on the capture both ways between n4 and n5")
	case mode == fault.ModeDrop && resets != 0:
		t.Errorf("a drop cut: %d resets between n4 and n5, want none", resets)
	}
	if mode == fault.ModeReset {
		answered := 0
		for _, o := range check.Cuts {
			if o.Mode != fault.ModeReset {
				t.Errorf("%s -> %s observed in mode %q, want reset", o.From, o.To, o.Mode)
			}
			answered += o.Resets
		}
		if answered == 0 {
			t.Errorf("the cut check counts no reset: %s", check.Detail)
		}
	}
}

// electionsStarted returns how many elections each running node started.
func electionsStarted(lb *lab.Lab) map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range lb.Monitor().NodeStates() {
		if s.View != nil {
			out[s.Node] = s.View.ElectionsStarted
		}
	}
	return out
}

// campaignEach has each of nodes in turn start an election, asking again
// while it is still busy with one (a campaign then does nothing).
func campaignEach(t *testing.T, lb *lab.Lab, nodes ...string) {
	t.Helper()
	deadline := time.Now().Add(capturePhase)
	for _, n := range nodes {
		before := electionsStarted(lb)[n]
		for electionsStarted(lb)[n] <= before {
			if time.Now().After(deadline) {
				t.Fatalf("%s started no election in %v of campaigns", n, capturePhase)
			}
			labDo(t)(lb.Faults().Campaign(t.Context(), n))
			time.Sleep(20 * time.Millisecond) // a poll interval: the deadline bounds the wait
		}
	}
}

// cutObservation is what a capture shows between nodes from some time on:
// frames and resets, by sender and receiver.
type cutObservation struct {
	frames, resets map[[2]string]int
	addrs          map[netip.Addr]string
	since          time.Time
}

func (o *cutObservation) pair(src, dst netip.AddrPort) ([2]string, bool) {
	a, aok := o.addrs[src.Addr()]
	b, bok := o.addrs[dst.Addr()]
	return [2]string{a, b}, aok && bok
}

func (o *cutObservation) Frame(f *capture.Frame) {
	if k, ok := o.pair(f.Src, f.Dst); ok && !f.Time.Before(o.since) {
		o.frames[k]++
	}
}

func (o *cutObservation) Segment(s *capture.Segment) {
	if k, ok := o.pair(s.Src, s.Dst); ok && s.RST && !s.Time.Before(o.since) {
		o.resets[k]++
	}
}

func (o *cutObservation) StreamError(*capture.StreamError) {}

func observeCapture(t *testing.T, path string, addrs map[netip.Addr]string, since time.Time) *cutObservation {
	t.Helper()
	o := &cutObservation{frames: map[[2]string]int{}, resets: map[[2]string]int{}, addrs: addrs, since: since}
	dissectCapture(t, path, o)
	return o
}
