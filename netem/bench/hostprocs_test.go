//go:build linux

package bench_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/lab/labtest"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
)

// A partition across four shared host processes elects on star16, and
// results.json and the summary report the processes and the most files
// each held open.
func TestRunBenchHostProcesses(t *testing.T) {
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	_, data, err := topologies.LoadSource("star16")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topologies.Parse("star16-shared", append(data, "\nhosting: shared\n"...))
	if err != nil {
		t.Fatal(err)
	}
	scs, err := scenario.Lookup("partition-minority", scenario.Params{Nodes: len(topo.Nodes)})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var summary bytes.Buffer
	res, err := runBench(t.Context(), bench.RunOptions{
		Topology: topo, Scenarios: scs, ScenarioArg: "partition-minority", Runs: 1, Seed: 1,
		OutDir: out, Binary: labtest.Binary(t), Version: "test", HostProcesses: 4,
	}, &summary)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Scenarios[0].Runs[0]
	if !r.OK {
		t.Fatalf("run failed: %s: %s", r.FailureKind, r.Failure)
	}
	if len(r.HostProcesses) != 4 {
		t.Fatalf("host processes %+v, want 4", r.HostProcesses)
	}
	for _, h := range r.HostProcesses {
		if h.Nodes != 4 || h.PeakFiles < 4*4 {
			t.Errorf("%+v: want 4 nodes and their files", h)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back results.Results
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if hf := back.Scenarios[0].Summary.HostFiles; hf == nil || hf.Processes != 4 || hf.PeakFilesPerNode < 4 {
		t.Errorf("results.json host files summary %+v", hf)
	}
	if !strings.Contains(summary.String(), "up to 4 host processes") {
		t.Errorf("the summary does not say the host processes:\n%s", summary.String())
	}
	t.Logf("%s", summary.String())
}
