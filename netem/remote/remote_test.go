package remote

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/bullylab/bullylab/topologies"
)

const sshdPath = "/usr/sbin/sshd"

// testSSHD is a real sshd on a loopback port, its host key and the key
// that may log in made for the test.
type testSSHD struct {
	addr    string
	dir     string
	hostPub ssh.PublicKey
	host    topologies.Host // with the client key and a known_hosts holding the host key
}

// startSSHD runs sshd on 127.0.0.1, as root, until the test ends.
func startSSHD(t *testing.T) *testSSHD {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sshd logs users in only when run as root: run the tests as root")
	}
	if _, err := os.Stat(sshdPath); err != nil {
		t.Skipf("%s is missing: install Debian's openssh-server (scripts/test.sh does)", sshdPath)
	}
	dir := t.TempDir()
	hostPub := writeKey(t, filepath.Join(dir, "host_key"))
	clientPub := writeKey(t, filepath.Join(dir, "client_key"))
	writeFile(t, filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub))
	// sshd refuses to start without its privilege separation directory,
	// which the package's init script makes at boot.
	if _, err := os.Stat("/run/sshd"); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("/run/sshd") })
	}
	port := freePort(t)
	cfg := filepath.Join(dir, "sshd_config")
	writeFile(t, cfg, fmt.Appendf(nil, `Port %d
ListenAddress 127.0.0.1
HostKey %[2]s/host_key
AuthorizedKeysFile %[2]s/authorized_keys
PidFile %[2]s/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
`, port, dir))
	cmd := exec.Command(sshdPath, "-D", "-e", "-f", cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sshd exited: %v: %s", err, stderr.String())
		case <-time.After(10 * time.Millisecond): // polling the port, with a deadline
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd not listening on %s after 10s: %s", addr, stderr.String())
		}
	}
	known := filepath.Join(dir, "known_hosts")
	writeFile(t, known, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostPub)+"\n"))
	return &testSSHD{addr: addr, dir: dir, hostPub: hostPub, host: topologies.Host{
		Name: "h1", SSH: addr, User: "root", Key: filepath.Join(dir, "client_key"), KnownHosts: known,
	}}
}

