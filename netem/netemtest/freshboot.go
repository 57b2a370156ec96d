//go:build linux

package netemtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"golang.org/x/sys/unix"
)

// freshBootEnv names, in a child test process, the test that runs there.
const freshBootEnv = "BULLYLAB_TEST_FRESH_BOOT"

// InFreshBoot runs the calling top-level test again in a child process
// with a mount namespace of its own, in which netem.NetnsDir is a plain
// directory, as on a machine that has just booted and on which nobody ran
// `ip netns add` yet. It returns true in the child, where the test does
// its work, and false here, once the child passed; the child's failure or
// skip fails the test. Root's mounts are private in the child, so nothing
// it mounts or unmounts reaches this process; files it makes in NetnsDir
// are on the shared file system, and the test removes what it made.
func InFreshBoot(t *testing.T) bool {
	t.Helper()
	RequireRoot(t)
	if os.Getenv(freshBootEnv) == t.Name() {
		makeNetnsDirPlain(t)
		return true
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0],
		"-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), freshBootEnv+"="+t.Name())
	// Go makes / recursively private in the child before it runs the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")) {
		t.Fatalf("%s in a mount namespace of its own (err %v):\n%s", t.Name(), err, out)
	}
	t.Logf("in a mount namespace of its own, %s a plain directory:\n%s", netem.NetnsDir, out)
	return false
}

// makeNetnsDirPlain unmounts every mount on NetnsDir in this (private)
// mount namespace.
func makeNetnsDirPlain(t *testing.T) {
	t.Helper()
	for range 16 {
		if !IsMountPoint(t, netem.NetnsDir) {
			return
		}
		if err := unix.Unmount(netem.NetnsDir, unix.MNT_DETACH); err != nil {
			t.Fatalf("unmounting %s in a private mount namespace: %v", netem.NetnsDir, err)
		}
	}
	t.Fatalf("%s is still a mount point after 16 unmounts", netem.NetnsDir)
}

// IsMountPoint reports whether this process's mount table has a mount on
// path (one without the characters mountinfo escapes).
func IsMountPoint(t testing.TB, path string) bool {
	t.Helper()
	return len(MountsAt(t, func(point string) bool { return point == path })) > 0
}

// MountsAt returns the mount points in this process's mount table for
// which match is true.
func MountsAt(t testing.TB, match func(point string) bool) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && match(fields[4]) {
			points = append(points, fields[4])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return points
}
