// Package remote runs testbeds across machines: one SSH connection per
// host (its key checked against known_hosts) to an agent of the
// controller's own binary, which builds the host's share as a lab, and a
// Span that drives them all as one testbed, its captures merged.
package remote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/bullylab/bullylab/topologies"
)

// DialTimeout bounds reaching a host and the SSH handshake.
const DialTimeout = 15 * time.Second

// Client is one SSH connection to a host.
type Client struct {
	host  topologies.Host
	conn  *ssh.Client
	agent net.Conn // the agent's socket, when it authenticated
}

// Dial connects to h over SSH: as h.User (else the controller's user),
// with h.Key (else the SSH agent at SSH_AUTH_SOCK), and only if the host
// presents the key h.KnownHosts (else ~/.ssh/known_hosts) has for it.
func Dial(ctx context.Context, h topologies.Host) (*Client, error) {
	var d net.Dialer
	return DialWith(ctx, h, func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}

// DialFunc makes the TCP connection an SSH connection runs over.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// DialWith is Dial over a connection dial makes: from another network
// namespace, say.
func DialWith(ctx context.Context, h topologies.Host, dial DialFunc) (*Client, error) {
	c := &Client{host: h}
	cfg, err := c.config()
	if err != nil {
		c.closeAgent()
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	nc, err := dial(ctx, h.SSH)
	if err != nil {
		c.closeAgent()
		return nil, fmt.Errorf("host %s: %w", h.Name, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	}
	sc, chans, reqs, err := ssh.NewClientConn(nc, h.SSH, cfg)
	if err != nil {
		nc.Close()
		c.closeAgent()
		return nil, fmt.Errorf("host %s: ssh %s: %w", h.Name, h.SSH, err)
	}
	nc.SetDeadline(time.Time{})
	c.conn = ssh.NewClient(sc, chans, reqs)
	return c, nil
}

// config is the SSH client configuration for c.host.
func (c *Client) config() (*ssh.ClientConfig, error) {
	name := c.host.User
	if name == "" {
		u, err := user.Current()
		if err != nil {
			return nil, fmt.Errorf("no user given and none known: %w", err)
		}
		name = u.Username
	}
	auth, err := c.auth()
	if err != nil {
		return nil, err
	}
	check, algorithms, err := hostKeyCheck(c.host)
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User:              name,
		Auth:              []ssh.AuthMethod{auth},
		HostKeyCallback:   check,
		HostKeyAlgorithms: algorithms,
		Timeout:           DialTimeout,
	}, nil
}

// auth is the key file's signer, or the agent's.
func (c *Client) auth() (ssh.AuthMethod, error) {
	if c.host.Key != "" {
		path := expandHome(c.host.Key)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("key: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(data)
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("key %s is encrypted: add it to your SSH agent and leave key out", path)
		}
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", path, err)
		}
		return ssh.PublicKeys(signer), nil
	}
	sock := os.Getenv("SSH_AUTH_SOCK")
	if sock == "" {
		return nil, errors.New("no key file given (key:) and no SSH agent (SSH_AUTH_SOCK is not set)")
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("SSH agent: %w", err)
	}
	c.agent = conn
	return ssh.PublicKeysCallback(agent.NewClient(conn).Signers), nil
}

// hostKeyCheck returns the callback that accepts only the key known_hosts
// has for h, and the key algorithms to ask for: those of the keys it has,
// so that a server offering another type first is not mistaken for a
// changed key.
func hostKeyCheck(h topologies.Host) (ssh.HostKeyCallback, []string, error) {
	path := h.KnownHosts
	if path == "" {
		path = "~/.ssh/known_hosts"
	}
	path = expandHome(path)
	check, err := knownhosts.New(path)
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts: %w (add the host's key: ssh-keyscan %s, after checking its fingerprint)", err, keyscanArgs(h.SSH))
	}
	strict := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := check(hostname, remote, key)
		var ke *knownhosts.KeyError
		switch {
		case errors.As(err, &ke) && len(ke.Want) == 0:
			return fmt.Errorf("host key %s %s is not in %s: check its fingerprint and add it (ssh-keyscan %s)",
				key.Type(), ssh.FingerprintSHA256(key), path, keyscanArgs(h.SSH))
		case errors.As(err, &ke):
			return fmt.Errorf("host key changed: it is %s %s, and %s:%d has another for this host; someone may be intercepting the connection",
				key.Type(), ssh.FingerprintSHA256(key), ke.Want[0].Filename, ke.Want[0].Line)
		}
		return err
	}
	return strict, knownAlgorithms(check, h.SSH), nil
}

