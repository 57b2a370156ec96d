//go:build linux

// Package labtest starts labs for tests: a node binary built once per test
// binary, and labs under fresh run names that close when the test ends.
package labtest

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/node/cluster"
	"github.com/bullylab/bullylab/topologies"
)

// Boot boots a lab of topo under a fresh run name and closes it when the test
// ends, failing the test if teardown fails. It calls RequireRoot first.
// opts.Binary must be set (see cluster.BuildTemp); opts.Run is ignored.
func Boot(t testing.TB, topo *topologies.Topology, opts lab.BootOptions) *lab.Lab {
	t.Helper()
	netemtest.RequireRoot(t)
	for range 10 {
		opts.Run = netemtest.RunName(t)
		l, err := lab.Boot(t.Context(), topo, opts)
		if errors.Is(err, netem.ErrRunExists) {
			continue // another test drew the same name in between
		}
		if err != nil {
			t.Fatalf("starting lab %s: %v", topo.Name, err)
		}
		t.Cleanup(func() {
			if err := l.Close(); err != nil {
				t.Errorf("tearing down %s: %v", l.Run(), err)
			}
		})
		return l
	}
	t.Fatal("starting lab: every run name drawn was taken")
	return nil
}

// The lab tests run real `bullylab node` processes, compiled once per test
// binary, on first use.
var (
	binOnce    sync.Once
	binPath    string
	binErr     error
	binCleanup func()
)

// Binary returns a bullylab binary for a lab's node processes, building it
// on first use; it requires root as netemtest.RequireRoot does. BULLYLAB_TEST_BINARY
// names another build instead, to compare two builds in one session. A
// test binary that calls it removes the build with RemoveBinary from its
// TestMain.
func Binary(t testing.TB) string {
	t.Helper()
	netemtest.RequireRoot(t)
	if b := os.Getenv("BULLYLAB_TEST_BINARY"); b != "" {
		return b
	}
	binOnce.Do(func() { binPath, binCleanup, binErr = cluster.BuildTemp() })
	if binErr != nil {
		t.Fatalf("building bullylab: %v", binErr)
	}
	return binPath
}

// RemoveBinary removes what Binary built, if anything.
func RemoveBinary() {
	if binCleanup != nil {
		binCleanup()
	}
}
