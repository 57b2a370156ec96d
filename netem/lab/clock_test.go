//go:build linux

package lab_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// TestLabClock sets the leader n3's clock 90 s ahead, gaining 10%, waits
// until it has drifted 200 ms, twice what the clock check lets a HELLO's
// stamp precede its send (so that a clock that did not drift fails it),
// and forces new connections from it twice: n1 restarted, which n3 must
// dial to heartbeat it (the skew the running node was told), and n3
// itself restarted (the skew the lab starts it with). The capture shows
// every HELLO n3 sent at 90 s and its drift ahead of its send time, within
// the check's tolerance, and the others' HELLOs at the host's clock; the
// status reports the skew. Each node in its own process and all in a
// shared host.
func TestLabClock(t *testing.T) {
	for _, hosting := range []topologies.Hosting{topologies.HostingProcess, topologies.HostingShared} {
		t.Run(string(hosting), func(t *testing.T) { testLabClock(t, hosting) })
	}
}

func testLabClock(t *testing.T, hosting topologies.Hosting) {
	lb, path := labCaptured(t, "star3", hosting, true)
	names := lb.Nodes()
	waitLeader(t, lb, "n3", names...)

	labDo(t)(lb.Faults().Pause("n1"))
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no skew", second(lb.Faults().Apply(t.Context(), fault.Fault{Kind: fault.Clock, Nodes: []string{"n1"}})), "clock: no skew given"},
		{"rate beyond", second(lb.Faults().Clock(t.Context(), []string{"n2"}, fault.ClockSkew{RatePPM: 2e6})), "clock rate 2e+06 ppm: beyond"},
		{"paused", second(lb.Faults().Clock(t.Context(), []string{"n1"}, fault.ClockSkew{Offset: time.Second})), "node n1 is paused"},
		{"unknown node", second(lb.Faults().Clock(t.Context(), []string{"n9"}, fault.ClockSkew{Offset: time.Second})), `has no node "n9"`},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, c.err, c.want)
		}
	}
	labDo(t)(lb.Faults().Resume("n1"))

	skew := fault.ClockSkew{Offset: 90 * time.Second, RatePPM: fault.MaxClockRatePPM}
	rec := labDo(t)(lb.Faults().Apply(t.Context(), fault.Fault{Kind: fault.Clock, Nodes: []string{"n3"}, Clock: &skew}))
	if want := "n3 clock offset +1m30s rate +100000 ppm"; rec.Detail != want || rec.Clock == nil || *rec.Clock != skew {
		t.Errorf("record %+v (detail %q), want the skew asked and detail %q", rec, rec.Detail, want)
	}
	// The status reports the skew in force, drift included.
	drifted := func(d time.Duration) bool {
		st := labState(t, lb, "n3")
		return st.View != nil && st.View.Clock != nil && st.View.Clock.RatePPM == skew.RatePPM && st.View.Clock.Offset >= skew.Offset+d
	}
	for deadline := time.Now().Add(capturePhase); !drifted(200 * time.Millisecond); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("n3's status says clock %+v %v after the fault, want 200 ms of drift", labState(t, lb, "n3").View.Clock, capturePhase)
		}
	}
	checkStatusClock := func(what string) {
		t.Helper()
		if !drifted(200 * time.Millisecond) {
			t.Errorf("%s: n3's status says clock %+v, want 90 s and more ahead at %g ppm", what, labState(t, lb, "n3").View.Clock, skew.RatePPM)
		}
	}
	labDo(t)(lb.Faults().Crash("n1"))
	labDo(t)(lb.Faults().Restart(t.Context(), "n1"))
	waitLeader(t, lb, "n3", names...)
	waitHeartbeats(t, lb, "n3", 10)
	checkStatusClock("running when its clock was set")
	labDo(t)(lb.Faults().Crash("n3"))
	waitLeader(t, lb, "n2", "n1", "n2")
	labDo(t)(lb.Faults().Restart(t.Context(), "n3"))
	waitLeader(t, lb, "n3", names...)
	waitHeartbeats(t, lb, "n3", 10)
	checkStatusClock("restarted")
	stats, err := lb.Capture().Stop()
	if err != nil {
		t.Fatal(err)
	}
	if stats.Drops != 0 {
		t.Errorf("the capture dropped %d frames", stats.Drops)
	}

	rep, err := capture.AnalyzeFile(path, capture.AnalyzeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var checks []capture.FaultCheck
	for _, c := range rep.FaultChecks {
		if c.Check == capture.CheckClock {
			checks = append(checks, c)
		}
	}
	if len(checks) != 1 {
		t.Fatalf("%d clock checks, want 1: %+v", len(checks), rep.FaultChecks)
	}
	c := checks[0]
	t.Log(c.Detail)
	if !c.Verified || !c.OK {
		t.Errorf("clock check verified %v, ok %v: %s", c.Verified, c.OK, c.Detail)
	}
	i := slices.IndexFunc(c.Clocks, func(o capture.ClockObservation) bool { return o.Node == "n3" })
	if i < 0 {
		t.Fatalf("no observation of n3: %+v", c.Clocks)
	}
	n3 := c.Clocks[i]
	for _, o := range c.Clocks {
		t.Logf("%s: %d HELLOs stamped %v to %v before their send time, against its skew", o.Node, o.Hellos, time.Duration(o.GapMinNS), time.Duration(o.GapMaxNS))
	}
	// n1 restarted is dialled once, n1 and n2 by n3 restarted once each.
	// Drifted 200 ms at least before the first, and at most 10% of the
	// test's time since.
	lo, hi := int64(90*time.Second+200*time.Millisecond-capture.ClockToleranceLate), int64(90*time.Second)+int64(time.Since(rec.Time))/10
	if !n3.Asked || n3.Hellos < 3 || n3.MinNS < lo || n3.MaxNS > hi {
		t.Errorf("n3: %+v, want 3 or more HELLOs 90.2 s and more ahead, less at most %v", n3, capture.ClockToleranceLate)
	}
	others := 0
	for _, o := range c.Clocks {
		if o.Node == "n3" {
			continue
		}
		others += o.Hellos
		if o.Asked || o.MinNS < -int64(capture.ClockToleranceLate) || o.MaxNS > int64(time.Millisecond) || !o.OK {
			t.Errorf("%s: %+v, want HELLOs on the host's clock", o.Node, o)
		}
	}
	if others == 0 {
		t.Error("no other node sent a HELLO: nothing shows the skew was n3's alone")
	}
}
