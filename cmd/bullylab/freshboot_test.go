//go:build linux

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
)

// A new user's first steps on a freshly booted machine, where /run/netns
// is a plain directory: a testbed up, an ordinary `ip netns add` beside
// it, down, clean. Before /run/netns was made a mount point first, down
// failed with EBUSY and the namespaces stayed, hidden from clean.
func TestFreshBootUpIPNetnsDown(t *testing.T) {
	if !netemtest.InFreshBoot(t) {
		return
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skipf("this test runs `ip netns add` beside a testbed and needs iproute2's ip: %v", err)
	}
	run := freeRunName(t)
	u := startUpAs(t, run, "star5")
	u.waitUp(t)
	probe := "ipns" + run[3:] + "-probe"
	if out, err := exec.Command(ip, "netns", "add", probe).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", probe, err, out)
	}
	defer func() {
		if out, err := exec.Command(ip, "netns", "del", probe).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", probe, err, out)
		}
	}()
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
	if out := mustCLI(t, "clean", "--run", run); strings.Contains(out, run) {
		t.Errorf("clean after down found %s: %q", run, out)
	}
	requireNoLeftovers(t, run, st.Processes)
	if m := netemtest.MountsAt(t, func(p string) bool { return strings.HasPrefix(p, netem.NetnsDir+"/"+run+"-") }); len(m) > 0 {
		t.Errorf("mounts of %s left: %v", run, m)
	}
}
