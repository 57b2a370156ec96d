package results_test

import (
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/bench/results/resultstest"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal of cols columns: its master, to read
// what is written to its slave. Only a system without pseudo-terminals
// skips.
func openPTY(t *testing.T, cols uint16) (ptmx, pts *os.File) {
	t.Helper()
	noPTY := func(err error) bool {
		return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO)
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if noPTY(err) {
		t.Skipf("this system has no pseudo-terminals: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if noPTY(err) {
		t.Skipf("this system has no pseudo-terminals: devpts is not mounted on /dev/pts: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
		t.Fatal(err)
	}
	return ptmx, pts
}

// summaryOnTerminal writes the summary of r to a terminal of cols columns
// and returns what the terminal got. The writer closes the terminal's
// slave when done, which ends the master's reads once it has read all.
func summaryOnTerminal(t *testing.T, r *results.Results, cols uint16) string {
	t.Helper()
	ptmx, pts := openPTY(t, cols)
	done := make(chan error, 1)
	go func() {
		err := results.WriteSummary(pts, r)
		pts.Close()
		done <- err
	}()
	got, _ := io.ReadAll(ptmx) // ends in EIO, the slave closed
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(got), "\r\n", "\n")
}

// TestSummaryDetectsTerminal: on a terminal the summary takes its width,
// or $COLUMNS when set.
func TestSummaryDetectsTerminal(t *testing.T) {
	r := resultstest.Sample(1)
	t.Setenv("COLUMNS", "")
	if out := summaryOnTerminal(t, r, 80); strings.Contains(out, "┌") || !strings.Contains(out, "passed") {
		t.Errorf("an 80-column terminal got no compact summary:\n%s", out)
	}
	if out := summaryOnTerminal(t, r, 200); !strings.Contains(out, "┌") {
		t.Errorf("a 200-column terminal got no full summary:\n%s", out)
	}
	t.Setenv("COLUMNS", "200")
	if out := summaryOnTerminal(t, r, 80); !strings.Contains(out, "┌") {
		t.Errorf("an 80-column terminal with COLUMNS=200 got no full summary:\n%s", out)
	}
}
