//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/netem/lab"
)

// TestReportUpCapture: the report of a real testbed's capture, `up
// --capture` with the leader crashed, draws every election the capture
// holds, the crash among them, and says the frames are not verified
// without the key.
func TestReportUpCapture(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "star5.pcapng")
	u := startUp(t, "star5", "--capture", path)
	u.waitUp(t)
	waitStatus(t, u, "leader n5", leads("n5"))
	mustCLI(t, "fault", "crash", "n5", "--run", u.run)
	waitStatus(t, u, "leader n4", leads("n4"))
	waitStatus(t, u, "10 HEARTBEATs from n4", func(st *lab.RunStatus) bool { return sentHeartbeats(st, "n4") >= 10 })
	mustCLI(t, "down", "--run", u.run)
	if code := u.wait(t); code != 0 {
		t.Fatalf("up exited %d; output:\n%s", code, u.output())
	}
	rep := analyzeJSON(t, path)
	page := filepath.Join(dir, "star5.html")
	if out, stderr, code := runBin(t, "report", "--out", page, path); code != 0 {
		t.Fatalf("report: exit %d, stderr %q, out %q", code, stderr, out)
	}
	p := readPage(t, page)
	if len(rep.Elections) < 2 {
		t.Fatalf("the capture holds %d elections, want the boot's and the crash's", len(rep.Elections))
	}
	if got := strings.Count(p, "<svg"); got != len(rep.Elections) {
		t.Errorf("%d diagrams, want one per election: %d", got, len(rep.Elections))
	}
	for _, want := range []string{"triggered by crash n5: leader n4", "crash n5 (SIGKILL", "not verified: no cluster key given"} {
		if !strings.Contains(p, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
