package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletion: each shell's script is written, parses, and (bash, which
// the tests have) completes commands, flags and built-in names.
func TestCompletion(t *testing.T) {
	for _, shell := range completionShells {
		out, stderr, code := runApp("completion", shell)
		if code != 0 || stderr != "" || !strings.Contains(out, "bullylab") {
			t.Fatalf("completion %s: exit %d, stderr %q, script %q", shell, code, stderr, out)
		}
		if _, err := exec.LookPath(shell); err != nil {
			t.Logf("no %s here to parse its script", shell)
			continue
		}
		script := filepath.Join(t.TempDir(), "bullylab."+shell)
		if err := os.WriteFile(script, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		if msg, err := exec.Command(shell, "-n", script).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v: %s", shell, err, msg)
		}
		if shell != "bash" {
			continue
		}
		for line, want := range map[string]string{
			"bullylab ben":                         "bench",
			"bullylab bench --scen":                "--scenario",
			"bullylab bench --scenario leader-c":   "leader-crash",
			"bullylab up sta":                      "star1000 star16 star250 star3 star5 star500 star64",
			"bullylab -":                           "--version --help",
			"bullylab bench --topology star5 --ru": "--runs",
			"bullylab completion z":                "zsh",
			"bullylab history ch":                  "check",
			"bullylab history check --min-e":       "--min-effect",
			"bullylab node --log ":                 "json text",
			"bullylab bench --diagram-runs f":      "fastest",
		} {
			words := strings.Fields(line)
			if strings.HasSuffix(line, " ") {
				words = append(words, "")
			}
			cmd := exec.Command("bash", "-c", `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($#-1)); _bullylab; echo "${COMPREPLY[*]}"`, "bash", script)
			cmd.Args = append(cmd.Args, words...)
			got, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(got)) != want {
				t.Errorf("bash completion of %q: %q, %v; want %q", line, got, err, want)
			}
		}
	}
	checkUsage(t, `completion: unknown shell "tcsh"`, "completion", "tcsh")
	checkUsage(t, "completion: want one shell", "completion")
}

func TestVersionFlag(t *testing.T) {
	out, stderr, code := runApp("--version")
	if code != 0 || stderr != "" || out != versionText() {
		t.Errorf("--version: exit %d, stdout %q, stderr %q; want %q", code, out, stderr, versionText())
	}
}
