//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/remote/remotetest"
)

// `bullylab up` of a topology across three stand-in hosts, reached from
// their hub's namespace: status and fault act on it through its control
// socket; then the controller and the hosts' agents are SIGKILLed, which
// leaves the hosts' shares behind, and `bullylab clean --hosts` removes
// every one of them.
func TestUpSpanKilledThenClean(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a testbed across stand-in hosts")
	}
	hs, file := spanHosts3(t)
	up, run, waited, _ := startSpanUp(t, hs, file)
	out, errOut, code := runBin(t, "status", "--run", run)
	if code != 0 || !strings.Contains(out, "h1:"+run+"h1-n1") || !strings.Contains(out, "n6") {
		t.Fatalf("status: exit %d, %s\n%s", code, errOut, out)
	}
	if _, errOut, code := runBin(t, "exec", "--run", run, "n1", "--", "true"); code == 0 || !strings.Contains(errOut, "node n1 of testbed "+run+" runs on host h1: ssh there and run ip netns exec "+run+"h1-n1 CMD") {
		t.Errorf("exec of a node on another host: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runBin(t, "fault", "--run", run, "crash", "n6"); code != 0 {
		t.Fatalf("fault crash n6: exit %d: %s", code, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _, _ := runBin(t, "status", "--run", run, "--json")
		if strings.Contains(out, `"leader": {`) && strings.Contains(out, `"node": "n5"`) && regexp.MustCompile(`"node": "n6",[^}]*"state": "crashed"`).MatchString(out) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreement on n5 30s after n6 crashed:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond) // polling the control socket, with a deadline
	}

	// The controller and its agents die at once, as when the machines
	// lose power mid-run but the hosts' kernels stay up: nothing tears
	// the shares down.
	agents := agentsIn(t, hs.Namespaces)
	if len(agents) != len(hs.Hosts) {
		t.Fatalf("%d agents in the stand-in hosts, want %d", len(agents), len(hs.Hosts))
	}
	up.Process.Signal(syscall.SIGKILL)
	for _, pid := range agents {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	<-waited
	if n := netemtest.CountLeftovers(t, run).Namespaces; n == 0 {
		t.Fatal("the killed agents' shares are gone already: nothing for clean --hosts to do")
	}
	clean := exec.Command(binary, "clean", "--hosts", file, "--run", run)
	var cleanOut bytes.Buffer
	clean.Stdout, clean.Stderr = &cleanOut, &cleanOut
	if err := netem.StartInNamespace(hs.Hub, clean); err != nil {
		t.Fatal(err)
	}
	if err := clean.Wait(); err != nil {
		t.Fatalf("clean --hosts: %v\n%s", err, cleanOut.String())
	}
	t.Logf("clean --hosts:\n%s", cleanOut.String())
	for _, h := range hs.Hosts {
		if !strings.Contains(cleanOut.String(), h.Name+": ") {
			t.Errorf("clean --hosts says nothing of %s", h.Name)
		}
	}
	// clean --hosts --run cleaned the run's shares on its hosts; its
	// controller's state directory is on this machine.
	if out, errOut, code := runBin(t, "clean", "--run", run); code != 0 || !strings.HasSuffix(out, "runs cleaned: "+run+"\n") {
		t.Errorf("clean --run %s: exit %d, %q %s", run, code, out, errOut)
	}
	netemtest.RequireClean(t, run)
}

// spanRuns returns the runs a testbed across n hosts named run has on this
// machine when the hosts are stand-ins: its controller's and every
// host's share.
func spanRuns(run string, n int) []string {
	runs := []string{run}
	for k := range n {
		runs = append(runs, remote.ShareRun(run, k))
	}
	return runs
}

// `bullylab down` of a testbed across hosts, started with --capture:
// every host's share goes, the cluster key stays beside the capture, and
// the merged capture, verified with it, holds the boot election of the six
// nodes on the three hosts and every frame verified: every host captured
// from before the first node started.
func TestUpSpanDown(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a testbed across stand-in hosts")
	}
	hs, file := spanHosts3(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "span.pcapng")
	_, run, waited, rest := startSpanUp(t, hs, file, "--capture", path)
	st, _, _ := runBin(t, "status", "--run", run, "--json")
	if !regexp.MustCompile(`"key_file": "([^"]+)"`).MatchString(st) {
		t.Fatalf("status --json names no key file:\n%s", st)
	}
	if _, errOut, code := runBin(t, "down", "--run", run); code != 0 {
		t.Fatalf("down: exit %d: %s", code, errOut)
	}
	<-waited
	out := strings.Join(<-rest, "\n")
	if !regexp.MustCompile(`capture .*span.pcapng: \d+ packets from 3 hosts, 0 dropped; times within ±`).MatchString(out) ||
		!strings.Contains(out, "testbed "+run+" down (bullylab down): removed from 3 hosts") {
		t.Errorf("up's output after down:\n%s", out)
	}
	netemtest.RequireClean(t, run)
	keyFile := filepath.Join(dir, "span.key")
	if info, err := os.Stat(keyFile); err != nil || info.Mode() != 0o600 {
		t.Fatalf("the capture's key file after down: %v, %v; want mode 0600", info, err)
	}
	js, errOut, code := runBin(t, "analyze", "--json", "--cluster-key", keyFile, path)
	var rep capture.Report
	if code != 0 || json.Unmarshal([]byte(js), &rep) != nil || rep.ClockErrorNS == 0 || rep.Auth == nil {
		t.Fatalf("analyze of the merged capture: exit %d, %s\n%.2000s", code, errOut, js)
	}
	if a := rep.Auth; a.Failed != 0 || a.Unverified != 0 || a.Verified != rep.Frames || rep.Messages.Hello == 0 {
		t.Errorf("the merged capture: %+v of %d frames, %d HELLOs; want every frame verified", a, rep.Frames, rep.Messages.Hello)
	}
	if len(rep.Elections) == 0 || rep.Elections[0].First.Reason != "boot" {
		t.Errorf("the merged capture's elections %+v: want the boot election first", rep.Elections)
	}
}

