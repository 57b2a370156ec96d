//go:build linux

// Package remotetest makes stand-in hosts for tests of testbeds across
// hosts: network namespaces on this machine, each running a real sshd on
// an underlay of veths to a hub namespace, from which the test dials.
// Each sshd has a procfs and an empty HOME of its own, as a separate
// machine would, so that one stand-in's namespaces and this machine's
// shell start-up files cost the others nothing.
package remotetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"golang.org/x/sys/unix"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/topologies"
)

// SSHD is the sshd binary of Debian's openssh-server.
const SSHD = "/usr/sbin/sshd"

// underlay is the hosts' network inside the test's namespaces: the hub
// is .1, host k is .10+k.
var underlay = netip.MustParsePrefix("10.213.0.0/24")

// Hosts are stand-in hosts and how to reach them.
type Hosts struct {
	Run   string
	Hosts []topologies.Host // user root, a key and known_hosts made for the test
	// Namespaces are the hosts' namespaces, and Underlay their addresses
	// on the hosts' network, in the order of Hosts.
	Namespaces []string
	Underlay   []netip.Addr
	// HostKeys are the hosts' public keys, which known_hosts holds.
	HostKeys []ssh.PublicKey
	// Hub is the namespace the underlay meets in; dial from it.
	Hub string
}

// Topology is a topology file: head, then a hosts section of the stand-in
// hosts, each with its key and known_hosts.
func (hs *Hosts) Topology(head string) []byte {
	var b strings.Builder
	b.WriteString(head + "hosts:\n")
	for _, h := range hs.Hosts {
		fmt.Fprintf(&b, "  - {name: %s, ssh: %q, user: root, key: %q, known_hosts: %q}\n", h.Name, h.SSH, h.Key, h.KnownHosts)
	}
	return []byte(b.String())
}

// Dial connects to h from the hub namespace.
func (hs *Hosts) Dial(ctx context.Context, h topologies.Host) (*remote.Client, error) {
	return remote.DialWith(ctx, h, hs.DialTCP)
}

// DialTCP makes a TCP connection to addr from the hub namespace.
func (hs *Hosts) DialTCP(ctx context.Context, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, err
	}
	socket, release, err := netem.NamespaceSocket(hs.Hub)
	if err != nil {
		return nil, err
	}
	defer release()
	fd, err := socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(time.Minute)
	}
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if err := connectBy(fd, sa, dl); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "ssh")
	defer f.Close()
	return net.FileConn(f)
}

// StartHosts makes k hosts h1..hk under a fresh run ID and removes them, and
// checks that nothing is left, when the test ends. It skips without root
// or sshd.
func StartHosts(t testing.TB, k int) *Hosts {
	t.Helper()
	netemtest.RequireRoot(t)
	if _, err := os.Stat(SSHD); err != nil {
		t.Skipf("%s is missing: install Debian's openssh-server (scripts/test.sh does)", SSHD)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("ip is missing: install Debian's iproute2 (scripts/test.sh does)")
	}
	run := standInRun(t)
	hs := &Hosts{Run: run, Hub: run + "-hub"}
	t.Cleanup(func() {
		for _, ns := range append([]string{hs.Hub}, hostNamespaces(run, k)...) {
			exec.Command("ip", "netns", "del", ns).Run()
		}
		netemtest.RequireClean(t, run)
	})
	dir := t.TempDir()
	privsepDir(t)
	clientPub := WriteKey(t, filepath.Join(dir, "client_key"))
	must(t, os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600))
	ipCmd(t, "netns", "add", hs.Hub)
	ipCmd(t, "-n", hs.Hub, "link", "set", "lo", "up")
	ipCmd(t, "-n", hs.Hub, "link", "add", run+"br", "type", "bridge")
	ipCmd(t, "-n", hs.Hub, "addr", "add", hostPrefix(0).String(), "dev", run+"br")
	ipCmd(t, "-n", hs.Hub, "link", "set", run+"br", "up")
	var known []string
	for i, ns := range hostNamespaces(run, k) {
		addr := hostPrefix(10 + i + 1)
		pub := hs.addHost(t, dir, ns, i+1, addr)
		hs.Namespaces = append(hs.Namespaces, ns)
		hs.Underlay = append(hs.Underlay, addr.Addr())
		hs.HostKeys = append(hs.HostKeys, pub)
		sshAddr := net.JoinHostPort(addr.Addr().String(), "22")
		known = append(known, knownhosts.Line([]string{knownhosts.Normalize(sshAddr)}, pub))
		hs.Hosts = append(hs.Hosts, topologies.Host{
			Name: fmt.Sprintf("h%d", i+1), SSH: sshAddr, User: "root",
			Key: filepath.Join(dir, "client_key"), KnownHosts: filepath.Join(dir, "known_hosts"),
		})
	}
	must(t, os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o600))
	for _, h := range hs.Hosts {
		hs.waitListening(t, h.SSH)
	}
	return hs
}

