//go:build linux

// Package netemtest helps tests build netem testbeds: a fresh run name per
// testbed, prefixed per test, a small testbed closed by t.Cleanup, a
// bullylab binary for labs' node processes, and RequireRoot and
// RequireImpairment, which skip only where no testbed can be built or the
// kernel cannot impair links.
package netemtest

import (
	"bytes"
	"errors"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/topologies"
	"github.com/vishvananda/netlink"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// RequireRoot skips the test, with a sentence naming what is missing, when
// this process may not create network namespaces (not root, no
// CAP_NET_ADMIN/CAP_SYS_ADMIN) or the kernel has none. It probes by creating
// one, once per test binary. Any other failure fails the test: a broken
// machine must not look like a skipped test.
func RequireRoot(t testing.TB) {
	t.Helper()
	probeOnce.Do(func() { probeErr = netem.ProbeNamespaces() })
	skipOrFail(t, "creating network namespaces", probeErr)
}

// RequireImpairment skips the test, naming what the kernel lacks, unless
// it offers an impairment backend (netem qdiscs or NFQUEUE), and returns
// what netem.Probe found. A probe that cannot run fails the test. It calls
// RequireRoot first.
func RequireImpairment(t testing.TB) netem.Capabilities {
	t.Helper()
	RequireRoot(t)
	caps, err := netem.Probe()
	skipOrFail(t, "probing the kernel's fault injection", err)
	if caps.Backend() == "" {
		t.Skipf("the kernel offers no impairment backend: %s", caps.Reason)
	}
	return caps
}

// skipOrFail ends the test when err is not nil. It skips it, with a
// sentence naming what is missing, when err wraps netem.ErrNotPermitted or
// netem.ErrNotSupported, and fails it otherwise. what names what needed
// the privilege or feature.
func skipOrFail(t testing.TB, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, netem.ErrNotPermitted):
		t.Skipf("%s needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN (euid %d): %v", what, os.Geteuid(), err)
	case errors.Is(err, netem.ErrNotSupported):
		t.Skipf("%s needs a kernel feature this one lacks: %v", what, err)
	default:
		t.Fatalf("%s: %v", what, err)
	}
}

// RunName returns a run name for t that no run on this machine uses:
// RunPrefix(t) and six random hex digits, 10 bytes, the longest a run name
// may be. A testbed a test leaves on a shared machine says by its prefix
// which test made it, and a test cleans what its runs left by their names
// (netem.CleanRuns), never another's. Build still claims the name
// atomically, so two tests drawing the same one cannot both build.
func RunName(t testing.TB) string {
	t.Helper()
	return freeRun(t, func() string { return RunPrefix(t) + netem.NewRunID()[2:] + netem.NewRunID()[4:] })
}

// RunPrefix is the first 4 bytes of the run names RunName draws for t:
// "t" and three base-36 digits of a hash of the test's full name.
func RunPrefix(t testing.TB) string {
	h := fnv.New32a()
	h.Write([]byte(t.Name()))
	digits := strconv.FormatUint(uint64(h.Sum32()%(36*36*36)), 36)
	return "t" + strings.Repeat("0", 3-len(digits)) + digits
}

// RunID returns a run ID (netem.ValidRunID) no run on this machine uses,
// for a test of what Clean does with objects named after a run ID but
// without a state directory; testbeds take RunName.
func RunID(t testing.TB) string {
	t.Helper()
	return freeRun(t, netem.NewRunID)
}

// freeRun returns the first of up to 100 names draw returns that no run on
// this machine uses: no state directory, no namespace.
func freeRun(t testing.TB, draw func() string) string {
	t.Helper()
	for range 100 {
		run := draw()
		if _, err := os.Stat(netem.StateDir(run)); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if names, _ := os.ReadDir(netem.NetnsDir); hasRun(names, run) {
			continue
		}
		return run
	}
	t.Fatal("no free run name after 100 draws")
	return ""
}

func hasRun(entries []os.DirEntry, run string) bool {
	for _, e := range entries {
		if r, ok := netem.RunOfNamespace(e.Name()); ok && r == run {
			return true
		}
	}
	return false
}

// Build builds topo under a fresh run name (RunName) and closes it when the test ends,
// failing the test if teardown fails. It calls RequireRoot first.
func Build(t testing.TB, topo *topologies.Topology) *netem.Testbed {
	t.Helper()
	RequireRoot(t)
	for range 10 {
		tb, err := netem.Build(t.Context(), topo, RunName(t))
		if errors.Is(err, netem.ErrRunExists) {
			continue // another test drew the same name in between
		}
		if err != nil {
			t.Fatalf("building %s: %v", topo.Name, err)
		}
		t.Cleanup(func() {
			if err := tb.Close(); err != nil {
				t.Errorf("tearing down %s: %v", tb.Run(), err)
			}
		})
		return tb
	}
	t.Fatal("building: every run name drawn was taken")
	return nil
}

// Star builds a testbed of n nodes n1..nN with the default settings.
func Star(t testing.TB, n int) *netem.Testbed {
	t.Helper()
	topo, err := topologies.Star(n)
	if err != nil {
		t.Fatalf("star topology of %d nodes: %v", n, err)
	}
	return Build(t, topo)
}

// MustStart starts argv in node's namespace and kills it when the test ends.
func MustStart(t testing.TB, tb *netem.Testbed, node string, argv ...string) *netem.Process {
	t.Helper()
	p, err := tb.Start(node, argv, nil, "")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// Leftovers counts what a run has on this machine: namespaces and links
// named with its ID, processes whose command line holds it, and its state
// directory.
type Leftovers struct {
	Namespaces, RootLinks, Processes int
	StateDir                         bool
}

// CountLeftovers counts what run has on this machine; a test that tore it
// down wants the zero Leftovers.
func CountLeftovers(t testing.TB, run string) Leftovers {
	t.Helper()
	var c Leftovers
	entries, _ := os.ReadDir(netem.NetnsDir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), run) {
			c.Namespaces++
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatalf("listing links: %v", err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, run) {
			c.RootLinks++
		}
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || len(cmdline) == 0 {
			continue // gone, or a zombie
		}
		if bytes.Contains(cmdline, []byte(run)) {
			c.Processes++
		}
	}
	_, err = os.Stat(netem.StateDir(run))
	c.StateDir = err == nil
	return c
}

// RequireClean fails the test unless run left nothing on this machine.
func RequireClean(t testing.TB, run string) {
	t.Helper()
	if c := CountLeftovers(t, run); c != (Leftovers{}) {
		t.Errorf("run %s left %d namespaces, %d links in the root namespace, %d processes, state dir %v",
			run, c.Namespaces, c.RootLinks, c.Processes, c.StateDir)
	}
}

// MaxNodesEnv caps the testbed sizes a benchmark builds: scripts/test.sh
// sets it so that CI's one pass over every benchmark fits its time limit,
// and a developer sets it to keep a shared machine usable.
const MaxNodesEnv = "BULLYLAB_BENCH_MAX_NODES"

// SkipAboveMaxNodes skips a benchmark of n nodes when $BULLYLAB_BENCH_MAX_NODES
// is set below n; it fails on a value that is no positive number.
func SkipAboveMaxNodes(b *testing.B, n int) {
	b.Helper()
	v := os.Getenv(MaxNodesEnv)
	if v == "" {
		return
	}
	limit, err := strconv.Atoi(v)
	if err != nil || limit < 1 {
		b.Fatalf("%s=%q: want a positive number of nodes", MaxNodesEnv, v)
	}
	if n > limit {
		b.Skipf("%d nodes: over %s=%d", n, MaxNodesEnv, limit)
	}
}
