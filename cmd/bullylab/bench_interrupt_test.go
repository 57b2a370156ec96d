//go:build linux

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/netemtest"
)

// TestBenchSIGINT sends SIGINT to `bullylab bench` once its first run
// finished and the second run's nodes are up: it exits 130, leaves nothing
// of the second run's testbed, and writes the first run's results marked
// partial.
func TestBenchSIGINT(t *testing.T) { testBenchSignal(t, syscall.SIGINT, 130) }

// TestBenchSIGTERM is TestBenchSIGINT with SIGTERM, as a service manager
// or a CI job's timeout stops a bench: exit status 143, and the partial
// results say SIGTERM.
func TestBenchSIGTERM(t *testing.T) { testBenchSignal(t, syscall.SIGTERM, 143) }

func testBenchSignal(t *testing.T, sig syscall.Signal, code int) {
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	out := t.TempDir()
	b := startBench(t, out)
	runs := b.waitSecondRun()
	b.signal(sig)
	if got := b.waitExit(); got != code {
		t.Errorf("exit status %d, want %d", got, code)
	}
	for run := range runs {
		netemtest.RequireClean(t, run)
	}
	reason := "interrupted by " + signalName(sig)
	if want := "bench: " + reason + " after 1 of 3 runs; partial results in " + out; !strings.Contains(b.output(), want) {
		t.Errorf("the output does not say %q", want)
	}
	res, err := results.ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	want := results.Partial{Reason: reason, RunsPlanned: 3, RunsDone: 1}
	if res.Partial == nil || *res.Partial != want {
		t.Errorf("results.json partial %+v, want %+v", res.Partial, want)
	}
	if len(res.Scenarios) != 1 || len(res.Scenarios[0].Runs) != 1 {
		t.Errorf("results.json: %d scenarios, want 1 with run 1 alone", len(res.Scenarios))
	}
	for _, f := range []string{"bench.txt", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestBenchSecondSIGINT sends SIGINT as in TestBenchSIGINT, then again as
// soon as the bench says it is stopping, while the second run's testbed
// is torn down: the bench still tears it down, leaving nothing, but
// writes no outputs, and exits 130, the first signal's status.
func TestBenchSecondSIGINT(t *testing.T) {
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	out := t.TempDir()
	b := startBench(t, out)
	runs := b.waitSecondRun()
	b.signal(syscall.SIGINT)
	// Said before the run in progress is told to stop: the second signal
	// cannot come after the outputs are written.
	b.waitOutput("bench: SIGINT: stopping the run in progress")
	b.signal(syscall.SIGINT)
	if got := b.waitExit(); got != 130 {
		t.Errorf("exit status %d, want 130", got)
	}
	for run := range runs {
		netemtest.RequireClean(t, run)
	}
	for _, want := range []string{
		"bench: SIGINT again: aborting once the testbed is torn down",
		"bench: bench aborted: interrupted by SIGINT after 1 of 3 runs, nothing written",
	} {
		if !strings.Contains(b.output(), want) {
			t.Errorf("the output does not say %q", want)
		}
	}
	for _, f := range []string{"results.json", "bench.txt", "report.html"} {
		if _, err := os.Stat(filepath.Join(out, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want none written", f, err)
		}
	}
}

// benchProc is a `bullylab bench --topology star5 --runs 3` subprocess.
type benchProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   bytes.Buffer  // stdout, then stderr, as written
	wrote chan struct{} // a value after each write
	done  chan struct{} // closed once it exited
	err   error         // cmd.Wait's, once done
}

func startBench(t *testing.T, out string) *benchProc {
	b := &benchProc{t: t, wrote: make(chan struct{}, 1), done: make(chan struct{}),
		cmd: exec.Command(binary, "bench", "--topology", "star5", "--scenario", "leader-crash", "--runs", "3", "--out", out)}
	b.cmd.Stdout, b.cmd.Stderr = b, b
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
		t.Logf("bench output:\n%s", b.output())
	})
	return b
}

func (b *benchProc) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return b.out.Write(p)
}

func (b *benchProc) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// waitSecondRun waits until run 1 is done and a node of run 2 runs, and
// returns the run IDs of the bench's labs then.
func (b *benchProc) waitSecondRun() map[string]bool {
	b.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if strings.Contains(b.output(), "run 1/3 ") {
			if runs := descendantRuns(b.cmd.Process.Pid); len(runs) > 0 {
				return runs
			}
		}
		select {
		case <-b.done:
			b.t.Fatalf("bench ended before the interrupt: %v", b.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatal("no second run's nodes within 2 minutes")
		}
	}
}

// waitOutput waits until the output holds s, reading it as soon as the
// bench writes.
func (b *benchProc) waitOutput(s string) {
	b.t.Helper()
	timeout := time.After(time.Minute)
	for !strings.Contains(b.output(), s) {
		select {
		case <-b.wrote:
		case <-b.done:
			if !strings.Contains(b.output(), s) {
				b.t.Fatalf("bench exited (%v) without saying %q", b.err, s)
			}
		case <-timeout:
			b.t.Fatalf("bench did not say %q within a minute", s)
		}
	}
}

func (b *benchProc) signal(sig syscall.Signal) {
	b.t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		b.t.Fatal(err)
	}
}

// waitExit waits a minute at most for the bench to exit, and returns its
// exit status.
func (b *benchProc) waitExit() int {
	b.t.Helper()
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		b.t.Fatal("bench still running a minute after the signal")
	}
	var ee *exec.ExitError
	if !errors.As(b.err, &ee) {
		b.t.Fatalf("exit: %v, want a status", b.err)
	}
	return ee.ExitCode()
}

// descendantRuns are the run IDs named in the command lines of pid's
// descendants: the nodes of the lab a bench runs.
func descendantRuns(pid int) map[string]bool {
	parent := map[int]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		n, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 {
			parent[n], _ = strconv.Atoi(f[1])
		}
	}
	runs := map[string]bool{}
	for n := range parent {
		below := false
		for p, hops := parent[n], 0; p > 1 && hops < 10; p, hops = parent[p], hops+1 {
			if p == pid {
				below = true
				break
			}
		}
		if !below {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(n) + "/cmdline")
		for _, s := range strings.FieldsFunc(string(cmdline), func(r rune) bool { return r == 0 || r == '/' || r == '=' }) {
			if netem.ValidRunID(s) {
				runs[s] = true
			}
		}
	}
	return runs
}
