//go:build linux

package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/bullylab/bullylab/netem/netemtest"
)

// ciRecipe returns the commands (the `- run:` lines) of README.md's CI job.
func ciRecipe(t *testing.T, readme string) []string {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)A CI job that runs a bench.*?```yaml\n(.*?)```").FindSubmatch(b)
	if block == nil {
		t.Fatal("README.md: no yaml block after \"A CI job that runs a bench\"")
	}
	var cmds []string
	for _, l := range strings.Split(string(block[1]), "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(l), "- run: "); ok {
			cmds = append(cmds, cmd)
		}
	}
	if len(cmds) < 3 {
		t.Fatalf("README.md's CI job has %d run steps: %q", len(cmds), cmds)
	}
	return cmds
}

// recipeRuns is the run count of the recipe's bench.
var recipeRuns = regexp.MustCompile(`--runs [0-9]+`)

// copyTree copies the module at src to dst without its .git and outputs,
// as a fresh checkout has it.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() && (rel == ".git" || rel == "bin" || rel == "bench-out") {
			return filepath.SkipDir
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestREADMECIRecipe runs the README's CI job as written, but for its
// run count, in a copy of the repository: the bench as root (sudo, where
// the job has it), compare as an unprivileged user, against the baseline
// the repository keeps. The
// build runs as this process's user, whose Go toolchain and module cache
// it needs. Either verdict of compare is the recipe working (a slower
// machine than the baseline's may regress, a failed run fails the bench
// step and regresses); exit 2, an unreadable input or a missing baseline
// is not.
func TestREADMECIRecipe(t *testing.T) {
	netemtest.RequireRoot(t)
	if testing.Short() {
		t.Skip("-short: the recipe builds the binary and runs a bench")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "checkout")
	copyTree(t, root, work)
	// The unprivileged step must reach the checkout.
	for d := work; d != "/" && d != "."; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil && !os.IsPermission(err) {
			t.Fatal(err)
		}
		if d == os.TempDir() {
			break
		}
	}
	for _, cmd := range ciRecipe(t, filepath.Join(root, "README.md")) {
		// The recipe's 30 runs set its statistics, not what its steps do:
		// 10 exercise every step in a third of the time, which a full test
		// run (under 20 minutes in CI) needs.
		cmd = recipeRuns.ReplaceAllString(cmd, "--runs 10")
		c := exec.CommandContext(t.Context(), "sh", "-c", strings.TrimPrefix(cmd, "sudo "))
		c.Dir = work
		unprivileged := !strings.HasPrefix(cmd, "sudo ") && !strings.Contains(cmd, "go build")
		if unprivileged {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			c.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent"}
		}
		out, err := c.CombinedOutput()
		code := c.ProcessState.ExitCode()
		t.Logf("$ %s (exit %d, unprivileged %v)\n%s", cmd, code, unprivileged, tail(string(out), 2000))
		switch {
		case strings.Contains(cmd, " compare ") && (code == 0 || code == 1):
			if !strings.Contains(string(out), "time to leader p50") {
				t.Errorf("compare printed no comparison")
			}
		case strings.Contains(cmd, " bench ") && code == 1:
			// A failed run fails the bench step, and the job goes on to
			// compare (if: always()): the results must be there.
			if _, err := os.Stat(filepath.Join(work, "bench-out", "results.json")); err != nil {
				t.Fatalf("the bench failed without results: %v", err)
			}
		case err != nil:
			t.Fatalf("%s: %v", cmd, err)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
