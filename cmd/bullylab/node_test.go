package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/wire"
	"github.com/google/uuid"
)

// writeNewKey writes a new cluster key file at path.
func writeNewKey(path string) error {
	k, err := wire.NewKey()
	if err != nil {
		return err
	}
	return wire.WriteKeyFile(path, k)
}

func TestKeygen(t *testing.T) {
	stdout, stderr, code := runBin(t, "keygen")
	if code != 0 || stderr != "" {
		t.Fatalf("keygen: exit %d, stderr %q", code, stderr)
	}
	if _, err := wire.ParseKey(stdout); err != nil || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("keygen printed %q: %v", stdout, err)
	}
	again, _, _ := runBin(t, "keygen")
	if again == stdout {
		t.Error("two keygens printed the same key")
	}

	out := filepath.Join(t.TempDir(), "cluster.key")
	stdout, stderr, code = runBin(t, "keygen", "--out", out)
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("keygen --out: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode %04o, want 0600", perm)
	}
	if _, err := wire.ReadKeyFile(out); err != nil {
		t.Errorf("keygen --out wrote a file ReadKeyFile refuses: %v", err)
	}
	before, _ := os.ReadFile(out)
	wantError(t, "cluster key "+out+": file exists", "keygen", "--out", out)
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Error("keygen --out overwrote an existing key")
	}
	wantUsage(t, `keygen: unexpected argument "x"`, "keygen", "x")
}

func TestNodeClusterKeyFlags(t *testing.T) {
	dir := t.TempDir()
	addr := "127.0.0.1:0"
	wantUsage(t, "node: missing required flag --cluster-key (or --insecure); make a cluster key with `bullylab keygen --out FILE`", "node", "--listen", addr, "--data-dir", dir)
	wantUsage(t, "--cluster-key and --insecure exclude each other", "node", "--listen", addr, "--data-dir", dir, "--cluster-key", keyFile, "--insecure")
	wantError(t, "--cluster-key: cluster key /nonexistent/key: no such file or directory", "node", "--listen", addr, "--data-dir", dir, "--cluster-key", "/nonexistent/key")

	readable := filepath.Join(t.TempDir(), "key")
	if err := writeNewKey(readable); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(readable, 0o644); err != nil {
		t.Fatal(err)
	}
	wantError(t, "mode 0644 lets other users read or change it; run chmod 600 "+readable, "node", "--listen", addr, "--data-dir", dir, "--cluster-key", readable)

	garbage := writeFile(t, "key", "not a key\n")
	wantError(t, "not a cluster key", "node", "--listen", addr, "--data-dir", dir, "--cluster-key", garbage)
	// None of the refusals touched the data dir.
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("data dir holds %v after refused starts", names)
	}
}

func TestNodeInsecureWarns(t *testing.T) {
	cmd, exited, out := startNode(t, t.TempDir(), "--insecure", "--log", "text")
	cmd.Process.Kill() // by PID; out is the test's to read once it exited
	<-exited
	if n := strings.Count(out.String(), "warning: --insecure"); n != 1 {
		t.Errorf("%d --insecure warnings in %q, want 1", n, out)
	}
}

// stopNode SIGTERMs a node started by startNode and waits for it to exit.
func stopNode(t *testing.T, cmd *exec.Cmd, exited <-chan struct{}) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("node did not exit on SIGTERM")
	}
}

// A data dir whose state.json was lost is refused, instead of the node
// starting over at epoch 0 unnoticed, until --reset-state asks for it.
func TestNodeStateMissing(t *testing.T) {
	dir := t.TempDir()
	cmd, exited, _ := startNode(t, dir)
	stopNode(t, cmd, exited)
	state := filepath.Join(dir, "state.json")
	if err := os.Remove(state); err != nil {
		t.Fatalf("the node left no state.json: %v", err)
	}
	args := []string{"node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--cluster-key", keyFile}
	wantError(t, "state missing: data dir "+dir+" has an id file but no state.json: the node's saved epoch and promises are lost; to start it over at epoch 0 with its ID, add --reset-state", args...)
	if _, err := os.Lstat(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start wrote %s: %v", state, err)
	}

	cmd, exited, _ = startNode(t, dir, "--reset-state")
	s, err := node.NewControlClient(filepath.Join(dir, node.ControlSocketName)).Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stopNode(t, cmd, exited)
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("no state.json after --reset-state: %v", err)
	}
	id, _ := os.ReadFile(filepath.Join(dir, "id"))
	if strings.TrimSpace(string(id)) != s.ID.String() {
		t.Errorf("--reset-state changed the ID: id file %q, node %s", id, s.ID)
	}
	// With a state.json there is nothing to reset: the flag is refused
	// rather than left to discard a state some later day.
	wantError(t, "nothing to reset", append(args, "--reset-state")...)
}

