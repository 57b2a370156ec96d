package lab_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

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
