package main

import (
	"slices"

	"github.com/bullylab/bullylab/topologies"
	"github.com/urfave/cli/v2"
	"runtime"
	"strings"
	"testing"
)

// TestHelp renders every command's help: each says a default once, in the
// same format, and the impairment backends' default is one of them.
func TestHelp(t *testing.T) {
	for _, cmd := range newApp(nil, nil).Commands {
		t.Run(cmd.Name, func(t *testing.T) {
			if runtime.GOOS != "linux" && strings.HasPrefix(cmd.Usage, "(Linux only") {
				t.Skip("a Linux-only command")
			}
			out, stderr, code := runApp(cmd.Name, "--help")
			if code != 0 || stderr != "" {
				t.Fatalf("%s --help: exit %d, stderr %q", cmd.Name, code, stderr)
			}
			if !strings.HasPrefix(out, "NAME:\n   bullylab "+cmd.Name+" - ") || !strings.Contains(out, "\nUSAGE:\n") {
				t.Errorf("%s --help is not in the commands' format:\n%s", cmd.Name, out)
			}
			inExamples, examples := false, 0
			for _, line := range strings.Split(out, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("%s --help says a default twice: %q", cmd.Name, line)
				}
				if strings.Contains(line, "(default ") {
					t.Errorf("%s --help says a default as (default X), not (default: X): %q", cmd.Name, line)
				}
				ex := strings.TrimPrefix(strings.TrimSpace(line), "sudo ")
				if ex, ok := strings.CutPrefix(ex, "bullylab "+cmd.Name+" "); ok && inExamples {
					checkExample(t, cmd, ex)
				}
				if strings.TrimSpace(line) == "Examples:" {
					inExamples, examples = true, examples+1
				} else if line == "" {
					inExamples = false
				}
				if strings.Contains(line, "--backend") && strings.Contains(line, "probe") {
					t.Errorf("%s --help: --backend names a default that is not a backend: %q", cmd.Name, line)
				}
			}
			// A hidden command is started by bullylab itself, not by people.
			if !cmd.Hidden && (examples != 1 || !strings.Contains(out, " bullylab "+cmd.Name)) {
				t.Errorf("%s --help has no examples of it:\n%s", cmd.Name, out)
			}
		})
	}
	out, _, _ := runApp("bench", "--help")
	for _, name := range topologies.Names() {
		if !strings.Contains(out, name) {
			t.Errorf("bench --help does not list the built-in topology %s", name)
		}
	}
}

// checkExample checks that the flags an example of cmd gives are cmd's.
func checkExample(t *testing.T, cmd *cli.Command, args string) {
	t.Helper()
	fields := strings.Fields(args)
	// A command of subcommands: the example's flags are its subcommand's.
	if len(fields) > 0 {
		if sub := cmd.Command(fields[0]); sub != nil {
			cmd, fields = sub, fields[1:]
		}
	}
	for _, a := range fields {
		if a == "--" {
			return
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		found := false
		for _, f := range cmd.Flags {
			found = found || slices.Contains(f.Names(), name)
		}
		if !found {
			t.Errorf("%s --help: example %q gives %s, not a flag of %s", cmd.Name, args, a, cmd.Name)
		}
	}
}
