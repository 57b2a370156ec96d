package main

import (
	"errors"
	"fmt"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/urfave/cli/v2"
)

// reportCommand is `bullylab report --out DIR BENCH...`: one page of
// several benches. It reads files only, so it works on any system.
func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "make one report.html of several benches: messages per leader-crash election against N",
		ArgsUsage: "BENCH...",
		Description: "Each BENCH is a bench's --out directory or its results.json; each must hold a leader-crash\n" +
			"scenario. Writes DIR/report.html: the mean messages per leader-crash election against the\n" +
			"number of nodes N, a point per bench and algorithm, over the closed forms (the ring's 2(N-1),\n" +
			"Bully's 3N-6 on the wire), and per bench its scenarios with the algorithms side by side\n" +
			"(runs and failed, time to leader p50 and p95, detection p50, messages per election by type).\n" +
			"Benches of star5, star16 and star64 draw how the messages grow with N. Exits 2 when an\n" +
			"input cannot be used (missing, not a results.json, no leader-crash scenario), 1 when the\n" +
			"report cannot be written.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: "report-out", Usage: "output `DIR` for report.html; not a bench's own directory, whose report.html it would replace"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("report: want one or more benches, each a bench's --out directory or its results.json")
			}
			path, err := report.WriteBenchesReport(report.BenchesOptions{Inputs: c.Args().Slice(), Out: c.String("out")})
			var unusable *results.UnusableError
			switch {
			case errors.As(err, &unusable):
				return &exitError{"report: " + err.Error(), exitUsage}
			case err != nil:
				return fmt.Errorf("report: %w", err)
			}
			fmt.Fprintf(c.App.Writer, "report of %d benches in %s\n", c.NArg(), path)
			return nil
		},
	}
}
