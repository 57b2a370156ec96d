package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"
)

// runCmd runs cmd in an app of its own (main.go registers them) and
// returns the exit status the command asks for and the output.
func runCmd(t *testing.T, cmd *cli.Command, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	app := &cli.App{Name: "bullylab", Writer: &out, ErrWriter: &out, Commands: []*cli.Command{cmd},
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"bullylab", cmd.Name}, args...))
	if err == nil {
		return 0, out.String()
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode(), out.String() + err.Error()
	}
	return 1, out.String() + err.Error()
}

func TestCompareUnusable(t *testing.T) {
	dir := t.TempDir()
	if code, out := runCmd(t, compareCommand(), filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")); code != 2 {
		t.Errorf("missing inputs: exit %d, want 2: %s", code, out)
	}
	if code, out := runCmd(t, compareCommand(), "only-one"); code != 2 {
		t.Errorf("one argument: exit %d, want 2: %s", code, out)
	}
	if code, out := runCmd(t, compareCommand(), "--max-regress", "lots", "a", "b"); code != 2 {
		t.Errorf("bad threshold: exit %d, want 2: %s", code, out)
	}
}

func TestBenchBadInput(t *testing.T) {
	for _, args := range [][]string{{"--topology", "no-such-topology"}, {"--scenario", "no-such-scenario"}, {"--runs", "0"}, {"extra"}} {
		if code, out := runCmd(t, benchCommand(), args...); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, out)
		}
	}
}
