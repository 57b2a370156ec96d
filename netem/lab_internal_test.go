package netem

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/google/uuid"
)

func TestNodeIDs(t *testing.T) {
	a, err := nodeIDs(50, 42)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := nodeIDs(50, 42)
	c, _ := nodeIDs(50, 43)
	if !slices.Equal(a, b) {
		t.Error("the same seed drew different IDs")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds drew the same IDs")
	}
	for i, id := range a {
		if id.Version() != 4 || id.Variant() != uuid.RFC4122 {
			t.Errorf("ID %s is not a version-4 UUID", id)
		}
		if i > 0 && !node.Less(a[i-1], id) {
			t.Errorf("IDs not ascending at %d: %s then %s", i, a[i-1], id)
		}
	}
	if r, _ := nodeIDs(3, 0); len(r) != 3 {
		t.Errorf("unseeded: %v", r)
	}
}

func TestCombine(t *testing.T) {
	got := combine(Impairment{Delay: 5 * time.Millisecond, Loss: 10, Reorder: 5},
		Impairment{Delay: 30 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 10, Reorder: 1})
	want := Impairment{Delay: 35 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 19, Reorder: 5}
	if got != want {
		t.Errorf("combine = %+v, want %+v", got, want)
	}
	if got := combine(Impairment{Loss: 10}, Impairment{}); got.Loss != 10 {
		t.Errorf("10%% on top of nothing is %v%%", got.Loss)
	}
}

func TestEventWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	// A record from an earlier run in the same log must not count.
	if err := os.WriteFile(path, []byte(`{"event":"status","from":"electing","to":"normal"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := watchEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	step := func(text string, wantStarted, wantNormal bool) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(text)
		f.Close()
		started, normal, err := w.scan()
		if err != nil || started != wantStarted || normal != wantNormal {
			t.Errorf("after %q: started %v normal %v (%v), want %v %v", text, started, normal, err, wantStarted, wantNormal)
		}
	}
	step("", false, false)
	step(`{"event":"node_st`, false, false) // half a record
	step(`arted","pid":7}`+"\n", true, false)
	step("runtime: something not JSON\n", true, false)
	step(`{"event":"status","from":"electing","to":"waiting"}`+"\n", true, false)
	step(`{"event":"status","from":"waiting","to":"normal"}`+"\n", true, true)
}

func TestAgreement(t *testing.T) {
	run := func(node, status, leader string, epoch uint64) NodeStatus {
		return NodeStatus{Node: node, State: ProcRunning, Status: status, Leader: leader, Epoch: epoch}
	}
	st := []NodeStatus{run("n1", "normal", "n3", 2), run("n2", "normal", "n3", 2), run("n3", "normal", "n3", 2),
		{Node: "n4", State: ProcCrashed}}
	if ag, ok := Agreement(st); !ok || ag.Node != "n3" || ag.Epoch != 2 || len(ag.Nodes) != 3 {
		t.Errorf("Agreement = %+v, %v", ag, ok)
	}
	st[1].Epoch = 1
	if _, ok := Agreement(st); ok {
		t.Error("agreement across epochs")
	}
	st[1].Epoch = 2
	st[2] = NodeStatus{Node: "n3", State: ProcPaused}
	if _, ok := Agreement(st); ok {
		t.Error("agreement on a paused leader")
	}
}
