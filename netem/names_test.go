//go:build linux

package netem_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/netemtest"
	"golang.org/x/sys/unix"
)

func TestRunNameValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"mylab", true},
		{"lab2", true},
		{"bl3f2a", true}, // what NewRunID draws
		{"abcdefghij", true},
		{"a123456789", true},
		{"", false},
		{"abcdefghijk", false}, // 11: SwitchVeth would pass 15 bytes
		{"1lab", false},
		{"0", false},
		{"MyLab", false},
		{"myLab", false},
		{"my-lab", false}, // "-" ends the run part of a namespace name
		{"-lab", false},
		{"my_lab", false},
		{"my.lab", false},
		{"my lab", false},
		{"lab/x", false},
		{"läb", false},
		{"ｌａｂ", false}, // fullwidth letters
		{"lab\x00", false},
		{"lab\n", false},
	} {
		if got := netem.ValidRunName(tc.name); got != tc.ok {
			t.Errorf("ValidRunName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
		err := netem.CheckRunName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("CheckRunName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), strconv.Quote(tc.name)) ||
			!strings.Contains(err.Error(), netem.RunNameRule) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("CheckRunName(%q) = %q: want one line quoting the name and saying the rule", tc.name, err)
		}
	}
}

func TestRunIDIsRunName(t *testing.T) {
	for range 100 {
		id := netem.NewRunID()
		if !netem.ValidRunID(id) || !netem.ValidRunName(id) {
			t.Fatalf("NewRunID drew %q, not a valid run ID and name", id)
		}
	}
	for _, s := range []string{"mylab", "bl3f2", "bl3f2ab", "blzzzz", "bl3F2A"} {
		if netem.ValidRunID(s) {
			t.Errorf("ValidRunID(%q): only bl and 4 lowercase hex digits are run IDs", s)
		}
	}
}

// TestRunNameKernelNames checks that the longest run names with the
// largest node index topologies allow fit IFNAMSIZ-1, and that every
// kernel name leads back to its run and to no other.
func TestRunNameKernelNames(t *testing.T) {
	const ifnamsiz = 16   // linux/if.h, with the terminating NUL
	const maxIndex = 9999 // checkTopology's limit
	runs := []string{"a", "av", "av1", "abr", "a1", "br", "v1", "vv", "bl3f2a", "abcdefghij", "zzzzzzzzzz", "v123456789"}
	owner := map[string]string{} // kernel name -> run
	claim := func(name, run string) {
		t.Helper()
		if o, ok := owner[name]; ok && o != run {
			t.Errorf("%s names objects of runs %s and %s", name, o, run)
		}
		owner[name] = run
	}
	for _, run := range runs {
		if !netem.ValidRunName(run) {
			t.Fatalf("%q is not a run name", run)
		}
		for _, i := range []int{1, 9, 10, 12, 99, 100, 999, 1000, maxIndex} {
			v := netem.SwitchVeth(run, i)
			if len(v) > ifnamsiz-1 {
				t.Errorf("veth %s: %d bytes, more than %d", v, len(v), ifnamsiz-1)
			}
			if r, ok := netem.RunOfLink(v); !ok || r != run {
				t.Errorf("RunOfLink(%q) = %q, %v; want %q", v, r, ok, run)
			}
			claim(v, run)
		}
		for _, node := range []string{"n1", "n0007", "sw-a", "x"} {
			ns := netem.NodeNamespace(run, node)
			if r, ok := netem.RunOfNamespace(ns); !ok || r != run {
				t.Errorf("RunOfNamespace(%q) = %q, %v; want %q", ns, r, ok, run)
			}
			claim(ns, run)
		}
		sw := netem.SwitchNamespace(run)
		if r, ok := netem.RunOfNamespace(sw); !ok || r != run {
			t.Errorf("RunOfNamespace(%q) = %q, %v; want %q", sw, r, ok, run)
		}
		claim(sw, run)
	}
	if v := netem.SwitchVeth("abcdefghij", maxIndex); len(v) != ifnamsiz-1 {
		t.Errorf("the longest veth %s is %d bytes: MaxRunName no longer matches IFNAMSIZ", v, len(v))
	}
	if len("abcdefghij") != netem.MaxRunName {
		t.Errorf("MaxRunName is %d, the test assumes 10", netem.MaxRunName)
	}
}

func TestRunNameOfForeignNames(t *testing.T) {
	for _, name := range []string{"eth0", "lo", "veth0", "virbr0", "docker0", "br-1a2b3c", "v", "br", "blprobe0", "Labv1", "labv1x", "lab-v1", "labv"} {
		if r, ok := netem.RunOfLink(name); ok {
			t.Errorf("RunOfLink(%q) = %q: not a bullylab link name", name, r)
		}
	}
	for _, ns := range []string{"foo", "-sw", "Foo-sw", "my_lab-sw", "abcdefghijk-sw"} {
		if r, ok := netem.RunOfNamespace(ns); ok {
			t.Errorf("RunOfNamespace(%q) = %q: not a run's namespace", ns, r)
		}
	}
}

// FuzzRunOfLink checks that whatever RunOfLink accepts is exactly a switch
// veth of the run it returns.
func FuzzRunOfLink(f *testing.F) {
	for _, s := range []string{"bl3f2abr", "bl3f2av7", "mylabv9999", "abrv1", "av1br", "eth0", "v1", "brbr", "labv007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		run, ok := netem.RunOfLink(name)
		if !ok {
			return
		}
		if !netem.ValidRunName(run) {
			t.Fatalf("RunOfLink(%q) = %q, not a run name", name, run)
		}
		idx, found := strings.CutPrefix(name, run+"v")
		if !found || idx == "" || strings.Trim(idx, "0123456789") != "" {
			t.Fatalf("RunOfLink(%q) = %q, but it is not one of %s's veths", name, run, run)
		}
	})
}

// TestRunNameCleanAfterKill kills a builder of a run with a free-form name
// and checks that Clean finds everything it left through its state
// directory.
func TestRunNameCleanAfterKill(t *testing.T) {
	netemtest.RequireRoot(t)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	run := "fx" + netem.NewRunID()[2:] + "n" // 7 bytes, no run ID
	if c := netemtest.CountLeftovers(t, run); c != (netemtest.Leftovers{}) {
		t.Skipf("run name %s is in use on this machine: %+v", run, c)
	}
	cmd, out := tbHelperBuild(t, run, 3, true)
	if line, err := out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("builder said %q, %v", line, err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if c := netemtest.CountLeftovers(t, run); c.Namespaces != 4 || c.Processes != 3 || !c.StateDir {
		t.Fatalf("killed builder left %+v, want 4 namespaces, 3 processes and the state dir", c)
	}
	st, err := netem.ReadState(run)
	if err != nil {
		t.Fatal(err)
	}
	tbCleanRun(t, run)
	for _, p := range st.Processes {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(p.PID, &ws, 0, nil); err != nil {
			t.Errorf("reaping node process %d: %v", p.PID, err)
		}
	}
}
