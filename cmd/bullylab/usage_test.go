package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
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