// standInRun draws a name for a set of stand-in hosts: "st" and 4 hex
// digits, which no namespace on this machine starts with. Not a run ID
// (bl...): netem.Clean removes namespaces named after a run ID that no
// state directory claims, and the tests of other packages clean while
// these run.
func standInRun(t testing.TB) string {
	t.Helper()
	for range 100 {
		var b [2]byte
		rand.Read(b[:])
		run := fmt.Sprintf("st%02x%02x", b[0], b[1])
		entries, _ := os.ReadDir(netem.NetnsDir)
		if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), run) }) {
			return run
		}
	}
	t.Fatal("no free stand-in name after 100 draws")
	return ""
}

func hostNamespaces(run string, k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("%s-h%d", run, i+1)
	}
	return out
}

func hostPrefix(host int) netip.Prefix {
	a := underlay.Addr().As4()
	a[3] = byte(host + 1)
	return netip.PrefixFrom(netip.AddrFrom4(a), underlay.Bits())
}

// addHost makes namespace ns, joins it to the hub's bridge with address
// addr, and runs an sshd in it with a host key of its own, whose public
// key it returns.
func (hs *Hosts) addHost(t testing.TB, dir, ns string, k int, addr netip.Prefix) ssh.PublicKey {
	t.Helper()
	run := hs.Run
	ipCmd(t, "netns", "add", ns)
	ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	// Made in the hub and moved, so that no link of the test's ever sits in
	// this process's own namespace.
	here, peer := fmt.Sprintf("%su%d", run, k), fmt.Sprintf("%sp%d", run, k)
	ipCmd(t, "-n", hs.Hub, "link", "add", here, "type", "veth", "peer", "name", peer)
	ipCmd(t, "-n", hs.Hub, "link", "set", here, "netns", ns)
	ipCmd(t, "-n", hs.Hub, "link", "set", peer, "master", run+"br", "up")
	ipCmd(t, "-n", ns, "addr", "add", addr.String(), "dev", here)
	ipCmd(t, "-n", ns, "link", "set", here, "up")
	hostKey := filepath.Join(dir, fmt.Sprintf("host%d_key", k))
	pub := WriteKey(t, hostKey)
	// The sessions' HOME is a directory of the host's own, empty: the
	// shell sshd runs each command with reads its user's startup files
	// from there, and this machine's root's (a pyenv set-up here) made
	// every command, and so every span's connect, take seconds.
	home := filepath.Join(dir, fmt.Sprintf("home%d", k))
	must(t, os.Mkdir(home, 0o700))
	cfg := filepath.Join(dir, fmt.Sprintf("sshd%d_config", k))
	must(t, os.WriteFile(cfg, fmt.Appendf(nil, `ListenAddress %s:22
HostKey %s
AuthorizedKeysFile %s/authorized_keys
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
LogLevel ERROR
SetEnv HOME=%s
`, addr.Addr(), hostKey, dir, home), 0o600))
	cmd := ownProc(SSHD, "-D", "-e", "-f", cfg)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(t, netem.StartInNamespace(ns, cmd))
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if s := stderr.String(); s != "" && t.Failed() {
			t.Logf("sshd in %s: %s", ns, s)
		}
	})
	return pub
}

