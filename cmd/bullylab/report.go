package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/wire"
	"github.com/urfave/cli/v2"
)

// defaultCaptureReport is the page `report CAPTURE...` writes without --out.
const defaultCaptureReport = "capture-report.html"

// reportCommand is `bullylab report --out DIR BENCH...` or `bullylab
// report [--cluster-key FILE] [--out FILE] CAPTURE...`. It reads files
// only.
func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "make report.html of several benches, or of captures: their elections drawn and checked",
		ArgsUsage: "BENCH... | CAPTURE...",
		Description: "Each BENCH is a bench's --out directory or its results.json; each must hold a leader-crash\n" +
			"scenario. Writes DIR/report.html: the mean messages per leader-crash election against the\n" +
			"number of nodes N, a point per bench and algorithm, over the closed forms (the ring's 2(N-1),\n" +
			"Bully's 3N-6 on the wire), and per bench its scenarios with the algorithms side by side\n" +
			"(runs and failed, time to leader p50 and p95, detection p50, messages per election by type).\n" +
			"Benches of star5, star16 and star64 draw how the messages grow with N.\n" +
			"Each CAPTURE is a pcapng file, from `up --capture`, a bench's runs or real hosts (one\n" +
			"without a testbed record names its nodes as the capture does). Writes one page, --out FILE\n" +
			"(" + defaultCaptureReport + " when not given, or that name in a directory): per capture its nodes,\n" +
			"the checks (authentication, verified with --cluster-key or said to be unverified without\n" +
			"it; the faults and clocks on the wire; anomalies), its elections, its faults, and a\n" +
			"space-time diagram of each election. Arguments are all benches or all captures.\n" +
			"Exits 2 when an input cannot be used (missing, not a results.json or a capture, no\n" +
			"leader-crash scenario, a bad key file), 1 when the report cannot be written or, for\n" +
			"captures, when a frame failed verification (the report is written first).",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: "report-out", Usage: "benches: output `DIR` for report.html, not a bench's own directory, whose report.html it would replace; captures: the page's file",
				DefaultText: "report-out for benches, " + defaultCaptureReport + " for captures"},
			&cli.StringFlag{Name: "cluster-key", Usage: "captures: verify authenticated connections with the cluster key in `FILE` (base64, mode 0600)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("report: want one or more benches (a bench's --out directory or its results.json) or captures (pcapng files)")
			}
			captures, err := reportInputsAreCaptures(c.Args().Slice())
			if err != nil {
				return usagef("report: %v", err)
			}
			if captures {
				return reportCaptures(c)
			}
			if c.IsSet("cluster-key") {
				return usagef("report: --cluster-key verifies captures, and these are benches")
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

// reportInputsAreCaptures tells benches from captures: a directory or a
// .json file is a bench, any other file a capture; a mix is an error, as
// is an input that does not exist.
func reportInputsAreCaptures(inputs []string) (bool, error) {
	var benches, captures []string
	for _, in := range inputs {
		st, err := os.Stat(in)
		switch {
		case err != nil:
			return false, fmt.Errorf("%s: %v", in, errors.Unwrap(err))
		case st.IsDir() || strings.EqualFold(filepath.Ext(in), ".json"):
			benches = append(benches, in)
		default:
			captures = append(captures, in)
		}
	}
	if len(benches) > 0 && len(captures) > 0 {
		return false, fmt.Errorf("%s is a bench and %s a capture: report benches or captures, not both", benches[0], captures[0])
	}
	return len(captures) > 0, nil
}

// reportCaptures is `report CAPTURE...`.
func reportCaptures(c *cli.Context) error {
	opts := capture.AnalyzeOptions{}
	if c.IsSet("cluster-key") {
		key, err := wire.ReadKeyFile(c.String("cluster-key"))
		if err != nil {
			return &exitError{fmt.Sprintf("report: --cluster-key: %v", err), exitUsage}
		}
		opts.Key = &key
	}
	out := defaultCaptureReport
	if c.IsSet("out") {
		out = c.String("out")
		if st, err := os.Stat(out); err == nil && st.IsDir() {
			out = filepath.Join(out, defaultCaptureReport)
		}
	}
	var caps []*report.CaptureReport
	for _, in := range c.Args().Slice() {
		opts.Name = in
		cr, err := analyzeCaptureReport(in, opts)
		if err != nil {
			return &exitError{"report: " + err.Error(), exitUsage} // err names the file
		}
		for _, w := range cr.Report.Warnings() {
			fmt.Fprintf(c.App.ErrWriter, "bullylab: warning: %s\n", w)
		}
		caps = append(caps, cr)
	}
	if err := report.WriteCapturesFile(out, caps); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	noun := "captures"
	if len(caps) == 1 {
		noun = "capture"
	}
	fmt.Fprintf(c.App.Writer, "report of %d %s in %s\n", len(caps), noun, out)
	var failed []string
	for _, cr := range caps {
		if !cr.Report.Auth.OK() {
			failed = append(failed, cr.Source)
		}
	}
	if len(failed) > 0 {
		return &exitError{fmt.Sprintf("report: authentication failed in %s (see %s)", strings.Join(failed, ", "), out), exitAuthFailed}
	}
	return nil
}
