package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/node/cluster"
	"github.com/google/uuid"
)

var (
	binary string
	// keyFile is a cluster key file the tests' nodes share.
	keyFile string
)

// testChildEnv names, in a test binary a test started again, the
// testChildren entry it runs instead of the tests, before TestMain builds
// anything it would leave behind when the child is killed.
const testChildEnv = "BULLYLAB_TEST_CHILD"

var testChildren = map[string]func(){}

// scanLines sends r's lines on the channel it returns, which it closes at
// r's end.
func scanLines(r io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

func TestMain(m *testing.M) {
	if child, ok := testChildren[os.Getenv(testChildEnv)]; ok {
		child()
		os.Exit(0)
	}
	bin, cleanup, err := cluster.BuildTemp()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = bin
	keyFile = filepath.Join(filepath.Dir(bin), "cluster.key")
	if err := writeNewKey(keyFile); err != nil {
		cleanup()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// runBin runs the binary to completion and returns its output and exit code.
func runBin(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runBinEnv(t, nil, args...)
}

// runBinEnv is runBin with env added to this process's environment.
func runBinEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%v did not finish: stderr %s", args, errb.String())
	}
	return out.String(), errb.String(), code
}

// wantError runs the binary expecting exit status 1 and a one-line error
// containing want.
func wantError(t *testing.T, want string, args ...string) {
	t.Helper()
	_, stderr, code := runBin(t, args...)
	if code != 1 {
		t.Errorf("%v: exit %d, want 1; stderr %q", args, code, stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("%v: stderr %q does not contain %q", args, stderr, want)
	}
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("%v: stderr is not one line: %q", args, stderr)
	}
}

// wantUsage runs the binary expecting a usage error: exit status 2 and a
// one-line error containing want.
func wantUsage(t *testing.T, want string, args ...string) {
	t.Helper()
	_, stderr, code := runBin(t, args...)
	if code != 2 {
		t.Errorf("%v: exit %d, want 2; stderr %q", args, code, stderr)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("%v: stderr %q does not contain %q", args, stderr, want)
	}
	if strings.Count(stderr, "\n") != 1 {
		t.Errorf("%v: stderr is not one line: %q", args, stderr)
	}
}

// syncBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// listenerFile returns a listening socket on a free loopback port, as a
// file a child process inherits (exec.Cmd.ExtraFiles, for --listen-fd),
// and its address. The test's cleanup closes the file.
func listenerFile(t *testing.T) (*os.File, string) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // the file holds the socket
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, ln.Addr().String()
}

func writeFile(t *testing.T, name, text string) string {
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	addr := "127.0.0.1:0"
	wantUsage(t, "node: missing required flags --listen (or --listen-fd) and --cluster-key (or --insecure)", "node", "--data-dir", dir)
	wantUsage(t, "node: missing required flag --data-dir\n", "node", "--listen", addr, "--insecure")
	wantUsage(t, "node: missing required flags --listen (or --listen-fd), --data-dir and --cluster-key (or --insecure); make a cluster key with `bullylab keygen --out FILE`\n", "node")
	wantUsage(t, `--heartbeat: "soon" is not a duration (like 250ms or 1s)`, "node", "--listen", addr, "--data-dir", dir, "--heartbeat", "soon")
	wantUsage(t, "--election-timeout -1s: must be positive", "node", "--listen", addr, "--data-dir", dir, "--election-timeout", "-1s")
	wantUsage(t, "--failure-timeout 50ms: must be longer than --heartbeat 100ms", "node", "--listen", addr, "--data-dir", dir, "--failure-timeout", "50ms")
	wantUsage(t, "--detection-stagger -5ms: must not be negative", "node", "--listen", addr, "--data-dir", dir, "--detection-stagger", "-5ms")
	wantUsage(t, `--clock-offset: offset "soon": want a signed duration`, "node", "--listen", addr, "--data-dir", dir, "--clock-offset", "soon")
	wantUsage(t, "--clock-offset, --clock-rate: clock rate 200000 ppm: beyond", "node", "--listen", addr, "--data-dir", dir, "--clock-rate", "200000ppm")
	wantUsage(t, `--id "nope": not a UUID`, "node", "--listen", addr, "--data-dir", dir, "--id", "nope")
	wantUsage(t, `--log: unknown log format "xml"`, "node", "--listen", addr, "--data-dir", dir, "--log", "xml")
	wantUsage(t, "node: unknown flag --bogus", "node", "--bogus")
	wantUsage(t, "--listen and --listen-fd exclude each other", "node", "--listen", addr, "--listen-fd", "3", "--data-dir", dir)
	wantUsage(t, "--listen-fd 1: not an inherited descriptor", "node", "--listen-fd", "1", "--data-dir", dir)
	wantUsage(t, "--peers nowhere: no such file", "node", "--listen", addr, "--data-dir", dir, "--peers", "nowhere")
	wantError(t, "no specific host", "node", "--listen", ":0", "--data-dir", dir, "--cluster-key", keyFile)
	wantUsage(t, "--nodes 1: need at least 2", "demo", "--nodes", "1")
	wantUsage(t, `unknown command "bogus"`, "bogus")
}