// ownProc is a command that runs argv in a mount namespace of its own
// with a procfs of its own on /proc, as a host of its own has: its agent's
// /proc/sys is not every stand-in host's. The kernel keeps one dentry of
// /proc/sys/net per network namespace, all with one name under one parent
// in one procfs, and every lookup of that path walks them all: with five
// stand-in hosts building 1000 namespaces each through one procfs, an
// agent's sysctl writes in each new namespace walked up to 5000 entries,
// and its build took 21-32 s of CPU against 4-7 s alone. The other mounts
// keep their propagation: namespaces the agent mounts in netem.NetnsDir
// appear on this machine's, as a test's cleanup needs. The new procfs
// mount is on a slave of /proc, so it reaches no other mount namespace.
// Without unshare(1), or where the mount fails, argv runs on this
// machine's procfs, as before.
func ownProc(argv ...string) *exec.Cmd {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return exec.Command(argv[0], argv[1:]...)
	}
	script := `mount --make-rslave /proc && mount -t proc proc /proc; exec "$0" "$@"`
	return exec.Command(unshare, append([]string{"--mount", "--propagation", "unchanged", "--", "/bin/sh", "-c", script}, argv...)...)
}

// waitListening waits until addr accepts a connection from the hub.
func (hs *Hosts) waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		c, err := hs.DialTCP(ctx, addr)
		cancel()
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd on %s not accepting after 10s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the port, with a deadline
	}
}

// privsepDir makes sshd's privilege separation directory where the
// machine has none yet (the package's init script makes it at boot, and a
// machine without init has none). It stays: sshds of other tests, in this
// process or another, may need it after this test ends, and an empty
// /run/sshd is what every machine running sshd has.
func privsepDir(t testing.TB) {
	if err := os.Mkdir("/run/sshd", 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.Fatal(err)
	}
}

// WriteKey writes a new ed25519 private key in OpenSSH's format to path
// and returns its public key.
func WriteKey(t testing.TB, path string) ssh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	must(t, err)
	must(t, os.WriteFile(path, pem.EncodeToMemory(block), 0o600))
	sp, err := ssh.NewPublicKey(pub)
	must(t, err)
	return sp
}

func ipCmd(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Connect opens a TCP connection from namespace from to addr, on a port
// namespace to listens on, and fails the test if it does not open.
func Connect(t testing.TB, from, to string, addr netip.Addr) {
	t.Helper()
	if _, err := ConnectTime(t, from, to, addr, 5*time.Second); err != nil {
		t.Error(err)
	}
}

// ConnectTime is Connect, returning how long connect(2) took, a round trip
// between the two namespaces, or why it did not complete within timeout.
func ConnectTime(t testing.TB, from, to string, addr netip.Addr, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	lfd := socketIn(t, to)
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: addr.As4()}); err != nil {
		t.Fatalf("binding %s in %s: %v", addr, to, err)
	}
	must(t, unix.Listen(lfd, 4))
	sa, err := unix.Getsockname(lfd)
	must(t, err)
	port := sa.(*unix.SockaddrInet4).Port
	cfd := socketIn(t, from)
	defer unix.Close(cfd)
	start := time.Now()
	if err := connectBy(cfd, &unix.SockaddrInet4{Port: port, Addr: addr.As4()}, start.Add(timeout)); err != nil {
		return 0, fmt.Errorf("connecting from %s to %s:%d (in %s): %v", from, addr, port, to, err)
	}
	return time.Since(start), nil
}

// connectBy connects the blocking socket fd to sa, waiting until deadline.
// A signal, such as the Go runtime's preemption, can interrupt connect(2)
// (EINTR) while the kernel goes on connecting: then wait for the socket
// to become writable and read the outcome from SO_ERROR.
func connectBy(fd int, sa unix.Sockaddr, deadline time.Time) error {
	tv := unix.NsecToTimeval(time.Until(deadline).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return err
	}
	err := unix.Connect(fd, sa)
	if err != unix.EINTR {
		return err
	}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, int(left.Milliseconds())+1)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return unix.ETIMEDOUT
		}
		soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soerr != 0 {
			return unix.Errno(soerr)
		}
		return nil
	}
}

// socketIn makes a TCP socket in namespace ns.
func socketIn(t testing.TB, ns string) int {
	t.Helper()
	socket, release, err := netem.NamespaceSocket(ns)
	must(t, err)
	defer release()
	fd, err := socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	must(t, err)
	return fd
}
