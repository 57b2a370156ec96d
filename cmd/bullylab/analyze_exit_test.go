package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/bullylab/bullylab/wire"
)

// failingWriter fails every write, as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestAnalyzeExitCodes runs analyze through run for each exit status its
// help documents: 0 nothing failed, 1 a frame failed verification, 2 the
// input cannot be used (whichever file or flag), 3 no report written.
// Every error is one line on stderr naming the file or flag at fault.
func TestAnalyzeExitCodes(t *testing.T) {
	dir := t.TempDir()
	key, err := wire.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := wire.WriteKeyFile(keyFile, key); err != nil {
		t.Fatal(err)
	}
	other, _ := wire.NewKey()
	otherFile := filepath.Join(dir, "other.key")
	if err := wire.WriteKeyFile(otherFile, other); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	openKey := write("open.key", "", 0o644)
	if data, err := os.ReadFile(keyFile); err != nil {
		t.Fatal(err)
	} else {
		openKey = write("open.key", string(data), 0o644)
	}
	garbageKey := write("garbage.key", "not a key\n", 0o600)
	shortKey := write("short.key", "c2hvcnQ=\n", 0o600)
	good := writeAuthCapture(t, &key, false)
	tampered := writeAuthCapture(t, &key, true)
	notPcap := write("notes.txt", "these are notes, not a capture\n", 0o644)
	empty := write("empty.pcapng", "", 0o644)
	missing := filepath.Join(dir, "missing.pcapng")

	for _, c := range []struct {
		name string
		args []string
		code int
		want string // in the one line on stderr
	}{
		{"no key", []string{good}, 0, ""},
		{"verified", []string{"--cluster-key", keyFile, good}, 0, ""},
		{"verified json", []string{"--json", "--cluster-key", keyFile, good}, 0, ""},

		{"tampered", []string{"--cluster-key", keyFile, tampered}, 1, "analyze " + tampered + ": authentication: 1 frames failed"},
		{"tampered json", []string{"--json", "--cluster-key", keyFile, tampered}, 1, "authentication: 1 frames failed"},
		{"wrong key", []string{"--cluster-key", otherFile, good}, 1, "authentication: 2 frames failed"},

		{"missing capture", []string{missing}, 2, "analyze " + missing + ": no such file or directory"},
		{"capture named on two lines", []string{filepath.Join(dir, "two\nlines.pcapng")}, 2, `two\nlines.pcapng: no such file`},
		{"key named on two lines", []string{"--cluster-key", filepath.Join(dir, "two\nlines.key"), good}, 2, `two\nlines.key: no such file`},
		{"capture a directory", []string{dir}, 2, "analyze " + dir + ": "},
		{"capture not pcapng", []string{notPcap}, 2, "analyze " + notPcap + ": not a pcapng file"},
		{"capture empty", []string{empty}, 2, "analyze " + empty + ": "},
		{"key missing", []string{"--cluster-key", filepath.Join(dir, "none.key"), good}, 2, "--cluster-key: "},
		{"key readable by others", []string{"--cluster-key", openKey, good}, 2, "--cluster-key: cluster key " + openKey + ": mode 0644"},
		{"key not base64", []string{"--cluster-key", garbageKey, good}, 2, "--cluster-key: "},
		{"key too short", []string{"--cluster-key", shortKey, good}, 2, "--cluster-key: "},
		{"key file missing its name", []string{good, "--cluster-key"}, 2, "options go before the file"},
		{"no capture", nil, 2, "want one capture file, got 0"},
		{"two captures", []string{good, tampered}, 2, "want one capture file, got 2"},
		{"port out of range", []string{"--port", "0", good}, 2, "--port 0"},
		{"quiet not a duration", []string{"--quiet", "soon", good}, 2, "--quiet"},
		{"unknown flag", []string{"--colour", good}, 2, "unknown flag --colour"},
		{"no such election", []string{"--timeline", "9", good}, 2, "--timeline: no election 9"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"bullylab", "analyze"}, c.args...), &stdout, &stderr)
		errLine := stderr.String()
		if code != c.code {
			t.Errorf("%s: exit %d, want %d; stderr %q", c.name, code, c.code, errLine)
			continue
		}
		if c.code == 0 {
			if errLine != "" || stdout.Len() == 0 {
				t.Errorf("%s: stderr %q, %d bytes of report", c.name, errLine, stdout.Len())
			}
			continue
		}
		if !strings.HasPrefix(errLine, "bullylab: ") || !strings.Contains(errLine, c.want) || strings.Count(errLine, "\n") != 1 {
			t.Errorf("%s: stderr %q, want one line with %q", c.name, errLine, c.want)
		}
		// 1 comes after the whole report; 2 before any of it.
		if got := stdout.Len() > 0; got != (c.code == 1) {
			t.Errorf("%s: exit %d with %d bytes on stdout", c.name, code, stdout.Len())
		}
	}

	// A capture piped in through a FIFO, whose writer comes after the
	// reader, as when a capture is analyzed as it is written, is read to
	// its end.
	piped := filepath.Join(dir, "piped.pcapng")
	if err := syscall.Mkfifo(piped, 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := os.WriteFile(piped, data, 0o600); err != nil {
			t.Error(err)
		}
	}()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bullylab", "analyze", "--cluster-key", keyFile, piped}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "8 frames verified") {
		t.Errorf("a capture through a FIFO: exit %d, stderr %q, output:\n%s", code, stderr.String(), stdout.String())
	}

	for _, args := range [][]string{{good}, {"--json", good}} {
		var stderr bytes.Buffer
		code := run(append([]string{"bullylab", "analyze"}, args...), failingWriter{}, &stderr)
		if code != 3 || !strings.Contains(stderr.String(), "writing the report: no space left on device") || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v to a full disk: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}

// TestAnalyzeHelpExitCodes: the help names every exit status, and the
// README section that documents the JSON, which exists.
func TestAnalyzeHelpExitCodes(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"bullylab", "analyze", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("analyze --help: exit %d, stderr %q", code, stderr.String())
	}
	help := stdout.String()
	help = strings.Join(strings.Fields(help), " ")
	for _, want := range []string{"Exit status: 0 ", " 1 the report is written, and a frame failed", " 2 nothing is analyzed", " 3 the report could not be written",
		`README.md describes in its section "The analyze JSON"`} {
		if !strings.Contains(help, want) {
			t.Errorf("analyze --help lacks %q:\n%s", want, help)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "\n### The analyze JSON\n") {
		t.Error("README.md has no section \"The analyze JSON\", which analyze --help names")
	}
}
