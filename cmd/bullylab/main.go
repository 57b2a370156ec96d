// Command bullylab runs leader-election nodes, Bully or ring, and measures
// how fast they elect under faults.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/bullylab/bullylab/wire/suggest"
	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the process exit code; errors are
// printed as one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	err := newApp(stdout, stderr).Run(args)
	if err == nil {
		return 0
	}
	code := 1
	var coder cli.ExitCoder
	if errors.As(err, &coder) {
		code = coder.ExitCode()
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(stderr, "bullylab: %s\n", msg)
	}
	return code
}

// exitUsage is the exit status of a command line that is wrong: an unknown
// flag, a flag value that does not parse or is out of range, missing or
// extra arguments. 1 is for failures of the work itself.
const exitUsage = 2

// exitError is an error carrying the exit status a command wants: run
// honours cli.ExitCoder.
type exitError struct {
	msg  string
	code int
}

func (e *exitError) Error() string { return e.msg }
func (e *exitError) ExitCode() int { return e.code }

var _ cli.ExitCoder = (*exitError)(nil)

// usagef is a usage error, exit status 2.
func usagef(format string, a ...any) error {
	return &exitError{fmt.Sprintf(format, a...), exitUsage}
}

// onUsageError makes cli's flag errors usage errors, keeps cli from
// printing the whole help text before them, and says them as the help
// does: --flag, prefixed with the command.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	var flags []cli.Flag
	if c != nil && c.Command != nil {
		flags = c.Command.Flags
	}
	msg := flagErrorText(err.Error(), flags)
	if isSubcommand && c != nil && c.Command != nil && c.Command.Name != "" {
		msg = c.Command.Name + ": " + msg
	}
	return &exitError{msg, exitUsage}
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagNoValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	flagBadValue  = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-+([^:]*): (.*)$`)
)

// flagErrorText rewrites the flag package's messages, which name flags
// with one dash and say "parse error", into ours: an unknown flag with the
// nearest of flags, a bad value with what the flag takes.
func flagErrorText(msg string, flags []cli.Flag) string {
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown flag --%s%s", m[1], flagSuggestion(m[1], flags))
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("flag --%s needs a value", m[1])
	}
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		value, err := strconv.Unquote(`"` + m[1] + `"`)
		if err != nil {
			value = m[1]
		}
		return fmt.Sprintf("--%s: %s %s", m[2], bounded.Quote(value), flagValueWant(m[2], m[3], flags))
	}
	return msg
}

// flagSuggestion is "; did you mean --NAME?" for the visible flags
// nearest to name, or "".
func flagSuggestion(name string, flags []cli.Flag) string {
	var names []string
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); !ok || v.IsVisible() {
			names = append(names, f.Names()...)
		}
	}
	similar := suggest.Similar(name, names)
	for i, n := range similar {
		similar[i] = dashedFlag(n)
	}
	return suggest.DidYouMean(similar)
}

// dashedFlag is a flag name as typed: one dash before a one-letter name.
func dashedFlag(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// flagValueWant says what is wrong with a value the flag package refused
// for the flag called name, by the kind of value the flag takes; why is
// the flag package's reason.
func flagValueWant(name, why string, flags []cli.Flag) string {
	var flag cli.Flag
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			flag = f
		}
	}
	outOfRange := why == "value out of range"
	switch flag.(type) {
	case *cli.IntFlag, *cli.Int64Flag:
		if outOfRange {
			return "is out of range"
		}
		return "is not a whole number"
	case *cli.UintFlag, *cli.Uint64Flag:
		if outOfRange {
			return "is out of range"
		}
		return "is not a whole number of 0 or more"
	case *cli.DurationFlag:
		return "is not a duration (like 250ms or 1s)"
	case *cli.Float64Flag:
		return "is not a number"
	case *cli.BoolFlag:
		return "is not true or false"
	}
	if why == "parse error" {
		return "is not a valid value"
	}
	return "is not a valid value: " + why
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:            "bullylab",
		Usage:           "measure leader election, Bully or ring, under real network faults",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    onUsageError,
		// run prints errors and picks the exit code; cli would os.Exit.
		ExitErrHandler: func(*cli.Context, error) {},
		// --version is ours: cli's would print only "bullylab version dev".
		HideVersion: true,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "version", Usage: "print the version, Go version and VCS revision (as bullylab version)"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				if c.NArg() > 0 {
					return usagef("--version: unexpected argument %q", c.Args().First())
				}
				fmt.Fprint(c.App.Writer, versionText())
				return nil
			}
			name := c.Args().First()
			// `bullylab help [COMMAND]`, which cli's help command would
			// do but list itself among the commands.
			if name == "help" && c.NArg() <= 2 {
				name = c.Args().Get(1)
				if name == "" {
					return cli.ShowAppHelp(c)
				}
				if c.App.Command(name) != nil {
					return cli.ShowCommandHelp(c, name)
				}
			}
			if name != "" {
				var names []string
				for _, cmd := range c.App.VisibleCommands() {
					names = append(names, cmd.Name)
				}
				return usagef("unknown command %q (see bullylab --help)%s", name, suggest.Hint(name, names))
			}
			return cli.ShowAppHelp(c)
		},
		Commands: slices.Concat(
			[]*cli.Command{
				nodeCommand(),
				keygenCommand(),
				demoCommand(),
				analyzeCommand(),
				reportCommand(),
				historyCommand(),
				hostsCommand(),
			},
			testbedCommands(),
			[]*cli.Command{versionCommand(), completionCommand()},
		),
	}
	for _, cmd := range app.Commands {
		if ex := examples[cmd.Name]; len(ex) > 0 {
			cmd.Description = withExamples(cmd.Description, ex)
		}
	}
	return app
}

// examples are the command lines each command's help shows, commands that
// work as they are (with the files they name).
var examples = map[string][]string{
	"node": {
		"bullylab keygen --out cluster.key",
		"bullylab node --listen 127.0.0.1:7001 --data-dir ./n1 --peers peers.txt --cluster-key cluster.key",
	},
	"keygen": {"bullylab keygen --out cluster.key", "bullylab keygen --member --out node1.key"},
	"hosts":  {"bullylab hosts racks.yaml"},
	"demo":   {"bullylab demo", "bullylab demo --nodes 7 --keep"},
	"analyze": {
		"bullylab analyze up.pcapng",
		"bullylab analyze --json --timeline 1 up.pcapng",
	},
	"bench": {
		"sudo bullylab bench --topology star5 --scenario leader-crash --runs 10",
		"sudo bullylab bench --topology star16 --scenario cascade -k 2 --out cascade-out",
	},
	"report": {
		"sudo bullylab bench --topology star5 --algorithm bully,ring --runs 10 --out s5",
		"sudo bullylab bench --topology star16 --algorithm bully,ring --runs 10 --out s16",
		"sudo bullylab bench --topology star64 --algorithm bully,ring --runs 10 --out s64",
		"bullylab report --out sweep s5 s16 s64",
	},
	"compare": {
		"bullylab compare base-out/results.json bench-out/results.json",
		"bullylab compare --max-regress 5% base-out/bench.txt bench-out/bench.txt",
	},
	"history": {
		"bullylab history append --file bench-history.jsonl bench-out",
		"bullylab history check --file bench-history.jsonl --markdown history.md --html history.html",
	},
	"up": {
		"sudo bullylab up star5",
		"sudo bullylab up topologies/example.yaml --capture up.pcapng",
	},
	"status": {"sudo bullylab status", "sudo bullylab status --run bl1a2b --json"},
	"fault": {
		"sudo bullylab fault crash n5",
		"sudo bullylab fault partition n1,n2 n3,n4,n5",
		"sudo bullylab fault delay n1 50ms --jitter 5ms",
	},
	"exec":    {"sudo bullylab exec n1 -- ping -c 3 10.77.0.3"},
	"down":    {"sudo bullylab down", "sudo bullylab down --run bl1a2b"},
	"clean":   {"sudo bullylab clean", "sudo bullylab clean --run mylab,bl1a2b"},
	"version": {"bullylab version", "bullylab --version"},
	"completion": {
		"source <(bullylab completion bash)",
		"bullylab completion zsh > \"${fpath[1]}/_bullylab\"",
		"bullylab completion fish > ~/.config/fish/completions/bullylab.fish",
	},
}

// withExamples appends an Examples section to a command's description.
func withExamples(description string, lines []string) string {
	var b strings.Builder
	if description != "" {
		b.WriteString(description + "\n\n")
	}
	b.WriteString("Examples:")
	for _, l := range lines {
		b.WriteString("\n  " + l)
	}
	return b.String()
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:         "version",
		Usage:        "print the version, Go version and VCS revision",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("version: unexpected argument %q", c.Args().First())
			}
			fmt.Fprint(c.App.Writer, versionText())
			return nil
		},
	}
}

func versionText() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bullylab %s\n", version)
	goVersion := runtime.Version()
	info, ok := debug.ReadBuildInfo()
	if ok && info.GoVersion != "" {
		goVersion = info.GoVersion
	}
	fmt.Fprintf(&b, "go: %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	if !ok {
		return b.String()
	}
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	if rev := vcs["vcs.revision"]; rev != "" {
		line := fmt.Sprintf("vcs: %s %s", vcs["vcs"], rev)
		if t := vcs["vcs.time"]; t != "" {
			line += " " + t
		}
		if vcs["vcs.modified"] == "true" {
			line += " (modified)"
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
