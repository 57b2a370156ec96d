//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// upProc is a `bullylab up` child process.
type upProc struct {
	cmd  *exec.Cmd
	run  string
	mu   sync.Mutex
	out  bytes.Buffer
	line chan string // stdout lines, closed at EOF
	done chan struct{}
	err  error // Wait's, once done is closed
}

// startUp runs `bullylab up TOPOLOGY --run ID args...` under a fresh run
// ID; the test's cleanup kills it (by PID) and cleans its run if a test
// failed half-way.
func startUp(t *testing.T, topo string, args ...string) *upProc {
	t.Helper()
	netemtest.RequireRoot(t)
	return startUpAs(t, netemtest.RunName(t), topo, args...)
}

// startUpAs is startUp under the run name run.
func startUpAs(t *testing.T, run, topo string, args ...string) *upProc {
	t.Helper()
	return startUpEnv(t, run, nil, topo, args...)
}

// startUpEnv is startUpAs with env added to this process's environment.
func startUpEnv(t *testing.T, run string, env []string, topo string, args ...string) *upProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"up", topo, "--run", run}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	u := &upProc{cmd: cmd, run: run, line: make(chan string, 1024), done: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &u.mu, w: &u.out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			u.mu.Lock()
			u.out.WriteString(sc.Text() + "\n")
			u.mu.Unlock()
			select {
			case u.line <- sc.Text():
			default:
			}
		}
		close(u.line)
		u.err = cmd.Wait()
		close(u.done)
	}()
	t.Cleanup(func() {
		select {
		case <-u.done:
		default:
			_ = cmd.Process.Kill()
			<-u.done
			if _, err := netem.CleanRuns(context.Background(), run); err != nil {
				t.Errorf("cleaning after a killed up: %v", err)
			}
		}
	})
	return u
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (u *upProc) output() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.out.String()
}

// waitUp waits for the "testbed ... up:" line.
func (u *upProc) waitUp(t *testing.T) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-u.line:
			if !ok {
				t.Fatalf("up exited before it was up: %v; output:\n%s", u.err, u.output())
			}
			if strings.HasPrefix(l, "testbed "+u.run+" up:") {
				t.Log(l)
				return
			}
		case <-timeout:
			t.Fatalf("up not up after 2 minutes; output:\n%s", u.output())
		}
	}
}

