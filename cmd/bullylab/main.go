// Command bullylab runs Bully leader-election nodes and measures how fast
// they elect under faults.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

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

func newApp(stdout, stderr io.Writer) *cli.App {
	// Without this, flag errors print the whole help text before the error.
	usageError := func(_ *cli.Context, err error, _ bool) error { return err }
	app := &cli.App{
		Name:            "bullylab",
		Usage:           "measure Bully leader election under real network faults",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		OnUsageError:    usageError,
		// run prints errors and picks the exit code; cli would os.Exit.
		ExitErrHandler: func(*cli.Context, error) {},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("unknown command %q (see bullylab --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Commands: slices.Concat(
			[]*cli.Command{
				nodeCommand(usageError),
				keygenCommand(usageError),
				demoCommand(usageError),
				analyzeCommand(),
			},
			testbedCommands(),
			[]*cli.Command{versionCommand()},
		),
	}
	return app
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, Go version and VCS revision",
		Action: func(c *cli.Context) error {
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