// --id takes version-4 UUIDs only; the nil UUID is not "no ID".
func TestNodeIDFlag(t *testing.T) {
	dir := t.TempDir()
	base := []string{"node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--cluster-key", keyFile, "--id"}
	wantUsage(t, "--id 00000000-0000-0000-0000-000000000000 is not a version-4 UUID: it is the nil UUID", append(base, "00000000-0000-0000-0000-000000000000")...)
	wantUsage(t, "--id c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d is not a version-4 UUID: it is version 1", append(base, "c3a1f0de-7b62-1e35-a9d4-1e2f3a4b5c6d")...)
	wantUsage(t, `--id "": not a UUID`, append(base, "")...)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("data dir holds %v after refused IDs", names)
	}
}

// The node's own entry in --peers must be there, unless it joins, and at
// its address; --advertise must be an address peers can dial.
func TestNodeOwnEntry(t *testing.T) {
	own, other := uuid.New(), uuid.New()
	addr := "127.0.0.1:0"
	base := func(dir string) []string {
		return []string{"node", "--id", own.String(), "--listen", addr, "--data-dir", dir, "--cluster-key", keyFile}
	}

	elsewhere := writeFile(t, "peers", fmt.Sprintf("# cluster\n%s 127.0.0.1:2\n%s 127.0.0.1:1\n", other, own))
	wantError(t, elsewhere+":3: this node's ID "+own.String()+" is listed at 127.0.0.1:1, but its listen address (--listen) is 127.0.0.1:0, bound at 127.0.0.1:",
		append(base(t.TempDir()), "--peers", elsewhere)...)
	wantError(t, "--peers entry 1: this node's ID "+own.String()+" is listed at 127.0.0.1:1, but its advertise address (--advertise) is 10.9.9.9:7000",
		append(base(t.TempDir()), "--peers", own.String()+"@127.0.0.1:1", "--advertise", "10.9.9.9:7000")...)

	absent := writeFile(t, "peers", fmt.Sprintf("%s 127.0.0.1:2\n", other))
	wantError(t, absent+": no entry for this node's ID "+own.String(), append(base(t.TempDir()), "--peers", absent)...)

	wantUsage(t, `--advertise: bad address "not an addr"`, append(base(t.TempDir()), "--advertise", "not an addr")...)
	wantUsage(t, `--advertise: bad address "0.0.0.0:7000": 0.0.0.0 is a listen address`, append(base(t.TempDir()), "--advertise", "0.0.0.0:7000")...)

	// A joining node is not listed yet.
	dir := t.TempDir()
	startNode(t, dir, "--id", own.String(), "--listen", addr, "--peers", absent, "--join")
	s, err := node.NewControlClient(filepath.Join(dir, node.ControlSocketName)).Status(t.Context())
	if err != nil || s.ID != own {
		t.Fatalf("joining node: %+v, %v", s, err)
	}
}