// wait waits for up to exit and returns its exit code.
func (u *upProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-u.done:
	case <-time.After(time.Minute):
		t.Fatalf("up did not exit a minute after being told to; output:\n%s", u.output())
	}
	var ee *exec.ExitError
	switch {
	case u.err == nil:
		return 0
	case errors.As(u.err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("up: %v", u.err)
	return -1
}

// leftovers is what a run has on this machine: what every testbed test
// counts, and what a run under `bullylab up` adds to it.
type leftovers struct {
	netemtest.Leftovers
	liveRecorded      int
	mounts, rootTable bool
}

func countLeftovers(t *testing.T, run string, recorded []netem.StateProcess) leftovers {
	t.Helper()
	c := leftovers{Leftovers: netemtest.CountLeftovers(t, run)}
	for _, sp := range recorded {
		if sp.Alive() {
			c.liveRecorded++
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	c.mounts = bytes.Contains(mi, []byte(netem.StateDir(run)+"/"))
	if conn, err := nftables.New(); err == nil {
		tables, _ := conn.ListTables()
		for _, tb := range tables {
			c.rootTable = c.rootTable || tb.Name == netem.NftTable(run)
		}
	}
	return c
}

// cleanedElsewhere fails the test for what `clean --run run` said (out),
// unless it found nothing of run: then a clean of every dead run, which
// anyone may start on this machine, took it first, and the test's check
// that nothing of run is left says whether all of it went.
func cleanedElsewhere(t *testing.T, run, out string) {
	t.Helper()
	if out == "nothing to clean\n" {
		t.Logf("clean --run %s found nothing of it: another process's clean removed it first", run)
		return
	}
	t.Errorf("clean --run %s said %q", run, out)
}

func requireNoLeftovers(t *testing.T, run string, recorded []netem.StateProcess) {
	t.Helper()
	if c := countLeftovers(t, run, recorded); c != (leftovers{}) {
		t.Errorf("run %s left %+v", run, c)
	}
}

// nodeTables counts the run's nftables tables in its node namespaces.
func nodeTables(t *testing.T, run string) int {
	t.Helper()
	entries, _ := os.ReadDir(netem.NetnsDir)
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), run+"-n") {
			continue
		}
		ns, err := netns.GetFromName(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		conn, err := nftables.New(nftables.WithNetNSFd(int(ns)))
		if err != nil {
			ns.Close()
			t.Fatal(err)
		}
		tables, err := conn.ListTables()
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if tb.Name == netem.NftTable(run) {
				n++
			}
		}
	}
	return n
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runBin(t, args...)
	if code != 0 {
		t.Fatalf("bullylab %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// TestUpTeardown stops `bullylab up` every way it can be stopped, at the
// stages where that is hardest, and checks that nothing of the run is left:
// namespaces, links in this namespace, nftables tables (in the node
// namespaces while up, in this one after), processes with the run ID in
// their argv or a recorded PID, the tmpfs of the node data, the state
// directory.
func TestUpTeardown(t *testing.T) {
	stop := map[string]func(t *testing.T, u *upProc){
		"SIGINT":  func(t *testing.T, u *upProc) { u.cmd.Process.Signal(syscall.SIGINT) },
		"SIGTERM": func(t *testing.T, u *upProc) { u.cmd.Process.Signal(syscall.SIGTERM) },
		"down": func(t *testing.T, u *upProc) {
			if out := mustCLI(t, "down", "--run", u.run); !strings.Contains(out, "testbed "+u.run+" down") {
				t.Errorf("down said %q", out)
			}
		},
	}
	for _, how := range []string{"SIGINT", "SIGTERM", "down"} {
		t.Run(how+"/up", func(t *testing.T) {
			netemtest.RequireImpairment(t) // for the delay below
			u := startUp(t, "star5")
			u.waitUp(t)
			mustCLI(t, "fault", "partition", "n1,n2", "n3,n4,n5", "--run", u.run)
			mustCLI(t, "fault", "delay", "n1", "20ms", "--run", u.run)
			if n := nodeTables(t, u.run); n != 5 {
				t.Fatalf("%d nftables tables in the node namespaces, want 5 (firewalls, and n1's impairer)", n)
			}
			st, err := netem.ReadState(u.run)
			if err != nil || len(st.Processes) != 5 {
				t.Fatalf("state of the run: %+v, %v", st, err)
			}
			if c := countLeftovers(t, u.run, st.Processes); c.Namespaces != 6 || c.liveRecorded != 5 || !c.mounts {
				t.Fatalf("while up: %+v", c)
			}
			requireRunKey(t, st)
			stop[how](t, u)
			if code := u.wait(t); code != 0 {
				t.Errorf("up exited %d after %s; output:\n%s", code, how, u.output())
			}
			if !strings.Contains(u.output(), "testbed "+u.run+" down") {
				t.Errorf("up did not say it was down:\n%s", u.output())
			}
			requireNoLeftovers(t, u.run, st.Processes)
			if _, err := os.Lstat(st.KeyFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cluster key %s left after %s: %v", st.KeyFile, how, err)
			}
		})
	}
	for _, how := range []string{"SIGINT", "SIGTERM"} {
		// star250 takes long enough to stop it while it builds the
		// namespaces, and again while it starts the node processes.
		t.Run(how+"/mid-build", func(t *testing.T) {
			u := startUp(t, "star250")
			waitFor(t, "20 namespaces", func() bool { return countLeftovers(t, u.run, nil).Namespaces >= 20 })
			stop[how](t, u)
			if code := u.wait(t); code != 1 || !strings.Contains(u.output(), "interrupted while starting") {
				t.Errorf("up exited %d; output:\n%s", code, u.output())
			}
			requireNoLeftovers(t, u.run, nil)
		})
		t.Run(how+"/mid-boot", func(t *testing.T) {
			u := startUp(t, "star250")
			var recorded []netem.StateProcess
			waitFor(t, "10 node processes", func() bool {
				st, err := netem.ReadState(u.run)
				if err == nil && len(st.Processes) >= 10 {
					recorded = st.Processes
					return true
				}
				return false
			})
			stop[how](t, u)
			if code := u.wait(t); code != 1 || !strings.Contains(u.output(), "interrupted while starting") {
				t.Errorf("up exited %d; output:\n%s", code, u.output())
			}
			requireNoLeftovers(t, u.run, recorded)
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(time.Millisecond) // a poll interval: the deadline bounds the wait
	}
}

// TestCleanAfterUpKilled SIGKILLs `bullylab up`, which leaves everything
// behind, and checks that `bullylab clean` removes it all.
func TestCleanAfterUpKilled(t *testing.T) {
	// The nodes outlive their parent. Orphans go to PID 1, which on some
	// VMs never reaps them; as subreaper this test inherits and reaps them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	u := startUp(t, "star5")
	u.waitUp(t)
	mustCLI(t, "fault", "partition", "n1,n2", "n3,n4,n5", "--run", u.run)
	if out := mustCLI(t, "fault", "cut", "n1:n2", "--mode", "reset", "--run", u.run); !strings.HasPrefix(out, "cut n1:n2: refusing (TCP with resets) n1<->n2 (testbed "+u.run) {
		t.Errorf("fault cut printed %q", out)
	}
	st, err := netem.ReadState(u.run)
	if err != nil {
		t.Fatal(err)
	}
	u.cmd.Process.Kill()
	u.wait(t)
	if c := countLeftovers(t, u.run, st.Processes); c.Namespaces != 6 || c.liveRecorded != 5 || !c.StateDir || !c.mounts {
		t.Fatalf("killed up left %+v, want its 6 namespaces, 5 nodes, tmpfs and state dir", c)
	}
	requireRunKey(t, st)
	out := mustCLI(t, "clean", "--run", u.run)
	t.Log(strings.TrimSpace(out))
	if !strings.Contains(out, "cleaned 1 runs: ") || !strings.Contains(out, "runs cleaned: "+u.run+"\n") || !strings.Contains(out, "6 namespaces") {
		cleanedElsewhere(t, u.run, out)
	}
	for _, p := range st.Processes {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(p.PID, &ws, 0, nil); err != nil {
			t.Errorf("reaping node process %d: %v", p.PID, err)
		}
	}
	requireNoLeftovers(t, u.run, st.Processes)
	if _, err := os.Lstat(st.KeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cluster key %s left after clean: %v", st.KeyFile, err)
	}
}

// requireRunKey checks that a lab's run records its cluster key file, in
// its state directory, mode 0600, and that every recorded node process
// reads it.
func requireRunKey(t *testing.T, st *netem.RunState) {
	t.Helper()
	if st.KeyFile != netem.KeyPath(st.Run) {
		t.Fatalf("state.json records key file %q, want %s", st.KeyFile, netem.KeyPath(st.Run))
	}
	fi, err := os.Lstat(st.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); !fi.Mode().IsRegular() || perm != 0o600 {
		t.Errorf("key file %s: mode %v, want a regular file of mode 0600", st.KeyFile, fi.Mode())
	}
	if _, err := wire.ReadKeyFile(st.KeyFile); err != nil {
		t.Error(err)
	}
	for _, p := range st.Processes {
		if i := slices.Index(p.Argv, "--cluster-key"); i < 0 || i+1 >= len(p.Argv) || p.Argv[i+1] != st.KeyFile {
			t.Errorf("node %s runs %v, without --cluster-key %s", p.Node, p.Argv, st.KeyFile)
		}
	}
}

func TestTestbedCLIErrors(t *testing.T) {
	netemtest.RequireRoot(t)
	wantUsage(t, `topology "nosuch": no such file or built-in topology`, "up", "nosuch")
	wantUsage(t, "up: want one topology", "up")
	wantUsage(t, `--run "my-lab": not a run name (`+netem.RunNameRule+`)`, "up", "star3", "--run", "my-lab")
	absent := netemtest.RunName(t) // drawn free
	wantError(t, "no testbed is up with run name "+absent, "status", "--run", absent)
	wantUsage(t, `fault: unknown fault "explode"`, "fault", "explode", "n1")
	wantUsage(t, `fault delay: delay "soon": want a duration`, "fault", "delay", "n1", "soon")
	wantUsage(t, "fault partition: want two or more groups", "fault", "partition", "n1,n2")
	wantUsage(t, `fault loss: "120%": want a percentage`, "fault", "loss", "n1", "120%")
	wantUsage(t, "fault crash: --jitter is for delay", "fault", "crash", "n1", "--jitter", "1ms")
	wantUsage(t, `fault: unknown flag --bogus (flags: --run, --one-way, --jitter, --mode)`, "fault", "heal", "--bogus")
	wantUsage(t, `fault: unknown flag --rnu; did you mean --run?`, "fault", "heal", "--rnu", "x")
	wantUsage(t, `fault cut: --mode "rst": want drop or reset`, "fault", "cut", "n1:n2", "--mode", "rst")
	wantUsage(t, "fault crash: --mode is for partition, isolate and cut", "fault", "crash", "n1", "--mode=reset")
	wantUsage(t, `fault cut: "n1": want NODE:NODE`, "fault", "cut", "n1")
	wantUsage(t, `fault clear: "n1:n2": want NODE... or one NODE:PEER, as delay and loss take`, "fault", "clear", "n1:n2", "n3")
	wantUsage(t, `fault clock: offset "soon": want a signed duration`, "fault", "clock", "n1", "soon")

	u := startUp(t, "star3")
	u.waitUp(t)
	wantError(t, `run `+u.run+` has no node "n9"`, "fault", "crash", "n9", "--run", u.run)
	wantError(t, `has no node or group "site-x"`, "fault", "partition", "n1", "site-x", "--run", u.run)
	wantError(t, "node n1 is running, not paused", "fault", "resume", "n1", "--run", u.run)
	wantError(t, `cut: run `+u.run+` has no node "n9"`, "fault", "cut", "n1:n9", "--mode", "reset", "--run", u.run)
	wantError(t, `run `+u.run+` has no node "n9"`, "exec", "--run", u.run, "n9", "--", "true")
	if _, _, code := runBin(t, "exec", "--run", u.run, "n1", "--", "sh", "-c", "exit 7"); code != 7 {
		t.Errorf("exec of a command exiting 7 exited %d", code)
	}
	// /proc/net follows the network namespace of the reader.
	if out := mustCLI(t, "exec", "--run", u.run, "n2", "--", "cat", "/proc/net/fib_trie"); !strings.Contains(out, "10.77.0.3") {
		t.Errorf("exec n2 does not see n2's address 10.77.0.3:\n%s", out)
	}

	// A second testbed: commands without --run must ask which, and
	// status lists them.
	v := startUp(t, "star3")
	v.waitUp(t)
	out, errOut, code := runBin(t, "status")
	if code != 0 || !strings.Contains(out, " "+u.run+" ") || !strings.Contains(out, " "+v.run+" ") || !strings.Contains(out, "pick one with --run") {
		t.Errorf("status with two testbeds up: exit %d, %q %s", code, out, errOut)
	}
	_, errOut, code = runBin(t, "fault", "heal")
	if code != 1 || !strings.Contains(errOut, "testbeds are up: ") || !strings.Contains(errOut, u.run+" (star3, started by ") ||
		!strings.Contains(errOut, v.run+" (star3, started by ") || !strings.HasSuffix(errOut, ": pick one with --run NAME\n") {
		t.Errorf("fault with two testbeds up: exit %d, %q", code, errOut)
	}
	mustCLI(t, "down", "--run", v.run)
	mustCLI(t, "down", "--run", u.run)
	u.wait(t)
	v.wait(t)
}

// TestTestbedCLINotRoot runs the testbed commands as nobody.
func TestTestbedCLINotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running as another user needs root to switch to it")
	}
	// nobody must be able to reach the binary in its private temp dir.
	dir := filepath.Dir(binary)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, fi.Mode().Perm())
	for _, args := range [][]string{
		{"up", "star5"},
		{"status"},
		{"fault", "crash", "n1"},
		{"exec", "n1", "--", "true"},
		{"down"},
		{"clean"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v as nobody: %v, want exit status 2; stderr %q", args, err, stderr.String())
			continue
		}
		msg := stderr.String()
		if !strings.Contains(msg, "needs root") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%v as nobody: stderr %q, want one line saying it needs root", args, msg)
		}
	}
}

// TestUpTopologyFiles: the topology is read before anything needs root,
// within its size limit and without blocking on a FIFO, and /dev/stdin
// works, here with a topology whose error shows it was read.
func TestUpTopologyFiles(t *testing.T) {
	wantError(t, "topology /dev/zero: larger than 8 MiB", "up", "/dev/zero")
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wantError(t, fifo+": empty topology", "up", fifo)

	cmd := exec.Command(binary, "up", "/dev/stdin")
	cmd.Stdin = strings.NewReader("nodes: 3\nsubnet: 127.0.0.0/8\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	want := "bullylab: /dev/stdin:2: subnet: 127.0.0.0/8 is loopback; pick a private range such as 10.77.0.0/16\n"
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || stderr.String() != want {
		t.Errorf("up /dev/stdin: %v, stderr %q, want exit 1 and %q", err, stderr.String(), want)
	}
}

// freeRunName returns a free-form run name of the longest length, which no
// run on this machine uses.
func freeRunName(t *testing.T) string {
	t.Helper()
	for range 100 {
		run := "lab" + netem.NewRunID()[2:] + netem.NewRunID()[3:] // 10 bytes
		if c := netemtest.CountLeftovers(t, run); c == (netemtest.Leftovers{}) {
			return run
		}
	}
	t.Fatal("no free run name after 100 draws")
	return ""
}

// netnsOf returns the namespaces `ip netns list` shows for run.
func netnsOf(t *testing.T, run string) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(l, " "); strings.HasPrefix(name, run+"-") {
			names = append(names, name)
		}
	}
	return names
}