// knownAlgorithms lists the types of the keys check knows for addr, by
// asking it about a key it cannot know.
func knownAlgorithms(check ssh.HostKeyCallback, addr string) []string {
	tcp, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		tcp = &net.TCPAddr{}
	}
	var ke *knownhosts.KeyError
	if !errors.As(check(addr, tcp, probeKey{}), &ke) {
		return nil
	}
	var out []string
	for _, k := range ke.Want {
		out = append(out, algorithmsFor(k.Key.Type())...)
	}
	return out
}

// algorithmsFor lists the signature algorithms a key of type t may sign
// a handshake with.
func algorithmsFor(t string) []string {
	if t == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{t}
}

// probeKey is a key no known_hosts file holds.
type probeKey struct{}

func (probeKey) Type() string                          { return "bullylab-probe" }
func (probeKey) Marshal() []byte                       { return []byte("bullylab-probe") }
func (probeKey) Verify([]byte, *ssh.Signature) error   { return errors.New("probe key") }
func (p probeKey) String() string                      { return p.Type() }
func (probeKey) Equal(ssh.PublicKey) bool              { return false }
func (probeKey) MarshalAuthorizedKey() (string, error) { return "", nil }

func keyscanArgs(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "22" {
		return addr
	}
	return "-p " + port + " " + host
}

func expandHome(path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return path
}

// Close closes the connection; whatever runs over it is cut off.
func (c *Client) Close() error {
	err := c.conn.Close()
	c.closeAgent()
	return err
}

func (c *Client) closeAgent() {
	if c.agent != nil {
		c.agent.Close()
	}
}

// maxStderr is how much of a command's standard error an error quotes.
const maxStderr = 4 << 10