// shareHostBinary has the host binary that up copies to the stand-in
// hosts, which share this file system, removed once the last test using it
// is done, if it was not there before tests copied it. Content-named, it is
// the same file for every copy of this test binary, and two `go test` runs
// at once must not remove it from under each other: each test holds a
// shared lock on a file beside it in the temporary directory while it runs,
// and one that finds it missing marks that file; the test that ends
// holding the lock alone removes a marked binary.
func shareHostBinary(t *testing.T, hostBin string) {
	t.Helper()
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "bullylab-test-"+filepath.Base(hostBin)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil {
		lock.Close()
		t.Fatal(err)
	}
	if _, err := os.Stat(hostBin); os.IsNotExist(err) {
		lock.WriteAt([]byte("copied by a test\n"), 0)
	}
	t.Cleanup(func() {
		defer lock.Close()
		if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			return // another test still uses it
		}
		if fi, err := lock.Stat(); err == nil && fi.Size() > 0 {
			os.Remove(hostBin)
			lock.Truncate(0)
		}
	})
}

// spanHosts3 starts three stand-in hosts and writes a topology of six
// nodes across them.
func spanHosts3(t *testing.T) (*remotetest.Hosts, string) {
	t.Helper()
	hs := remotetest.StartHosts(t, 3)
	hostBin, err := remote.HostBinary(remote.CheckOptions{Binary: binary})
	if err != nil {
		t.Fatal(err)
	}
	shareHostBinary(t, hostBin)
	file := filepath.Join(t.TempDir(), "six.yaml")
	if err := os.WriteFile(file, hs.Topology("name: six\nnodes: 6\nsettings: {heartbeat: 100ms, failure_timeout: 500ms, election_timeout: 300ms}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return hs, file
}

// startSpanUp runs `bullylab up FILE args...` in the hosts' hub namespace
// until it says the testbed is up, and returns the process, its run, a
// channel closed once it exited, and one that gets its output from then
// on once it has exited. The test's cleanup kills it by PID and cleans.
func startSpanUp(t *testing.T, hs *remotetest.Hosts, file string, args ...string) (*exec.Cmd, string, <-chan struct{}, <-chan []string) {
	t.Helper()
	up := exec.Command(binary, append([]string{"up", file}, args...)...)
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	up.Stderr = &stderr
	if err := netem.StartInNamespace(hs.Hub, up); err != nil {
		t.Fatal(err)
	}
	lines := scanLines(stdout)
	waited := make(chan struct{})
	rest := make(chan []string, 1)
	var run string // once up said it
	t.Cleanup(func() {
		up.Process.Kill()
		<-waited
		if run != "" {
			netem.CleanRuns(context.Background(), spanRuns(run, len(hs.Hosts))...)
		}
	})
	re := regexp.MustCompile(`^testbed (bl[0-9a-f]{4}) up across 3 hosts: 6 nodes, leader n6`)
	var seen []string
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				up.Wait()
				close(waited)
				t.Fatalf("up exited before it was up:\n%s\n%s", strings.Join(seen, "\n"), stderr.String())
			}
			seen = append(seen, l)
			m := re.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			t.Log(l)
			go func() {
				var after []string
				for l := range lines {
					after = append(after, l)
				}
				up.Wait()
				close(waited)
				rest <- append(after, stderr.String())
			}()
			run = m[1]
			return up, run, waited, rest
		case <-timeout:
			t.Fatalf("not up after 2 minutes:\n%s", strings.Join(seen, "\n"))
		}
	}
}

// agentsIn returns the PIDs of the `bullylab agent` processes in the
// namespaces.
func agentsIn(t *testing.T, namespaces []string) []int {
	t.Helper()
	inodes := map[uint64]bool{}
	for _, ns := range namespaces {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(netem.NetnsDir, ns), &st); err != nil {
			t.Fatal(err)
		}
		inodes[st.Ino] = true
	}
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if err != nil || len(args) < 2 || args[1] != "agent" {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", p.Name(), "ns", "net"), &st) == nil && inodes[st.Ino] {
			pids = append(pids, pid)
		}
	}
	return pids
}
