//go:build linux

package bench

import (
	"reflect"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
)

// TestCheckInputFaults derives a check input from faults alone, with a
// capture that holds no election, only the stable leader's HEARTBEATs: its
// tenure runs from the capture's start to its crash, a partition lasts
// until healed, a delay never cleared until the end, and convergence
// counts from the last fault in force to the agreement on the highest node
// that agreed.
func TestCheckInputFaults(t *testing.T) {
	topo, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	faults := []fault.Fault{
		{Time: at(1), Kind: fault.Partition, Groups: [][]string{{"n1"}, {"n2", "n3"}}},
		{Time: at(2), Kind: fault.Delay, Nodes: []string{"n1"}},
		{Time: at(3), Kind: fault.Crash, Nodes: []string{"n3"}},
		{Time: at(4), Kind: fault.Heal},
	}
	rep := &capture.Report{Start: t0, Claims: []capture.LeaderClaim{{Node: "n3", Epoch: 1, Time: t0.Add(100 * time.Millisecond), Packet: 7}}}
	const bound = 5 * time.Second
	agreed := &lab.Leader{Node: "n2", Nodes: []string{"n1", "n2"}, At: at(6)}
	in := checkInput(rep, topo, faults, at(4), agreed, at(1), at(10), bound)

	wantTenures := []Tenure{{Node: "n3", Epoch: 1, Start: -time.Second, End: 2 * time.Second}}
	if !reflect.DeepEqual(in.Tenures, wantTenures) {
		t.Errorf("tenures %+v, want %+v", in.Tenures, wantTenures)
	}
	wantDisruptions := []Disruption{
		{Start: 0, End: 3 * time.Second, What: "partition"},
		{Start: time.Second, End: 9 * time.Second, What: "impair"},
	}
	if !reflect.DeepEqual(in.Disruptions, wantDisruptions) {
		t.Errorf("disruptions %+v, want %+v", in.Disruptions, wantDisruptions)
	}
	if in.Convergence == nil || *in.Convergence != 2*time.Second {
		t.Errorf("convergence %v, want 2s", in.Convergence)
	}
	if in.Grace != bound || in.Bound != bound {
		t.Errorf("grace %s bound %s, want %s", in.Grace, in.Bound, bound)
	}

	// No convergence: an agreement not on the highest node that agreed,
	// one before the last fault was in force, none, or no fault at all.
	for name, c := range map[string]struct {
		faults []fault.Fault
		agreed *lab.Leader
	}{
		"lower":  {faults, &lab.Leader{Node: "n1", Nodes: []string{"n1", "n2"}, At: at(6)}},
		"before": {faults, &lab.Leader{Node: "n2", Nodes: []string{"n1", "n2"}, At: at(4)}},
		"none":   {faults, nil},
		"calm":   {nil, agreed},
	} {
		if in := checkInput(rep, topo, c.faults, at(4), c.agreed, at(1), at(10), bound); in.Convergence != nil {
			t.Errorf("%s: convergence %s, want none", name, *in.Convergence)
		}
	}
}

