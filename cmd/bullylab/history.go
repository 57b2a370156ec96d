package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/bullylab/bullylab/netem/bench/history"
	"github.com/urfave/cli/v2"
)

// historySubcommands are `bullylab history`'s.
var historySubcommands = []string{"append", "check"}

// historyCommand is `bullylab history append|check`: a regression
// history of benches for CI. It reads and writes files only, so it works
// on any system.
func historyCommand() *cli.Command {
	return &cli.Command{
		Name:  "history",
		Usage: "keep a history of benches per commit and fail CI when the newest starts a regression",
		Description: "append adds each bench's scenarios to a history file, one JSON line each (time to leader\n" +
			"p50 and per run, messages per election, timings), sorted by time; `merge=union` in\n" +
			".gitattributes merges it. check finds change points per topology, scenario and algorithm\n" +
			"(E-Divisive means with a permutation test) and exits 1 when the newest entry starts a rise\n" +
			"beyond --min-effect, 0 otherwise, 2 when the history cannot be used.",
		OnUsageError: onUsageError,
		Subcommands:  []*cli.Command{historyAppendCommand(), historyCheckCommand()},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("history: want a subcommand, %s", strings.Join(historySubcommands, " or "))
			}
			return usagef("history: unknown subcommand %q (want %s)", c.Args().First(), strings.Join(historySubcommands, " or "))
		},
	}
}

func historyAppendCommand() *cli.Command {
	return &cli.Command{
		Name:      "append",
		Usage:     "add benches to a history file",
		ArgsUsage: "RESULTS...",
		Description: "Each RESULTS is a results.json or a bench's --out directory. The entries' commit is\n" +
			"--commit, else `git rev-parse HEAD` here; their time --time, else the bench's end.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Usage: "the history `FILE`, created when missing"},
			&cli.StringFlag{Name: "commit", Usage: "the commit the benches measured (default: git rev-parse HEAD)"},
			&cli.StringFlag{Name: "time", Usage: "the entries' time, RFC 3339 (default: each bench's end)"},
		},
		Action: func(c *cli.Context) error {
			opts := history.AppendOptions{File: c.String("file"), Commit: c.String("commit"), Inputs: c.Args().Slice()}
			if s := c.String("time"); s != "" {
				t, err := time.Parse(time.RFC3339, s)
				if err != nil {
					return usagef("history append: --time %q: want RFC 3339, such as 2026-11-27T20:30:00Z", s)
				}
				opts.Time = t
			}
			if err := opts.Validate(); err != nil {
				return usagef("history append: %v", err)
			}
			added, err := history.Append(opts)
			var bad *history.InputError
			switch {
			case errors.As(err, &bad):
				return &exitError{"history append: " + err.Error(), exitUsage}
			case err != nil:
				return fmt.Errorf("history append: %w", err)
			}
			noun := "entries"
			if len(added) == 1 {
				noun = "entry"
			}
			fmt.Fprintf(c.App.Writer, "appended %d %s to %s\n", len(added), noun, opts.File)
			return nil
		},
	}
}

func historyCheckCommand() *cli.Command {
	d := history.DefaultDetectOptions
	return &cli.Command{
		Name:  "check",
		Usage: "find change points in a history and fail when the newest entry starts a regression",
		Description: "Prints one verdict per series (topology, scenario, algorithm; metric). Exits 1 when the\n" +
			"newest entry starts a regression, 0 otherwise, 2 when the history cannot be used.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "file", Usage: "the history `FILE`"},
			&cli.StringFlag{Name: "metric", Value: strings.Join(history.MetricNames(), ","), Usage: "metrics to check: ttl (time to leader p50), messages (per election mean)"},
			&cli.StringFlag{Name: "min-effect", Value: "10%", Usage: "smallest rise of a series' median that is a regression"},
			&cli.Float64Flag{Name: "alpha", Value: d.Significance, Usage: "significance level of a change point's permutation test"},
			&cli.IntFlag{Name: "permutations", Value: d.Permutations, Usage: "permutations per test"},
			&cli.IntFlag{Name: "min-segment", Value: d.MinSegment, Usage: "fewest entries between change points"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "seed of the permutations"},
			&cli.IntFlag{Name: "last", Value: 10, Usage: "entries per series in the markdown table"},
			&cli.StringFlag{Name: "markdown", Usage: "write a pull-request comment to `FILE`"},
			&cli.StringFlag{Name: "html", Usage: "write trend charts to `FILE`"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("history check: unexpected argument %q", c.Args().First())
			}
			effect, err := history.ParsePercent(c.String("min-effect"))
			if err != nil {
				return usagef("history check: --min-effect %v", err)
			}
			opts := history.CheckOptions{File: c.String("file"), Metrics: strings.Split(c.String("metric"), ","), MinEffect: effect,
				Detect: history.DetectOptions{Significance: c.Float64("alpha"), Permutations: c.Int("permutations"),
					MinSegment: c.Int("min-segment"), Seed: c.Uint64("seed")},
				Markdown: c.String("markdown"), HTML: c.String("html"), Last: c.Int("last")}
			if err := opts.Validate(); err != nil {
				return usagef("history check: %v", err)
			}
			rep, err := history.Check(opts, c.App.Writer)
			if err != nil {
				return &exitError{"history check: " + err.Error(), exitUsage}
			}
			if rep.Regressed() {
				return &exitError{"history check: the newest entry, " + rep.Newest + ", starts a regression", 1}
			}
			return nil
		},
	}
}
