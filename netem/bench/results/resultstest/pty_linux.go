package resultstest

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// OpenPTY opens a pseudo-terminal of cols columns: its master, to read
// what is written to its slave. Only a system without pseudo-terminals
// skips the test (no /dev/ptmx, no devpts mounted on /dev/pts, or a kernel
// without them: ENODEV, ENXIO); any other failure to open one fails it.
func OpenPTY(t testing.TB, cols uint16) (ptmx, pts *os.File) {
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