// TestSequenceMessageTimes: an arrow runs from the sender's kernel's send
// to the frame reaching the receiver's port when the receiver acknowledged
// it; unacknowledged, it was dropped; with no send time it is drawn at the
// capture's time and claims a receipt only when acknowledgements were seen.
func TestSequenceMessageTimes(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	ref := func(sent, acked *time.Time) capture.MessageRef {
		return capture.MessageRef{Time: *at(100), Sent: sent, Acked: acked, From: "n1", To: "n2", Type: "HALT", Epoch: 2}
	}
	for _, c := range []struct {
		name     string
		ref      capture.MessageRef
		acksSeen bool
		want     report.SequenceMessage
	}{
		{"acked", ref(at(0), at(101)), true, report.SequenceMessage{Time: *at(0), RecvTime: *at(100)}},
		{"dropped", ref(at(0), nil), true, report.SequenceMessage{Time: *at(0), RecvTime: *at(100), Dropped: true}},
		{"clock error", ref(at(103), at(104)), true, report.SequenceMessage{Time: *at(100), RecvTime: *at(100)}},
		{"no send time", ref(nil, nil), false, report.SequenceMessage{Time: *at(100), SendUnknown: true}},
		{"no send time, acked", ref(nil, at(101)), true, report.SequenceMessage{Time: *at(100), SendUnknown: true, RecvTime: *at(100)}},
		{"no send time, others acked", ref(nil, nil), true, report.SequenceMessage{Time: *at(100), SendUnknown: true, RecvTime: *at(100), Dropped: true}},
	} {
		c.want.From, c.want.To, c.want.Type, c.want.Epoch = "n1", "n2", "HALT", 2
		if got := sequenceMessage(c.ref, c.acksSeen); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestFaultMarks: the diagram gets the faults of its time and those
// before whose span reaches into it, each labelled with what it struck.
func TestFaultMarks(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6"}
	faults := []fault.Fault{
		{Time: at(0), Kind: fault.Crash, Nodes: []string{"n2"}},
		{Time: at(1), Kind: fault.Restart, Nodes: []string{"n2"}},
		{Time: at(2), Kind: fault.Partition, Groups: [][]string{{"n1", "n2"}, {"n3", "n4", "n5", "n6"}}},
		{Time: at(3), Kind: fault.Pause, Nodes: []string{"n6"}},
		{Time: at(9), Kind: fault.Delay, Nodes: names, Impair: &fault.Impairment{Delay: 100 * time.Millisecond}},
		{Time: at(10), Kind: fault.Heal},
		{Time: at(20), Kind: fault.Resume, Nodes: []string{"n6"}},
	}
	var got []string
	for _, m := range faultMarks(faults, names, at(8), at(12)) {
		got = append(got, m.Kind+": "+m.Text)
	}
	want := []string{
		"partition: partition n1,n2 | n3,n4,n5,n6",
		"pause: pause n6",
		"delay: delay all 6 nodes (delay 100ms)",
		"heal: heal",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("marks %q, want %q", got, want)
	}
	if got := nodeList([]string{"n1", "n2", "n3", "n4", "n9"}, names); got != "n1,n2…n9 (5)" {
		t.Errorf("nodeList %q", got)
	}
}

// TestCheckInputPause: a pause suspends the paused leader's tenure until
// it is resumed (it still believes it leads, and says so once it runs),
// and is a disruption until then.
func TestCheckInputPause(t *testing.T) {
	topo, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	faults := []fault.Fault{
		{Time: at(1), Kind: fault.Pause, Nodes: []string{"n3"}},
		{Time: at(4), Kind: fault.Resume, Nodes: []string{"n1", "n2", "n3"}},
		{Time: at(5), Kind: fault.Pause, Nodes: []string{"n2"}},
	}
	rep := &capture.Report{Start: t0, Claims: []capture.LeaderClaim{{Node: "n3", Epoch: 1, Time: t0.Add(100 * time.Millisecond), Packet: 7}}}
	in := checkInput(rep, topo, faults, at(5), nil, at(1), at(10), time.Second)
	wantTenures := []Tenure{
		{Node: "n3", Epoch: 1, Start: -time.Second, End: 0},
		{Node: "n3", Epoch: 1, Start: 3 * time.Second, End: 9 * time.Second},
	}
	if !reflect.DeepEqual(in.Tenures, wantTenures) {
		t.Errorf("tenures %+v, want %+v", in.Tenures, wantTenures)
	}
	wantDisruptions := []Disruption{
		{Start: 0, End: 3 * time.Second, What: "pause n3"},
		{Start: 4 * time.Second, End: 9 * time.Second, What: "pause n2"},
	}
	if !reflect.DeepEqual(in.Disruptions, wantDisruptions) {
		t.Errorf("disruptions %+v, want %+v", in.Disruptions, wantDisruptions)
	}
}

// TestSequenceMessagesRetransmitted is the partition-minority
// frame: n3's COORDINATOR to n5, sent 4 ms before the heal while the cut
// was in force, lost, and delivered by a retransmission after the heal.
// It is drawn as two arrows: the first copy dropped where it was lost,
// the retransmission from its own send to its real receipt; a frame whose
// first copy was delivered stays one arrow.
func TestSequenceMessagesRetransmitted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms float64) *time.Time { v := t0.Add(time.Duration(ms * 1e6)); return &v }
	ref := capture.MessageRef{Time: *at(730.8), Sent: at(730.7), Acked: at(835.2), From: "n3", To: "n5", Type: "COORDINATOR", Epoch: 2,
		Transmissions: []capture.Transmission{
			{Time: *at(730.8), Sent: at(730.7), Outcome: capture.OutcomeLost, Cut: true},
			{Time: *at(835.0), Sent: at(834.9), Outcome: capture.OutcomeDelivered},
		}}
	want := []report.SequenceMessage{
		{Time: *at(730.7), RecvTime: *at(730.8), From: "n3", To: "n5", Type: "COORDINATOR", Epoch: 2, Dropped: true, Resent: true, CutDrop: true},
		{Time: *at(834.9), RecvTime: *at(835.0), From: "n3", To: "n5", Type: "COORDINATOR", Epoch: 2, Copy: 1, FirstSent: *at(730.7)},
	}
	if got := sequenceMessages(ref, true); !reflect.DeepEqual(got, want) {
		t.Errorf("drawn %+v\nwant %+v", got, want)
	}
	ref.Transmissions = ref.Transmissions[1:]
	if got := sequenceMessages(ref, true); len(got) != 1 || got[0].Dropped || got[0].Copy != 0 {
		t.Errorf("a frame delivered at its first copy drawn %+v, want one arrow", got)
	}
}

