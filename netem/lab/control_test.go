//go:build linux

package lab_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
)

func TestFindRunName(t *testing.T) {
	for _, bad := range []string{"My-Lab", "abcdefghijk", "1lab", "läb"} {
		_, err := lab.FindRun(bad)
		want := "--run " + strconv.Quote(bad) + ": not a run name (" + netem.RunNameRule + ")"
		if err == nil || err.Error() != want || errors.Is(err, lab.ErrNoRun) {
			t.Errorf("FindRun(%q) = %v, want %q", bad, err, want)
		}
	}
	// A free-form name and a run ID that no run holds: no testbed, and the
	// error names it.
	for _, run := range []string{"zq" + netem.NewRunID()[2:] + "qz", netem.NewRunID()} {
		if _, err := os.Stat(netem.StateDir(run)); err == nil {
			continue // held by a run on this machine after all
		}
		_, err := lab.FindRun(run)
		if !errors.Is(err, lab.ErrNoRun) || !strings.HasSuffix(err.Error(), "with run name "+run) {
			t.Errorf("FindRun(%q) of no run = %v, want ErrNoRun naming it", run, err)
		}
	}
}

// PickRun, what status, fault, exec and down act on without --run: the
// only testbed up, if the caller started it; else an error that lists the
// testbeds up, whose each is, and says to pass --run.
func TestPickRun(t *testing.T) {
	alice := netem.RunUser{UID: 1000, Name: "alice"}
	bob := netem.RunUser{UID: 1001, Name: "bob"}
	at := time.Date(2026, 11, 27, 9, 30, 0, 0, time.Local)
	mine := lab.UpRun{Run: "bl1a2b", Topology: "star5", User: &alice, Created: at}
	mine2 := lab.UpRun{Run: "mylab", Topology: "ring3", User: &alice, Created: at}
	bobs := lab.UpRun{Run: "bl3c4d", Topology: "star3", User: &bob, Created: at}
	old := lab.UpRun{Run: "bl5e6f", Topology: "star3", Created: at} // a record without a user

	if run, err := lab.PickRun([]lab.UpRun{mine}, alice); err != nil || run != "bl1a2b" {
		t.Errorf("the only run up, the caller's: %q, %v; want bl1a2b", run, err)
	}
	// The caller is known by uid: a name sudo gives differently is the
	// same user.
	if run, err := lab.PickRun([]lab.UpRun{mine}, netem.RunUser{UID: 1000}); err != nil || run != "bl1a2b" {
		t.Errorf("the only run up, the caller's uid: %q, %v; want bl1a2b", run, err)
	}
	if _, err := lab.PickRun(nil, alice); !errors.Is(err, lab.ErrNoRun) {
		t.Errorf("no run up: %v, want ErrNoRun", err)
	}
	for _, c := range []struct {
		name string
		runs []lab.UpRun
		want string
	}{
		{"another user's", []lab.UpRun{bobs},
			"the only testbed up, bl3c4d (star3), was started by bob (uid 1001), not by you, alice (uid 1000): pass --run bl3c4d to act on it"},
		{"an unknown user's", []lab.UpRun{old},
			"the only testbed up, bl5e6f (star3), was started by an unknown user, not by you, alice (uid 1000): pass --run bl5e6f to act on it"},
		{"two of the caller's", []lab.UpRun{mine, mine2},
			"2 testbeds are up: bl1a2b (star5, started by alice (uid 1000) at 09:30:00), mylab (ring3, started by alice (uid 1000) at 09:30:00): pick one with --run NAME"},
		{"the caller's and another's", []lab.UpRun{mine, bobs},
			"2 testbeds are up: bl1a2b (star5, started by alice (uid 1000) at 09:30:00), bl3c4d (star3, started by bob (uid 1001) at 09:30:00): pick one with --run NAME"},
	} {
		run, err := lab.PickRun(c.runs, alice)
		which, ok := errors.AsType[*lab.WhichRunError](err)
		if run != "" || !ok || err.Error() != c.want || len(which.Runs) != len(c.runs) || which.User != alice {
			t.Errorf("%s: %q, %v; want the error %q", c.name, run, err, c.want)
		}
	}
}
