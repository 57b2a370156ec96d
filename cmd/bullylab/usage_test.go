package main

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runApp runs the CLI in this process, as main does.
func runApp(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(append([]string{"bullylab"}, args...), &out, &errb)
	return out.String(), errb.String(), code
}

// checkUsage wants exit status 2 and one line on stderr containing want.
func checkUsage(t *testing.T, want string, args ...string) {
	t.Helper()
	_, stderr, code := runApp(args...)
	if code != 2 || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("bullylab %s: exit %d, stderr %q; want exit 2 and one line naming %q",
			strings.Join(args, " "), code, stderr, want)
	}
}

// TestUsageErrors: every command refuses an unknown flag, wrong argument
// counts and unparsable flag values with exit status 2 and one line naming
// what is wrong, before it needs root or touches anything.
func TestUsageErrors(t *testing.T) {
	// Argument lists of the wrong length per command, and what the error
	// names.
	wrongArgs := map[string][][]string{
		"node":       {{"extra"}},
		"keygen":     {{"extra"}},
		"demo":       {{"extra"}},
		"analyze":    {{}, {"a.pcapng", "b.pcapng"}},
		"bench":      {{"extra"}},
		"compare":    {{}, {"base.json"}, {"a", "b", "c"}},
		"report":     {{}},
		"history":    {{}, {"nosuch"}},
		"up":         {{}, {"star5", "extra"}},
		"status":     {{"extra"}},
		"fault":      {{}, {"heal", "extra"}, {"crash"}},
		"exec":       {{}, {"n1"}},
		"down":       {{"extra"}},
		"clean":      {{"extra"}},
		"lab-host":   {{"extra"}},
		"agent":      {{"extra"}},
		"hosts":      {{}, {"a.yaml", "b.yaml"}},
		"version":    {{"extra"}},
		"completion": {{}, {"bash", "extra"}},
	}
	// The flag each names comes first.
	badValues := [][]string{
		{"--nodes", "demo", "--nodes", "many"},
		{"--nodes", "demo", "--nodes", "1"},
		{"--nodes", "demo", "--nodes"},
		{"--heartbeat", "node", "--heartbeat", "soon"},
		{"--port", "analyze", "--port", "70000", "x.pcapng"},
		{"--timeline", "analyze", "--timeline", "x", "x.pcapng"},
	}
	if runtime.GOOS == "linux" {
		badValues = append(badValues,
			[]string{"--runs", "bench", "--runs", "x"},
			[]string{"--backend", "bench", "--backend", "tc"},
			[]string{"--alpha", "compare", "--alpha", "2", "a", "b"},
			[]string{"--run", "up", "star5", "--run", "my-lab"},
			[]string{`--run "Lab": not a run name (1 to 10 characters of a-z and 0-9, starting with a letter)`, "status", "--run", "Lab"},
			[]string{`--run "abcdefghijk": not a run name`, "down", "--run", "abcdefghijk"},
			[]string{`--run "läb": not a run name`, "fault", "heal", "--run", "läb"},
			[]string{`--run "1lab": not a run name`, "exec", "--run", "1lab", "n1", "--", "true"},
			[]string{"--run", "status", "--run"},
			[]string{"soon", "fault", "delay", "n1", "soon"},
		)
	}
	for _, cmd := range newApp(nil, nil).Commands {
		t.Run(cmd.Name, func(t *testing.T) {
			if runtime.GOOS != "linux" && strings.HasPrefix(cmd.Usage, "(Linux only") {
				t.Skip("a Linux-only command")
			}
			checkUsage(t, "--no-such-flag", cmd.Name, "--no-such-flag")
			lists, ok := wrongArgs[cmd.Name]
			if !ok {
				t.Fatalf("no wrong argument counts for command %s", cmd.Name)
			}
			for _, args := range lists {
				want := ""
				if len(args) > 0 {
					want = args[len(args)-1]
				}
				if cmd.Name == "compare" || cmd.Name == "exec" || cmd.Name == "analyze" || cmd.Name == "completion" || len(args) == 0 {
					want = cmd.Name // the error says what it wants
				}
				checkUsage(t, want, append([]string{cmd.Name}, args...)...)
			}
		})
	}
	for _, args := range badValues {
		checkUsage(t, args[0], args[1:]...)
	}
	checkUsage(t, "--no-such-flag", "--no-such-flag")
	if _, stderr, _ := runApp("--no-such-flag"); stderr != "bullylab: unknown flag --no-such-flag\n" {
		t.Errorf("bullylab --no-such-flag: stderr %q", stderr)
	}
	checkUsage(t, `unknown command "benhc" (see bullylab --help); did you mean bench?`, "help", "benhc")
	if out, _, code := runApp("help", "bench"); code != 0 || !strings.HasPrefix(out, "NAME:\n   bullylab bench - ") {
		t.Errorf("bullylab help bench: exit %d, %q", code, out)
	}
	checkUsage(t, `--version: unexpected argument "x"`, "--version", "x")
	checkUsage(t, `unknown command "nosuch"`, "nosuch")
	checkUsage(t, `unknown command "benhc" (see bullylab --help); did you mean bench?`, "benhc")
	checkUsage(t, `did you mean star16, star3, star5 or star64?`, "up", "star6")
	if runtime.GOOS == "linux" {
		checkUsage(t, `did you mean leader-crash?`, "bench", "--scenario", "leader-crsh")
		checkUsage(t, `did you mean star5?`, "bench", "--topology", "star05")
	}
}

