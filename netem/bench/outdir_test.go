//go:build linux

package bench_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench"
)

// TestOutDir: a directory with another bench's outputs, the runs' key
// files included, is refused, naming it and a file; RemoveOutputs removes
// those outputs and nothing else.
func TestOutDir(t *testing.T) {
	if err := bench.CheckOutDir(filepath.Join(t.TempDir(), "missing")); err != nil {
		t.Errorf("missing dir: %v", err)
	}
	dir := t.TempDir()
	if err := bench.CheckOutDir(dir); err != nil {
		t.Errorf("empty dir: %v", err)
	}
	theirs := []string{"notes.txt", "results.json.bak", "run-1.pcapng", "my-run-leader-crash-1.pcapng",
		"run-leader-crash-1.pcapng.txt", "run-leader-crash-0.pcapng", "report.htm", "sub", "run-1.key", "run-leader-crash-1.key.bak"}
	for _, name := range theirs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory named as an output is the user's too.
	if err := os.Mkdir(filepath.Join(dir, "run-x-2.pcapng"), 0o755); err != nil {
		t.Fatal(err)
	}
	theirs = append(theirs, "run-x-2.pcapng")
	if err := bench.CheckOutDir(dir); err != nil {
		t.Errorf("only the user's files: %v", err)
	}
	ours := []string{"results.json", "bench.txt", "report.html", "run-leader-crash-1.pcapng", "run-leader-crash-1.key",
		"run-latency-sweep_delay_50ms-12.pcapng", "run-latency-sweep_delay_50ms-12.key"}
	for _, name := range ours {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := bench.CheckOutDir(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "results.json") || strings.Contains(err.Error(), "\n") {
		t.Errorf("another bench's outputs: %v, want one line naming %s and results.json", err, dir)
	}
	if err := bench.RemoveOutputs(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	slices.Sort(theirs)
	if !slices.Equal(left, theirs) {
		t.Errorf("left %q, want the user's %q", left, theirs)
	}
	if err := bench.CheckOutDir(dir); err != nil {
		t.Errorf("after RemoveOutputs: %v", err)
	}
}
