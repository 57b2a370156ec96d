//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	hs := remotetest.Start(t, 3)
	hostBin, err := remote.HostBinary(remote.CheckOptions{Binary: binary})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hostBin); os.IsNotExist(err) {
		// The stand-in hosts share this file system: the copy is this test's.
		t.Cleanup(func() { os.Remove(hostBin) })
	}
	var b strings.Builder
	b.WriteString("name: six\nnodes: 6\nsettings: {heartbeat: 100ms, failure_timeout: 500ms, election_timeout: 300ms}\nhosts:\n")
	for _, h := range hs.Hosts {
		fmt.Fprintf(&b, "  - {name: %s, ssh: %q, user: root, key: %q, known_hosts: %q}\n", h.Name, h.SSH, h.Key, h.KnownHosts)
	}
	file := filepath.Join(t.TempDir(), "six.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	up := exec.Command(binary, "up", file)
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	up.Stderr = &stderr
	if err := netem.StartInNamespace(hs.Hub, up); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { up.Wait(); close(waited) }()
	t.Cleanup(func() {
		up.Process.Kill()
		<-waited
	})
	run := waitSpanUp(t, stdout)
	t.Cleanup(func() { netem.Clean(context.Background()) })

	out, errOut, code := runBin(t, "status", "--run", run)
	if code != 0 || !strings.Contains(out, "h1:"+run+"h1-n1") || !strings.Contains(out, "n6") {
		t.Fatalf("status: exit %d, %s\n%s", code, errOut, out)
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
	clean := exec.Command(binary, "clean", "--hosts", file)
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
	netemtest.RequireClean(t, run)
}

// waitSpanUp reads up's output until the testbed is up, and returns its
// run.
func waitSpanUp(t *testing.T, stdout interface{ Read([]byte) (int, error) }) string {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	re := regexp.MustCompile(`^testbed (bl[0-9a-f]{4}) up across 3 hosts: 6 nodes, leader n6`)
	var seen []string
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("up exited before it was up:\n%s", strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if m := re.FindStringSubmatch(l); m != nil {
				t.Log(l)
				go func() {
					for range lines {
					}
				}()
				return m[1]
			}
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