// The control socket is owner-only even for a node started under umask 0
// with --control in a directory every user can write to; a data dir every
// user can write to is refused.
func TestNodeControlSocketPrivate(t *testing.T) {
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	wantError(t, "data dir "+shared+": mode 0777 lets other users write to it; run chmod 700 "+shared,
		"node", "--listen", "127.0.0.1:0", "--data-dir", shared, "--cluster-key", keyFile)

	dir := t.TempDir()
	ctl := filepath.Join(shared, "node.sock")
	old := syscall.Umask(0) // the child inherits it
	cmd, exited, _ := startNode(t, dir, "--control", ctl)
	syscall.Umask(old)
	for _, path := range []string{ctl, filepath.Join(dir, "id"), filepath.Join(dir, "state.json")} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s: mode %v under umask 0, want owner-only", path, fi.Mode())
		}
	}
	if names, _ := os.ReadDir(shared); len(names) != 1 {
		t.Errorf("shared dir holds %v, want the socket alone", names)
	}
	stopNode(t, cmd, exited)
	if names, _ := os.ReadDir(shared); len(names) != 0 {
		t.Errorf("shared dir holds %v after the node stopped", names)
	}
}

// --metrics takes a host:port: one that does not parse is a usage error, a
// busy port an error once the node listens, each one line naming --metrics
// and leaving the data dir untouched; a node given a free one serves its
// metrics there until it stops.
func TestNodeMetricsFlag(t *testing.T) {
	dir := t.TempDir()
	base := []string{"node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--cluster-key", keyFile, "--metrics"}
	wantUsage(t, `--metrics "nonsense": not a host:port (like 127.0.0.1:9464 or :9464)`, append(base, "nonsense")...)
	wantUsage(t, `--metrics "127.0.0.1:99999": port "99999" is not a number from 0 to 65535`, append(base, "127.0.0.1:99999")...)
	wantUsage(t, `--metrics "127.0.0.1:": port "" is not a number`, append(base, "127.0.0.1:")...)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	wantError(t, "metrics address (--metrics) "+busy.Addr().String()+": bind: address already in use", append(base, busy.Addr().String())...)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("data dir holds %v after refused starts", names)
	}

	// Port 0: the node binds a free port, and its node_started record
	// says which.
	cmd, exited, out := startNode(t, t.TempDir(), "--metrics", "127.0.0.1:0")
	addr := startedMetrics(t, out)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v; node output: %s", err, out)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s, %v", resp.Status, err)
	}
	for _, name := range []string{"bullylab_node_is_leader ", "bullylab_node_frames_total{", "process_cpu_seconds_total "} {
		if !strings.Contains(string(body), "\n"+name) {
			t.Errorf("GET /metrics has no %s:\n%s", name, body)
		}
	}
	stopNode(t, cmd, exited)
	if conn, err := net.Dial("tcp", addr); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after the node exited", addr)
	}
}

// startedMetrics waits for the node_started record in a node's JSON log and
// returns the metrics address it names.
func startedMetrics(t *testing.T, log *syncBuffer) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(log.String(), "\n") {
			var rec struct {
				Event, Metrics string
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Event == "node_started" {
				if host, port, err := net.SplitHostPort(rec.Metrics); err != nil || host != "127.0.0.1" || port == "0" {
					t.Fatalf("node_started names metrics address %q, want 127.0.0.1 and the port bound", rec.Metrics)
				}
				return rec.Metrics
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node_started record after 10s:\n%s", log.String())
		}
		time.Sleep(5 * time.Millisecond) // a poll interval: the deadline bounds the wait
	}
}

// --algorithm takes the names node.Algorithms lists, which its help shows;
// anything else is a usage error naming the flag, before the node touches
// its data dir.
func TestNodeAlgorithmFlag(t *testing.T) {
	dir := t.TempDir()
	base := []string{"node", "--listen", "127.0.0.1:0", "--data-dir", dir, "--cluster-key", keyFile, "--algorithm"}
	known := strings.Join(node.Algorithms(), ", ")
	wantUsage(t, `--algorithm "raft": not an election algorithm (known: `+known+")", append(base, "raft")...)
	wantUsage(t, `--algorithm "": not an election algorithm`, append(base, "")...)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("data dir holds %v after refused algorithms", names)
	}
	help, _, _ := runApp("node", "--help")
	if want := "election algorithm: " + strings.Join(node.Algorithms(), " or "); !strings.Contains(help, want) {
		t.Errorf("node --help does not say %q:\n%s", want, help)
	}
	for _, algorithm := range node.Algorithms() {
		cmd, exited, _ := startNode(t, t.TempDir(), "--algorithm", algorithm)
		stopNode(t, cmd, exited)
	}
}
