package bench_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
	"golang.org/x/sys/unix"
)

// On a real pseudo-terminal NewProgress draws the bar by itself.
func TestProgressDetectsTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	// Only a system without pseudo-terminals skips: no /dev/ptmx, no
	// devpts mounted on /dev/pts, or a kernel without them (ENODEV,
	// ENXIO). Any other failure to open one fails the test.
	noPTY := func(err error) bool {
		return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO)
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if noPTY(err) {
		t.Skipf("this system has no pseudo-terminals: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if noPTY(err) {
		t.Skipf("this system has no pseudo-terminals: devpts is not mounted on /dev/pts: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}); err != nil {
		t.Fatal(err)
	}
	p := bench.NewProgress(pts, 2)
	p.Start("leader-crash", 1, 2)
	p.Done(bench.RunUpdate{Scenario: "leader-crash", Index: 1, Runs: 2, OK: true, Leader: "n16", TimeToLeader: time.Second})
	buf := make([]byte, 4096)
	ptmx.SetReadDeadline(time.Now().Add(2 * time.Second))
	got, _ := ptmx.Read(buf)
	s := string(buf[:got])
	if !strings.Contains(s, "\x1b[K") || !strings.Contains(s, "▕") {
		t.Errorf("terminal got %q, want a bar", s)
	}
	for _, line := range strings.Split(s, "\r\x1b[K") {
		if len([]rune(line)) > 79 {
			t.Errorf("line wider than the 80-column terminal: %q", line)
		}
	}

	// TERM=dumb asks for plain lines.
	t.Setenv("TERM", "dumb")
	p = bench.NewProgress(pts, 1)
	p.Done(bench.RunUpdate{Scenario: "s", Index: 1, Runs: 1, OK: true, Leader: "n2", TimeToLeader: time.Second})
	// The terminal may still hold the tail of the bar drawn above: read on
	// to the plain line and judge that line alone.
	var acc string
	ptmx.SetReadDeadline(time.Now().Add(2 * time.Second))
	const plain = "run 1/1 s:"
	for !strings.Contains(acc, "n2") {
		got, err := ptmx.Read(buf)
		if err != nil {
			t.Fatalf("TERM=dumb: no line mentioning n2 in %q: %v", acc, err)
		}
		acc += string(buf[:got])
	}
	// The bar drawn above ends without a newline, so its tail and the plain
	// line can arrive as one piece: the plain line starts at its text.
	i := strings.Index(acc, plain)
	if i < 0 {
		t.Fatalf("TERM=dumb: no plain line %q in %q", plain, acc)
	}
	line := acc[i:]
	if strings.Contains(line, "\x1b[K") {
		t.Errorf("TERM=dumb got %q", line)
	}
}