// writeKey writes a new ed25519 private key in OpenSSH's format to path
// and returns its public key.
func writeKey(t *testing.T, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func dialT(t *testing.T, h topologies.Host) *Client {
	t.Helper()
	c, err := Dial(t.Context(), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Commands run over the connection; a failing one says why in its error.
func TestRun(t *testing.T) {
	d := startSSHD(t)
	c := dialT(t, d.host)
	out, err := c.Output(t.Context(), "echo hello; echo ignored >&2")
	if err != nil || string(out) != "hello\n" {
		t.Errorf("echo: %q, %v", out, err)
	}
	err = c.Run(t.Context(), "echo first >&2; echo 'no such thing' >&2; exit 3", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "status 3") || !strings.HasSuffix(err.Error(), ": no such thing") {
		t.Errorf("failing command: %v, want its exit status and last line of stderr", err)
	}
	// A command still running when its context ends is killed.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Run(ctx, "sleep 30", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled command: %v after %v", err, time.Since(start))
	}
	// The connection still works.
	if out, err := c.Output(t.Context(), "echo again"); err != nil || string(out) != "again\n" {
		t.Errorf("after a cancelled command: %q, %v", out, err)
	}
}

// A file is copied only when the host's copy differs, whole or not at all.
func TestEnsureFile(t *testing.T) {
	d := startSSHD(t)
	c := dialT(t, d.host)
	local := filepath.Join(t.TempDir(), "bullylab")
	writeFile(t, local, []byte("#!/bin/sh\necho one\n"))
	remote := filepath.Join(d.dir, "bin", "bullylab")
	for i, want := range []bool{true, false} {
		copied, err := c.EnsureFile(t.Context(), local, remote)
		if err != nil || copied != want {
			t.Fatalf("EnsureFile #%d: copied %v, %v; want %v", i+1, copied, err, want)
		}
	}
	if out, err := c.Output(t.Context(), remote); err != nil || string(out) != "one\n" {
		t.Errorf("running the copy: %q, %v", out, err)
	}
	writeFile(t, local, []byte("#!/bin/sh\necho two\n"))
	if copied, err := c.EnsureFile(t.Context(), local, remote); err != nil || !copied {
		t.Fatalf("EnsureFile after a change: copied %v, %v", copied, err)
	}
	if out, err := c.Output(t.Context(), remote); err != nil || string(out) != "two\n" {
		t.Errorf("running the new copy: %q, %v", out, err)
	}
	if left, _ := filepath.Glob(remote + ".tmp-*"); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A host whose key known_hosts lacks, or has another key for, is refused
// with the key's fingerprint; it is never added silently.
func TestHostKeyChecked(t *testing.T) {
	d := startSSHD(t)
	unknown := d.host
	unknown.KnownHosts = filepath.Join(d.dir, "empty_known_hosts")
	writeFile(t, unknown.KnownHosts, nil)
	_, err := Dial(t.Context(), unknown)
	fp := ssh.FingerprintSHA256(d.hostPub)
	if err == nil || !strings.Contains(err.Error(), "is not in "+unknown.KnownHosts) || !strings.Contains(err.Error(), fp) {
		t.Errorf("unknown host key: %v, want a refusal naming %s and the file", err, fp)
	}
	if data, _ := os.ReadFile(unknown.KnownHosts); len(data) != 0 {
		t.Errorf("known_hosts was written: %q", data)
	}

	changed := d.host
	changed.KnownHosts = filepath.Join(d.dir, "other_known_hosts")
	other := writeKey(t, filepath.Join(d.dir, "other_key"))
	writeFile(t, changed.KnownHosts, []byte(knownhosts.Line([]string{knownhosts.Normalize(d.addr)}, other)+"\n"))
	_, err = Dial(t.Context(), changed)
	if err == nil || !strings.Contains(err.Error(), "host key changed") || !strings.Contains(err.Error(), changed.KnownHosts+":1") {
		t.Errorf("changed host key: %v, want a refusal naming the file's line", err)
	}

	missing := d.host
	missing.KnownHosts = filepath.Join(d.dir, "no_such_file")
	if _, err := Dial(t.Context(), missing); err == nil || !strings.Contains(err.Error(), "ssh-keyscan") {
		t.Errorf("missing known_hosts: %v, want a hint to add the key", err)
	}
}

// Without a key file and without an agent the error says what to give.
func TestNoCredentials(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	_, err := Dial(t.Context(), topologies.Host{Name: "h1", SSH: "127.0.0.1:1", User: "root"})
	if err == nil || !strings.Contains(err.Error(), "no SSH agent") || !strings.HasPrefix(err.Error(), "host h1: ") {
		t.Errorf("Dial without credentials: %v", err)
	}
}

// Whatever a host's shell writes to standard error, in whatever pieces,
// only a line of digits is taken for the PID, and the rest is kept whole
// up to maxStderr.
func FuzzPidThenTail(f *testing.F) {
	f.Add([]byte("1234\nerror: no such file\n"), uint8(3))
	f.Add([]byte("12"), uint8(1))
	f.Add([]byte("not a pid\nx"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		w := &pidThenTail{pid: make(chan string, 1)}
		i := min(int(cut), len(data))
		w.Write(data[:i])
		w.Write(data[i:])
		select {
		case pid := <-w.pid:
			if !isDigits(pid) {
				t.Fatalf("pid %q", pid)
			}
		default:
		}
		if len(w.b) > maxStderr {
			t.Fatalf("kept %d bytes", len(w.b))
		}
		w.lastLine()
	})
}

// Whatever a controller sends, the agent answers each request it can read
// with one line, or stops with a one-line error naming the request.
func FuzzRunAgent(f *testing.F) {
	f.Add([]byte("{\"op\":\"hello\"}\n{\"op\":\"clock\"}\n{\"op\":\"probe\"}\n"))
	f.Add([]byte("{\"op\":\"nope\"}\n"))
	f.Add([]byte("not json\n"))
	f.Add([]byte("{\"op\":\"build\",\"build\":{\"run\":\"x\",\"vni\":1}}\n{\"op\":\"status\"}\n{\"op\":\"crash\",\"node\":\"n1\"}\n{\"op\":\"partition\",\"groups\":[[\"n1\"],[\"n2\"]]}\n{\"op\":\"heal\"}\n{\"op\":\"pause\",\"node\":\"n2\"}\n{\"op\":\"resume\",\"node\":\"n2\"}\n{\"op\":\"down\"}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out strings.Builder
		err := RunAgent(bytes.NewReader(in), &out, AgentConfig{Version: "test", Probe: func() error { return errors.New("no namespaces") }, Shares: fakeShares{}})
		if err != nil && strings.ContainsAny(err.Error(), "\n") {
			t.Fatalf("error is not one line: %q", err)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(out.String(), "\n"), "\n") {
			var r agentReply
			if line != "" && json.Unmarshal([]byte(line), &r) != nil {
				t.Fatalf("reply %q is not JSON", line)
			}
		}
	})
}

// fakeShares builds nothing and says so.
type fakeShares struct{}

func (fakeShares) Build(r ShareRequest) error { return fmt.Errorf("not building %q here", r.Run) }
func (fakeShares) Down() error                { return nil }
func (fakeShares) Crash(n string) error       { return fmt.Errorf("no node %q here", n) }
func (fakeShares) Status() ([]SpanNodeState, error) {
	return []SpanNodeState{{Node: "n1", Running: true, Status: "normal"}}, nil
}
func (fakeShares) Partition([][]string) error { return nil }
func (fakeShares) Heal() error                { return nil }
func (fakeShares) Pause(string) error         { return nil }
func (fakeShares) Resume(string) error        { return nil }
