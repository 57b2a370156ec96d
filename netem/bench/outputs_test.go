//go:build linux

package bench_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
)

// requireOutputModes fails unless every file in dir is bench.OutputMode,
// but for the runs' cluster key files, which must be owner-only (0600),
// and every file of want is there.
func requireOutputModes(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		seen[e.Name()] = true
		want := os.FileMode(results.OutputMode)
		if strings.HasSuffix(e.Name(), ".key") {
			want = 0o600
		}
		if got := info.Mode(); got != want {
			t.Errorf("%s is %v, want %v", e.Name(), got, want)
		}
	}
	for _, name := range want {
		if !seen[name] {
			t.Errorf("%s is missing from %s", name, dir)
		}
	}
}

// The outputs are readable by all whatever the umask: `sudo bullylab
// bench` followed by an unprivileged `bullylab compare` must work.
func TestOutputModes(t *testing.T) {
	old := syscall.Umask(0o077) // as strict as root's umask gets
	defer syscall.Umask(old)
	dir := t.TempDir()
	if err := report.WriteOutputs(dir, resultstest.Sample(1), nil); err != nil {
		t.Fatal(err)
	}
	requireOutputModes(t, dir, "results.json", "bench.txt", "report.html")
	// Written again over the first ones, still.
	if err := report.WriteOutputs(dir, resultstest.Sample(2), nil); err != nil {
		t.Fatal(err)
	}
	requireOutputModes(t, dir, "results.json", "bench.txt", "report.html")
	if _, err := results.ReadResults(filepath.Join(dir, "results.json")); err != nil {
		t.Fatal(err)
	}
}

// runBench runs a bench and writes its outputs as `bullylab bench` does:
// when it has some to write, into opts.OutDir and its summary table on
// summary (when not nil). A write error replaces the bench's own.
func runBench(ctx context.Context, opts bench.RunOptions, summary io.Writer) (*results.Results, error) {
	measured, err := bench.RunBench(ctx, opts)
	if measured == nil {
		return nil, err
	}
	if measured.Writable {
		if werr := report.WriteOutputs(opts.OutDir, measured.Results, measured.Sequences); werr != nil {
			return measured.Results, werr
		}
		if summary != nil {
			if werr := results.WriteSummary(summary, measured.Results); werr != nil {
				return measured.Results, werr
			}
		}
	}
	return measured.Results, err
}