// TestRunNameUpStatusDown runs a testbed under a free-form run name:
// up, status, fault and down address it by that name, a second up of the
// name is refused while it is up, and nothing of it is left after down or,
// killed, after clean.
func TestRunNameUpStatusDown(t *testing.T) {
	netemtest.RequireRoot(t)
	run := freeRunName(t)
	u := startUpAs(t, run, "star3")
	u.waitUp(t)
	if ns := netnsOf(t, run); len(ns) != 4 || !slices.Contains(ns, run+"-sw") || !slices.Contains(ns, run+"-n3") {
		t.Errorf("ip netns list while up: %v, want %s-sw and n1..n3", ns, run)
	}
	if out := mustCLI(t, "status", "--run", run); !strings.Contains(out, " "+run+"-n1 ") || !strings.Contains(out, "\ntestbed "+run+" (star3): ") {
		t.Errorf("status --run %s said %q", run, out)
	}
	if out := mustCLI(t, "fault", "heal", "--run", run); !strings.Contains(out, "(testbed "+run+", ") {
		t.Errorf("fault heal --run %s said %q", run, out)
	}
	wantError(t, "build "+run+": run already exists: "+netem.StateDir(run)+" exists", "up", "star3", "--run", run)
	st, err := netem.ReadState(run)
	if err != nil {
		t.Fatal(err)
	}
	if out := mustCLI(t, "down", "--run", run); out != "testbed "+run+" down\n" {
		t.Errorf("down --run %s said %q", run, out)
	}
	if code := u.wait(t); code != 0 {
		t.Errorf("up exited %d after down; output:\n%s", code, u.output())
	}
	if ns := netnsOf(t, run); len(ns) > 0 {
		t.Errorf("ip netns list after down: %v", ns)
	}
	requireNoLeftovers(t, run, st.Processes)

	t.Run("killed", func(t *testing.T) {
		// The nodes outlive their parent; as subreaper this test reaps
		// them (see TestCleanAfterUpKilled).
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		u := startUpAs(t, run, "star3")
		u.waitUp(t)
		st, err := netem.ReadState(run)
		if err != nil {
			t.Fatal(err)
		}
		u.cmd.Process.Kill()
		u.wait(t)
		if ns := netnsOf(t, run); len(ns) != 4 {
			t.Fatalf("killed up left namespaces %v, want 4", ns)
		}
		out := mustCLI(t, "clean", "--run", run)
		t.Log(strings.TrimSpace(out))
		if !strings.HasSuffix(out, "\nruns cleaned: "+run+"\n") {
			cleanedElsewhere(t, run, out)
		}
		for _, p := range st.Processes {
			var ws unix.WaitStatus
			if _, err := unix.Wait4(p.PID, &ws, 0, nil); err != nil {
				t.Errorf("reaping node process %d: %v", p.PID, err)
			}
		}
		if ns := netnsOf(t, run); len(ns) > 0 {
			t.Errorf("ip netns list after clean: %v", ns)
		}
		requireNoLeftovers(t, run, st.Processes)
	})
}