// Run runs cmd, a shell command line, on the host with stdin (nil for
// none) and its standard output to stdout (nil to discard it). It fails
// with the command's last line of standard error when it exits non-zero.
// When ctx ends first, the command's process group is killed: sshd does
// not pass a signal on to the children of the user's shell, and a child
// holding the session's output keeps the session open.
func (c *Client) Run(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) error {
	s, err := c.conn.NewSession()
	if err != nil {
		return fmt.Errorf("host %s: session: %w", c.host.Name, err)
	}
	defer s.Close()
	stderr := &pidThenTail{pid: make(chan string, 1)}
	s.Stdin, s.Stdout, s.Stderr = stdin, stdout, stderr
	// sshd starts the user's shell as a session leader: its PID is the
	// process group of everything the command starts.
	if err := s.Start("echo $$ >&2; " + cmd); err != nil {
		return fmt.Errorf("host %s: %s: %w", c.host.Name, firstWord(cmd), err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		c.killGroup(stderr.pid)
		select {
		case <-done:
		case <-time.After(killWait):
		}
		return fmt.Errorf("host %s: %s: %w", c.host.Name, firstWord(cmd), ctx.Err())
	}
	if err != nil {
		if last := stderr.lastLine(); last != "" {
			return fmt.Errorf("host %s: %s: %v: %s", c.host.Name, firstWord(cmd), err, last)
		}
		return fmt.Errorf("host %s: %s: %w", c.host.Name, firstWord(cmd), err)
	}
	return nil
}

// killWait bounds the wait for a killed command's session to end.
const killWait = 5 * time.Second

// killGroup kills the process group whose leader's PID arrives on pid, if
// it arrives soon, from a session of its own.
func (c *Client) killGroup(pid <-chan string) {
	var p string
	select {
	case p = <-pid:
	case <-time.After(killWait):
		return
	}
	s, err := c.conn.NewSession()
	if err != nil {
		return
	}
	defer s.Close()
	s.Run(fmt.Sprintf("kill -KILL -- -%[1]s 2>/dev/null || kill -KILL %[1]s 2>/dev/null; true", p))
}

// Output runs cmd as Run does and returns its standard output.
func (c *Client) Output(ctx context.Context, cmd string) ([]byte, error) {
	var out bytes.Buffer
	err := c.Run(ctx, cmd, nil, &out)
	return out.Bytes(), err
}

func firstWord(cmd string) string {
	if f := strings.Fields(cmd); len(f) > 0 {
		return f[0]
	}
	return cmd
}

// pidThenTail takes the first line written to it, a PID, onto pid, and
// keeps the last maxStderr bytes of the rest.
type pidThenTail struct {
	pid     chan string
	line    []byte
	gotLine bool
	tailBuffer
}

func (w *pidThenTail) Write(p []byte) (int, error) {
	n := len(p)
	if !w.gotLine {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			return n, nil
		}
		w.line = append(w.line, p[:i]...)
		w.gotLine = true
		if pid := strings.TrimSpace(string(w.line)); isDigits(pid) {
			w.pid <- pid
		}
		p = p[i+1:]
	}
	w.tailBuffer.Write(p)
	return n, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// tailBuffer keeps the last maxStderr bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > maxStderr {
		t.b = t.b[len(t.b)-maxStderr:]
	}
	return len(p), nil
}

func (t *tailBuffer) lastLine() string {
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// EnsureFile makes the file at remotePath on the host a copy of the local
// file at localPath, mode 0755, unless it is one already (the same
// SHA-256), and reports whether it copied. The copy goes to a temporary
// file beside remotePath, renamed over it once whole and checked: a host
// never runs a half-copied binary.
func (c *Client) EnsureFile(ctx context.Context, localPath, remotePath string) (copied bool, err error) {
	want, err := fileSHA256(localPath)
	if err != nil {
		return false, err
	}
	have, err := c.remoteSHA256(ctx, remotePath)
	if err != nil {
		return false, err
	}
	if have == want {
		return false, nil
	}
	f, err := os.Open(localPath)
	if err != nil {
		return false, err
	}
	defer f.Close()
	q := shellQuote(remotePath)
	script := fmt.Sprintf(`set -e; mkdir -p -- "$(dirname -- %[1]s)"; tmp=$(mktemp %[2]s); trap 'rm -f -- "$tmp"' EXIT; cat > "$tmp"; chmod 0755 "$tmp"; mv -f -- "$tmp" %[1]s; trap - EXIT`,
		q, shellQuote(remotePath+".tmp-XXXXXX"))
	if err := c.Run(ctx, script, f, nil); err != nil {
		return false, fmt.Errorf("copying %s to %s: %w", localPath, remotePath, err)
	}
	if have, err = c.remoteSHA256(ctx, remotePath); err != nil {
		return true, err
	}
	if have != want {
		return true, fmt.Errorf("host %s: %s has SHA-256 %s after the copy, want %s", c.host.Name, remotePath, have, want)
	}
	return true, nil
}

// remoteSHA256 is the hex SHA-256 of the host's file at path, "" when
// there is no such file.
func (c *Client) remoteSHA256(ctx context.Context, path string) (string, error) {
	q := shellQuote(path)
	out, err := c.Output(ctx, fmt.Sprintf("if [ -e %[1]s ]; then sha256sum -- %[1]s; fi", q))
	if err != nil {
		return "", err
	}
	sum, _, _ := strings.Cut(string(out), " ")
	return strings.TrimSpace(sum), nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