// TestMarkLeaders: the diagram marks where the measured leader settled,
// from the election's trigger, and the tenures that began after it with
// another leader or epoch, each once.
func TestMarkLeaders(t *testing.T) {
	origin := time.Unix(1000, 0)
	el := &capture.Election{Trigger: capture.Trigger{Time: origin.Add(time.Millisecond)}}
	r := results.Run{Leader: "n3", Epoch: 3, TimeToLeaderNS: int64(600 * time.Millisecond), TimeToLeaderFrom: results.TimeFromCapture}
	tenures := []Tenure{
		{Node: "n5", Epoch: 1, Start: -time.Second, End: 0},
		{Node: "n3", Epoch: 3, Start: 590 * time.Millisecond, End: 900 * time.Millisecond},
		{Node: "n4", Epoch: 4, Start: 1035 * time.Millisecond, End: 1100 * time.Millisecond},
		{Node: "n4", Epoch: 4, Start: 1200 * time.Millisecond, End: 1300 * time.Millisecond},
	}
	seq := &report.Sequence{}
	markLeaders(seq, r, el, origin, tenures, nil)
	if seq.Settled == nil || !seq.Settled.Time.Equal(origin.Add(601*time.Millisecond)) || seq.Settled.Leader != "n3" || seq.Settled.Epoch != 3 {
		t.Errorf("settled %+v, want n3 e3 at +601ms", seq.Settled)
	}
	want := []report.LeaderMark{{Time: origin.Add(1035 * time.Millisecond), Leader: "n4", Epoch: 4}}
	if !reflect.DeepEqual(seq.LeaderChanges, want) {
		t.Errorf("changes %+v, want %+v", seq.LeaderChanges, want)
	}
	if end := sequenceEnd(seq, origin.Add(700*time.Millisecond)); !end.Equal(want[0].Time) {
		t.Errorf("diagram ends %v, want at the last change %v: its faults must reach that far", end, want[0].Time)
	}
	// A heal at +1000ms explains the change at +1035ms: marked as its,
	// as the run's count of later changes leaves it out.
	heal := []fault.Fault{{Kind: fault.Heal, Time: origin.Add(time.Second)}, {Kind: fault.Partition, Time: origin}}
	seq = &report.Sequence{}
	markLeaders(seq, r, el, origin, tenures, heal)
	want[0].AfterFault = string(fault.Heal)
	if !reflect.DeepEqual(seq.LeaderChanges, want) {
		t.Errorf("changes after a heal %+v, want %+v", seq.LeaderChanges, want)
	}
	seq = &report.Sequence{}
	markLeaders(seq, results.Run{}, el, origin, tenures, nil)
	if seq.Settled != nil || seq.LeaderChanges != nil {
		t.Errorf("a run that measured no leader marked %+v", seq)
	}
}