func TestPeersErrors(t *testing.T) {
	id := uuid.New()
	bad := writeFile(t, "peers", fmt.Sprintf("# cluster\n%s 127.0.0.1:7001\nnot-a-uuid 127.0.0.1:7002\n", id))
	wantError(t, bad+":3: ", "node", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--peers", bad)

	dup := writeFile(t, "peers", fmt.Sprintf("%s 127.0.0.1:7001\n%s 127.0.0.1:7002\n", id, id))
	wantError(t, dup+":2: duplicate ID "+id.String(), "node", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--peers", dup)

	list := fmt.Sprintf("%s@127.0.0.1:7001,%s@127.0.0.1:7002", id, id)
	wantUsage(t, "duplicate ID", "node", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--peers", list)

	unreadable := filepath.Join(t.TempDir(), "dir")
	os.Mkdir(unreadable, 0o700)
	wantError(t, "is a directory", "node", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--peers", unreadable)
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	wantError(t, "listen "+addr+": address already in use", "node", "--listen", addr, "--data-dir", t.TempDir(), "--cluster-key", keyFile)
}

// startNode runs a node process and waits until its control socket answers.
// Without --listen or --listen-fd it listens on a port the kernel picks.
func startNode(t *testing.T, dataDir string, args ...string) (*exec.Cmd, <-chan struct{}, *syncBuffer) {
	t.Helper()
	return startNodeFiles(t, dataDir, nil, args...)
}

// startNodeFiles is startNode with files for the child to inherit as
// descriptors 3 and on.
func startNodeFiles(t *testing.T, dataDir string, files []*os.File, args ...string) (*exec.Cmd, <-chan struct{}, *syncBuffer) {
	t.Helper()
	if !slices.Contains(args, "--insecure") {
		args = append([]string{"--cluster-key", keyFile}, args...)
	}
	if !slices.Contains(args, "--listen") && !slices.Contains(args, "--listen-fd") {
		args = append([]string{"--listen", "127.0.0.1:0"}, args...)
	}
	cmd := exec.Command(binary, append([]string{"node", "--data-dir", dataDir}, args...)...)
	cmd.ExtraFiles = files
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill() // by PID; a no-op once it exited
		<-exited
	})
	ctl := filepath.Join(dataDir, node.ControlSocketName)
	if i := slices.Index(args, "--control"); i >= 0 && i+1 < len(args) {
		ctl = args[i+1]
	}
	cl := node.NewControlClient(ctl)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Status(ctx)
		cancel()
		if err == nil {
			return cmd, exited, out
		}
		select {
		case <-exited:
			t.Fatalf("node exited at start: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("control socket not up: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

func TestDataDirLockedAndCleanExit(t *testing.T) {
	dir := t.TempDir()
	cmd, exited, out := startNode(t, dir, "--log", "text")
	wantError(t, "is locked by another process", "node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--cluster-key", keyFile)

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("node did not exit on SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM; output %s", code, out)
	}
	if !strings.Contains(out.String(), "node_stopped reason=shutdown") {
		t.Errorf("no node_stopped record in %s", out)
	}
	if _, err := os.Lstat(filepath.Join(dir, node.ControlSocketName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket left behind: %v", err)
	}
	// The dir now holds that node's ID; another ID may not take it over.
	wantError(t, "belongs to node", "node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--id", uuid.NewString(), "--cluster-key", keyFile)
}

func TestVersion(t *testing.T) {
	stdout, _, code := runBin(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "bullylab dev\ngo: go1.") {
		t.Errorf("exit %d, output %q", code, stdout)
	}
}

func TestDemo(t *testing.T) {
	stdout, stderr, code := runBin(t, "demo", "--nodes", "3")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	for _, want := range []string{"PHASE", "boot", "failover", "kill -9", "takeover", "restart", "ok:"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// Every node can share one peers file, which lists each node, itself
// included, at its address.
func TestPeersFileListingOwnID(t *testing.T) {
	own, other := uuid.New(), uuid.New()
	// Bound here, so that the peers file can list the node before it
	// starts; the node inherits the socket.
	ln, addr := listenerFile(t)
	peers := writeFile(t, "peers", fmt.Sprintf("%s %s\n%s 127.0.0.1:2\n", own, addr, other))
	dir := t.TempDir()
	startNodeFiles(t, dir, []*os.File{ln}, "--id", own.String(), "--listen-fd", "3", "--peers", peers)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := node.NewControlClient(filepath.Join(dir, node.ControlSocketName)).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != own || len(s.Members) != 2 {
		t.Errorf("status %+v", s)
	}
}
