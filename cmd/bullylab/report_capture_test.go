package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// readPage reads a report page, failing the test if it cannot.
func readPage(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReportCaptureAuth: the report of a capture of authenticated
// connections says, without the key, that they are not verified, and with
// it that they are; a wrong key still writes the page, then exits 1.
func TestReportCaptureAuth(t *testing.T) {
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cluster.key")
	if err := wire.WriteKeyFile(keyFile, key); err != nil {
		t.Fatal(err)
	}
	other, _ := wire.NewKey()
	otherFile := filepath.Join(dir, "other.key")
	if err := wire.WriteKeyFile(otherFile, other); err != nil {
		t.Fatal(err)
	}
	path := writeAuthCapture(t, &key, false)
	page := filepath.Join(dir, "page.html")

	out, stderr, code := runBin(t, "report", "--out", page, path)
	if code != 0 || !strings.Contains(out, "report of 1 capture in "+page) {
		t.Fatalf("without the key: exit %d, stderr %q, out %q", code, stderr, out)
	}
	if p := readPage(t, page); !strings.Contains(p, "8 authenticated frames not verified: no cluster key given") {
		t.Errorf("the page does not say the capture is unverified without the key")
	}
	if _, stderr, code = runBin(t, "report", "--out", page, "--cluster-key", keyFile, path); code != 0 {
		t.Fatalf("with the key: exit %d, stderr %q", code, stderr)
	}
	if p := readPage(t, page); !strings.Contains(p, "8 frames verified with the cluster key, 0 not verifiable") {
		t.Errorf("the page does not say the frames verified")
	}
	if err := os.Remove(page); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runBin(t, "report", "--out", dir, "--cluster-key", otherFile, path)
	if code != 1 || !strings.Contains(stderr, "report: authentication failed in "+path) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("wrong key: exit %d, stderr %q", code, stderr)
	}
	if p := readPage(t, filepath.Join(dir, defaultCaptureReport)); !strings.Contains(p, "2 frames failed verification") {
		t.Errorf("wrong key: the page in --out DIR does not show the failure")
	}
}

// TestReportInputs: benches and captures are told apart by the argument,
// and what cannot be used is one line, exit status 2.
func TestReportInputs(t *testing.T) {
	dir := t.TempDir()
	capFile := writeFile(t, "x.pcapng", "not a capture")
	benchDir := filepath.Join(dir, "bench")
	if err := os.Mkdir(benchDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(dir, "missing.pcapng")}, "report: " + filepath.Join(dir, "missing.pcapng") + ": no such file or directory"},
		{[]string{benchDir, capFile}, "report: " + benchDir + " is a bench and " + capFile + " a capture: report benches or captures, not both"},
		{[]string{"--cluster-key", capFile, benchDir}, "report: --cluster-key verifies captures, and these are benches"},
		{[]string{"--out", filepath.Join(dir, "p.html"), capFile}, "report: " + capFile + ": "},
	} {
		_, stderr, code := runBin(t, append([]string{"report"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, want 2 and one line with %q: %q", tc.args, code, tc.want, stderr)
		}
	}
}
