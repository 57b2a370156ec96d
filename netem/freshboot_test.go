//go:build linux

package netem_test

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"github.com/bullylab/bullylab/topologies"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// On a freshly booted machine /run/netns is a plain directory, and the
// first `ip netns add` bind-mounts it on itself: a testbed's namespaces
// must not end up underneath (netnsdir.go).
func TestFreshBootTestbedBesideIPNetns(t *testing.T) {
	if !netemtest.InFreshBoot(t) {
		return
	}
	ip := requireIP(t)
	run := netemtest.RunName(t)
	topo, err := topologies.Star(3)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := netem.Build(t.Context(), topo, run)
	if err != nil {
		t.Fatal(err)
	}
	if !netemtest.IsMountPoint(t, netem.NetnsDir) {
		t.Errorf("Build left %s a plain directory", netem.NetnsDir)
	}
	ipNetnsAdd(t, ip, "ipns"+run[2:]+"-probe")
	if err := tb.Close(); err != nil {
		t.Fatalf("Close after `ip netns add`: %v", err)
	}
	netemtest.RequireClean(t, run)
	if m := runMounts(t, run); len(m) > 0 {
		t.Errorf("mounts of %s left after Close: %v", run, m)
	}
}

// A namespace mounted on the plain directory, as bullylab did before it
// made /run/netns a mount point and as other tools still do, is hidden by
// the next `ip netns add`; Clean finds it in mountinfo and frees it.
func TestFreshBootHiddenRunIsCleaned(t *testing.T) {
	if !netemtest.InFreshBoot(t) {
		return
	}
	ip := requireIP(t)
	run := netemtest.RunID(t)
	name := netem.NodeNamespace(run, "n1")
	requireFreedByClean(t, ip, run, name) // a run ID: bullylab's without a state directory
}

// A run named by the user, whose record an older down removed, is freed
// when clean is given its name.
func TestFreshBootHiddenNamedRunIsCleaned(t *testing.T) {
	if !netemtest.InFreshBoot(t) {
		return
	}
	ip := requireIP(t)
	run := netemtest.RunName(t)
	name := netem.NodeNamespace(run, "n1")
	requireFreedByClean(t, ip, run, name)
}

// requireFreedByClean mounts namespace name of run on the plain NetnsDir,
// hides it with `ip netns add`, and checks that CleanRuns frees it.
func requireFreedByClean(t *testing.T, ip, run, name string) {
	t.Helper()
	if err := os.MkdirAll(netem.NetnsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ns := mountOnPlainDir(t, name)
	// A veth pair with one end in the namespace and the other here, named
	// like no run's link: it goes only when the namespace is freed.
	outside := run + "h"
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: outside}, PeerName: "eth0", PeerNamespace: netlink.NsFd(ns)}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	ns.Close()
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(outside); err == nil {
			netlink.LinkDel(l)
		}
	})
	ipNetnsAdd(t, ip, "ipns"+run[2:]+"-probe")
	if m := runMounts(t, run); len(m) != 2 {
		t.Fatalf("after `ip netns add`, %d mounts of %s (%v), want 2: the hidden one and its copy", len(m), name, m)
	}

	rep, err := netem.CleanRuns(t.Context(), run)
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	if !slices.Contains(rep.Namespaces, name) {
		t.Errorf("Clean did not report %s: %+v", name, rep)
	}
	if m := runMounts(t, run); len(m) > 0 {
		t.Errorf("mounts of %s left after Clean: %v", run, m)
	}
	if _, err := os.Lstat(netem.NetnsDir + "/" + name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s/%s after Clean: %v", netem.NetnsDir, name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := netlink.LinkByName(outside); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("link %s still exists 10s after Clean: the namespace was not freed", outside)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !netemtest.IsMountPoint(t, netem.NetnsDir) {
		t.Errorf("Clean left %s no mount point: the bind mount was not put back", netem.NetnsDir)
	}
}

// mountOnPlainDir creates a namespace and mounts it as NetnsDir/name,
// without making NetnsDir a mount point first, and returns a handle to it.
func mountOnPlainDir(t *testing.T, name string) netns.NsHandle {
	t.Helper()
	type result struct {
		ns  netns.NsHandle
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread goes back to its namespace: a discarded thread can be
		// the main one, which Go parks instead, holding the namespace.
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- result{netns.None(), err}
			return
		}
		ns, err := netns.NewNamed(name)
		if serr := netns.Set(orig); serr != nil {
			done <- result{ns, errors.Join(err, serr)}
			return // still locked: the thread is discarded
		}
		orig.Close()
		runtime.UnlockOSThread()
		done <- result{ns, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() {
		for range 4 {
			unix.Unmount(netem.NetnsDir+"/"+name, unix.MNT_DETACH)
		}
		os.Remove(netem.NetnsDir + "/" + name)
	})
	return r.ns
}

func requireIP(t *testing.T) string {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skipf("this test runs `ip netns add` beside a testbed and needs iproute2's ip: %v", err)
	}
	return ip
}

// ipNetnsAdd adds a namespace as a user would, and deletes it when the
// test ends.
func ipNetnsAdd(t *testing.T, ip, name string) {
	t.Helper()
	if out, err := exec.Command(ip, "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(ip, "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
}

// runMounts returns the mount points of run's namespaces in this
// process's mount table, hidden ones included.
func runMounts(t *testing.T, run string) []string {
	return netemtest.MountsAt(t, func(p string) bool { return strings.HasPrefix(p, netem.NetnsDir+"/"+run+"-") })
}

// A process that dies while /run/netns's mount is aside (Clean moves it
// for the moment it unmounts hidden namespaces) leaves it in
// /run/bullylab; the next testbed or clean puts it back, namespaces and all.
func TestFreshBootNetnsDirMovedAsideIsRestored(t *testing.T) {
	if !netemtest.InFreshBoot(t) {
		return
	}
	ip := requireIP(t)
	run := netemtest.RunName(t)
	probe := "ipns" + run[2:] + "-probe"
	ipNetnsAdd(t, ip, probe) // makes /run/netns a mount point
	aside := netem.StateRoot + "/.netns-aside-0"
	if err := os.MkdirAll(aside, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(aside) })
	if err := unix.Mount(netem.NetnsDir, aside, "", unix.MS_MOVE, ""); err != nil {
		t.Fatalf("moving %s aside: %v", netem.NetnsDir, err)
	}
	if err := netem.RestoreNetnsDir(); err != nil {
		t.Fatal(err)
	}
	if !netemtest.IsMountPoint(t, netem.NetnsDir) || netemtest.IsMountPoint(t, aside) {
		t.Fatalf("after RestoreNetnsDir: %s a mount point %v, %s %v", netem.NetnsDir, netemtest.IsMountPoint(t, netem.NetnsDir), aside, netemtest.IsMountPoint(t, aside))
	}
	if !netemtest.IsMountPoint(t, netem.NetnsDir+"/"+probe) {
		t.Errorf("%s is not mounted in %s after RestoreNetnsDir", probe, netem.NetnsDir)
	}
	if _, err := os.Stat(aside); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after RestoreNetnsDir: %v", aside, err)
	}
}