// TestFlagSuggestions: every command answers a mistyped flag of its own,
// two letters swapped, with exit status 2 and one line suggesting it.
func TestFlagSuggestions(t *testing.T) {
	for _, cmd := range newApp(nil, nil).Commands {
		if runtime.GOOS != "linux" && strings.HasPrefix(cmd.Usage, "(Linux only") {
			continue
		}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			if len(name) < 4 {
				continue
			}
			typo := name[:len(name)-2] + name[len(name)-1:] + name[len(name)-2:len(name)-1]
			if typo == name {
				typo = name[:len(name)-1]
			}
			checkUsage(t, "unknown flag --"+typo+"; did you mean --"+name, cmd.Name, "--"+typo)
		}
	}
	checkUsage(t, "bench: unknown flag --rusn; did you mean --runs?", "bench", "--rusn", "3")
	checkUsage(t, "bench: unknown flag --kk; did you mean -k?", "bench", "--kk", "3")
	checkUsage(t, "up: unknown flag --hlep; did you mean --help?", "up", "--hlep")
	checkUsage(t, "bullylab: unknown flag --verison; did you mean --version?", "--verison")
	if runtime.GOOS == "linux" {
		checkUsage(t, "up: unknown flag --sede; did you mean --seed?", "up", "star5", "--sede", "3")
	}
}

// TestFlagValueErrors: every number and duration flag of every command
// refuses a value that is none in one line naming the flag, the value
// and what it takes.
func TestFlagValueErrors(t *testing.T) {
	for _, cmd := range newApp(nil, nil).Commands {
		if runtime.GOOS != "linux" && strings.HasPrefix(cmd.Usage, "(Linux only") {
			continue
		}
		for _, f := range cmd.Flags {
			var want string
			switch f.(type) {
			case *cli.IntFlag, *cli.Int64Flag:
				want = "is not a whole number"
			case *cli.UintFlag, *cli.Uint64Flag:
				want = "is not a whole number of 0 or more"
			case *cli.DurationFlag:
				want = "is not a duration (like 250ms or 1s)"
			case *cli.Float64Flag:
				want = "is not a number"
			default:
				continue
			}
			name := f.Names()[0]
			_, stderr, code := runApp(cmd.Name, "--"+name, "abc")
			if line := fmt.Sprintf("bullylab: %s: --%s: \"abc\" %s\n", cmd.Name, name, want); code != 2 || stderr != line {
				t.Errorf("%s --%s abc: exit %d, stderr %q; want 2 and %q", cmd.Name, name, code, stderr, line)
			}
		}
	}
	checkUsage(t, `bench: --runs: "99999999999999999999" is out of range`, "bench", "--runs", "99999999999999999999")
	checkUsage(t, `bench: --force: "maybe" is not true or false`, "bench", "--force=maybe")
	checkUsage(t, `analyze: --port: "-1" is not a whole number of 0 or more`, "analyze", "--port", "-1", "x.pcapng")
	checkUsage(t, `bench: --runs: "a\nb" is not a whole number`, "bench", "--runs", "a\nb")
	if runtime.GOOS == "linux" {
		checkUsage(t, `up: --seed: "x" is not a whole number`, "up", "star5", "--seed", "x")
	}
}