// `status --json` is a document named by its schema, the first field,
// with the run's status beside it.
func TestStatusJSON(t *testing.T) {
	u := startUp(t, "star3")
	u.waitUp(t)
	out := mustCLI(t, "status", "--json", "--run", u.run)
	if !strings.HasPrefix(out, "{\n  \"schema\": \""+statusSchema+"\",\n") {
		t.Errorf("status --json does not begin with its schema:\n%s", out)
	}
	var doc struct {
		Schema string `json:"schema"`
		Run    string `json:"run"`
		Nodes  []struct {
			Node string `json:"node"`
		} `json:"nodes"`
		KeyFile string `json:"key_file"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("status --json: %v:\n%s", err, out)
	}
	if doc.Schema != "bullylab.status/v1" || doc.Run != u.run || len(doc.Nodes) != 3 || doc.KeyFile != netem.KeyPath(u.run) {
		t.Errorf("status --json: schema %q, run %q (want %s), %d nodes (want 3), key file %q:\n%s",
			doc.Schema, doc.Run, u.run, len(doc.Nodes), doc.KeyFile, out)
	}
	mustCLI(t, "down", "--run", u.run)
	u.wait(t)
}

// asUser is the environment under which a command run as root takes
// itself to run for u, as under sudo.
func asUser(u netem.RunUser) []string {
	return []string{"SUDO_UID=" + strconv.Itoa(u.UID), "SUDO_USER=" + u.Name}
}

// TestRunOwnership: up records who started a run. Without --run, status,
// fault and down act only on the only testbed up, and only for the user
// who started it; otherwise fault and down fail with one line naming the
// testbeds up and their users, and status lists them. --run names any
// run. Two users are simulated as sudo makes them, by SUDO_UID and
// SUDO_USER, for the runs this test starts and the commands it runs;
// other testbeds on the machine are in the lists too, and the test holds
// with them up.
func TestRunOwnership(t *testing.T) {
	netemtest.RequireRoot(t)
	uid := 1_000_000 + rand.IntN(1_000_000)
	alice := netem.RunUser{UID: uid, Name: "alice"}
	bob := netem.RunUser{UID: uid + 1, Name: "bob"}
	b := startUpEnv(t, netemtest.RunName(t), asUser(bob), "star3")
	b.waitUp(t)
	if st, err := netem.ReadState(b.run); err != nil || st.User == nil || *st.User != bob {
		t.Fatalf("state of bob's run %s: %+v, %v; want user %v", b.run, st, err, bob)
	}

	// Bob's run alone, or with others: alice's bare status lists it,
	// fault and down refuse.
	out, errOut, code := runBinEnv(t, asUser(alice), "status")
	if code != 0 || !strings.Contains(out, " "+b.run+" ") || !strings.Contains(out, " bob (uid "+strconv.Itoa(bob.UID)+") ") || !strings.Contains(out, "--run") {
		t.Errorf("alice's status with bob's run up: exit %d, %q %s", code, out, errOut)
	}
	for _, args := range [][]string{{"fault", "heal"}, {"down"}} {
		_, errOut, code := runBinEnv(t, asUser(alice), args...)
		if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, b.run+" (star3") ||
			!strings.Contains(errOut, "started by bob (uid "+strconv.Itoa(bob.UID)+")") || !strings.Contains(errOut, "--run") {
			t.Errorf("alice's %v with bob's run up: exit %d, %q; want one line naming %s, bob and --run", args, code, errOut, b.run)
		}
	}
	select {
	case <-b.done:
		t.Fatalf("bob's run went down after alice's bare down:\n%s", b.output())
	default:
	}
	// Named, bob's run is anyone's to act on.
	if out, errOut, code := runBinEnv(t, asUser(alice), "status", "--run", b.run); code != 0 || !strings.Contains(out, "testbed "+b.run+" (star3): ") {
		t.Errorf("alice's status --run %s: exit %d, %q %s", b.run, code, out, errOut)
	}
	if out, errOut, code := runBinEnv(t, asUser(alice), "fault", "heal", "--run", b.run); code != 0 || !strings.Contains(out, "(testbed "+b.run+", ") {
		t.Errorf("alice's fault heal --run %s: exit %d, %q %s", b.run, code, out, errOut)
	}

	// Alice's run beside bob's: two up, bare commands ask which.
	a := startUpEnv(t, netemtest.RunName(t), asUser(alice), "star3")
	a.waitUp(t)
	out, errOut, code = runBinEnv(t, asUser(alice), "status")
	if code != 0 || !strings.Contains(out, " alice (uid "+strconv.Itoa(alice.UID)+"), you ") || !strings.Contains(out, " "+a.run+" ") ||
		!strings.Contains(out, " "+b.run+" ") || !strings.Contains(out, "testbeds are up: pick one with --run NAME") {
		t.Errorf("alice's status with her run and bob's up: exit %d, %q %s", code, out, errOut)
	}
	_, errOut, code = runBinEnv(t, asUser(alice), "fault", "heal")
	if code != 1 || !strings.Contains(errOut, "testbeds are up: ") || !strings.Contains(errOut, a.run+" (star3, started by alice") ||
		!strings.Contains(errOut, b.run+" (star3, started by bob") {
		t.Errorf("alice's fault with her run and bob's up: exit %d, %q", code, errOut)
	}
	if out, errOut, code := runBinEnv(t, asUser(alice), "down", "--run", b.run); code != 0 || out != "testbed "+b.run+" down\n" {
		t.Errorf("alice's down --run %s: exit %d, %q %s", b.run, code, out, errOut)
	}
	b.wait(t)

	// Alice's run is the only one of this test's up: bare commands act on
	// it when no other testbed is up on this machine, and ask which when
	// one is.
	downed := false
	for _, args := range [][]string{{"status"}, {"fault", "heal"}, {"down"}} {
		alone := !othersUp(t, a.run)
		out, errOut, code := runBinEnv(t, asUser(alice), args...)
		if alone && !othersUp(t, a.run) {
			want := map[string]string{"status": "\ntestbed " + a.run + " (star3): ", "fault": "(testbed " + a.run + ", ", "down": "testbed " + a.run + " down\n"}[args[0]]
			if code != 0 || !strings.Contains(out, want) {
				t.Errorf("alice's %v with her run alone up: exit %d, %q %s; want %q", args, code, out, errOut, want)
			}
			downed = args[0] == "down" && code == 0
			continue
		}
		t.Logf("alice's %v with other testbeds up too: exit %d, %s%s", args, code, out, errOut)
		if args[0] == "status" && (code != 0 || !strings.Contains(out, " "+a.run+" ")) ||
			args[0] != "status" && (code != 1 || !strings.Contains(errOut, a.run+" (star3, started by alice")) {
			t.Errorf("alice's %v with other testbeds up: exit %d, %q %s; want %s listed", args, code, out, errOut, a.run)
		}
	}
	if !downed {
		mustCLI(t, "down", "--run", a.run)
	}
	a.wait(t)
}

// othersUp reports whether a testbed other than run is up.
func othersUp(t *testing.T, run string) bool {
	t.Helper()
	runs, err := lab.UpRuns()
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(runs, func(r lab.UpRun) bool { return r.Run != run })
}

// TestFaultArgsNegativeOffset: a clock fault's negative offset and rate
// are arguments, not flags.
func TestFaultArgsNegativeOffset(t *testing.T) {
	fa, err := parseFaultArgs([]string{"clock", "n3", "-90s", "-20ppm", "--run", "bl1"})
	if err != nil || !slices.Equal(fa.pos, []string{"clock", "n3", "-90s", "-20ppm"}) || fa.run != "bl1" {
		t.Errorf("parseFaultArgs: %+v, %v; want clock n3 -90s -20ppm on run bl1", fa, err)
	}
}
