//go:build linux

package lab_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
)

// TestLabHostProcesses runs star16 in four shared host processes, nodes
// dealt round-robin (host-3 runs n3, n7, n11, n15; host-2 n2, n6, n10,
// n14): a crash and a pause go to the process that runs the node, a
// partition across processes elects on each side, a host that dies fails
// its nodes naming it, and Close leaves nothing behind.
func TestLabHostProcesses(t *testing.T) {
	bin := labtest.Binary(t)
	topo := labTopology(t, "star16", topologies.HostingShared)
	logs := t.TempDir()
	lb := labtest.Boot(t, topo, lab.BootOptions{Binary: bin, HostProcesses: 4, LogDir: logs})
	run := lb.Run()

	st, err := netem.ReadState(run)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range st.Processes {
		names = append(names, p.Node)
	}
	if want := []string{"host-1", "host-2", "host-3", "host-4"}; !slices.Equal(names, want) {
		t.Fatalf("state.json records processes %v, want %v", names, want)
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(logs, name+".log")); err != nil {
			t.Errorf("host log: %v", err)
		}
	}
	pidOf := func(node string) int { return labState(t, lb, node).PID }
	hosts := lb.HostFiles()
	if len(hosts) != 4 {
		t.Fatalf("HostFiles: %+v, want 4 hosts", hosts)
	}
	for i, h := range hosts {
		node := fmt.Sprintf("n%d", i+1)
		if h.Name != names[i] || h.Nodes != 4 || h.PID != pidOf(node) {
			t.Errorf("host %d: %+v, want %s running 4 nodes, %s among them (pid %d)", i+1, h, names[i], node, pidOf(node))
		}
	}

	first := labFirst(t, lb, "n16")
	labDo(t)(lb.Faults().Crash("n15"))
	if s := labState(t, lb, "n15"); s.State != lab.ProcCrashed {
		t.Fatalf("after crash, n15 is %s", s.State)
	}
	if s := labState(t, lb, "n11"); s.State != lab.ProcRunning || s.PID != hosts[2].PID {
		t.Fatalf("n11, in host-3 with the crashed n15: %+v", s)
	}
	f := labDo(t)(lb.Faults().Pause("n14"))
	if want := fmt.Sprintf("process %d", hosts[1].PID); !strings.Contains(f.Detail, want) {
		t.Errorf("pause detail %q does not name host-2's %s", f.Detail, want)
	}
	if s := labState(t, lb, "n10"); s.State != lab.ProcRunning {
		t.Errorf("n10, in host-2 with the paused n14: %s", s.State)
	}
	high := []string{"n16", "n13", "n12", "n11", "n10"}
	low := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"}
	labDo(t)(lb.Faults().Partition([][]string{high, append(slices.Clone(low), "n14", "n15")}, false, ""))
	cut := labWait(t, lb, "partition across hosts", "n9", first.Epoch, low...)
	labWait(t, lb, "the leader's side", "n16", 0, high...)

	labDo(t)(lb.Faults().Heal())
	labDo(t)(lb.Faults().Resume("n14"))
	labDo(t)(lb.Faults().Restart(t.Context(), "n15"))
	labWait(t, lb, "healed", "n16", cut.Epoch)
	if failed := lb.Monitor().Failed(); len(failed) != 0 {
		t.Fatalf("failed by themselves: %+v", failed)
	}
	for _, h := range lb.HostFiles() {
		// At rest a node holds some ten files: listeners, log, lock, both
		// ends of its connections.
		if h.PeakFiles < 4*4 {
			t.Errorf("%s: peak %d open files for 4 nodes", h.Name, h.PeakFiles)
		}
	}

	if err := syscall.Kill(hosts[1].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var failed []lab.NodeFailure
	for len(failed) < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // polling the lab's view, with a deadline
		failed = lb.Monitor().Failed()
	}
	var failedNames []string
	for _, f := range failed {
		failedNames = append(failedNames, f.Node)
		if !strings.Contains(f.Reason, "shared host host-2") {
			t.Errorf("%s failed for %q, which does not name host-2", f.Node, f.Reason)
		}
	}
	if want := []string{"n2", "n6", "n10", "n14"}; !slices.Equal(failedNames, want) {
		t.Errorf("after host-2 died, failed %v, want %v", failedNames, want)
	}

	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	netemtest.RequireClean(t, run)
	for _, h := range hosts {
		if err := syscall.Kill(h.PID, 0); err == nil {
			t.Errorf("%s (process %d) outlived Close", h.Name, h.PID)
		}
	}
}

// A lab refuses more host processes than nodes before building anything.
func TestLabHostProcessesBounded(t *testing.T) {
	bin := labtest.Binary(t)
	topo := labTopology(t, "star5", topologies.HostingShared)
	_, err := lab.Boot(context.Background(), topo, lab.BootOptions{Binary: bin, HostProcesses: 6})
	if err == nil || !strings.Contains(err.Error(), "6 host processes for 5 nodes") {
		t.Errorf("Boot with 6 host processes for 5 nodes: %v", err)
	}
}
