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
	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/netemtest"
)

// TestBenchSIGINT sends SIGINT to `bullylab bench` once its first run
// finished and the second run's nodes are up: it exits 130, leaves nothing
// of the second run's testbed, and writes the first run's results marked
// partial.
func TestBenchSIGINT(t *testing.T) {
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the bench builds testbeds and runs real nodes")
	}
	out := t.TempDir()
	cmd := exec.Command(binary, "bench", "--topology", "star5", "--scenario", "leader-crash", "--runs", "3", "--out", out)
	var mu sync.Mutex
	var stderr, stdout bytes.Buffer
	cmd.Stderr = &lockedWriter{mu: &mu, w: &stderr}
	cmd.Stdout = &lockedWriter{mu: &mu, w: &stdout}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	})
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return "stdout:\n" + stdout.String() + "stderr:\n" + stderr.String()
	}

	// Wait for run 1 to be done and a node of run 2 to run.
	var runs map[string]bool
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if strings.Contains(output(), "run 1/3 ") {
			if runs = descendantRuns(cmd.Process.Pid); len(runs) > 0 {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("bench ended before the interrupt: %v\n%s", waitErr, output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second run's nodes within 2 minutes:\n%s", output())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("bench still running a minute after SIGINT:\n%s", output())
	}
	t.Logf("%s", output())
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit: %v, want status 130", waitErr)
	}
	for run := range runs {
		netemtest.RequireClean(t, run)
	}
	res, err := bench.ReadResults(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	want := bench.Partial{Reason: "interrupted by SIGINT", RunsPlanned: 3, RunsDone: 1}
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
