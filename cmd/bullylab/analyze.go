package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/urfave/cli/v2"
)

// analyze's exit statuses, all but 0 with an analyzeError. As compare's,
// 1 is a finding about good input and 2 input that cannot be used, so
// that a script can tell a capture that shows tampering from a wrong path
// or key file; 3 keeps a full disk from passing for either.
const (
	exitAuthFailed    = 1
	exitInputUnusable = exitUsage
	exitNoReport      = 3
)

// analyzeError is an error of analyze with its exit status. It is one
// line, as run prints it, even when a file name holds a line break.
func analyzeError(code int, format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	return &exitError{bounded.Clip(msg, len(msg)), code}
}

// analyzeGCPercent is the garbage collector's target while analyze runs,
// unless GOGC sets one. An analysis keeps nearly all it allocates (its
// per-frame and per-segment tables), so a collection at every doubling of
// the heap only marks live data again.
const analyzeGCPercent = 400

// analyzeCommand is `bullylab analyze FILE`. Everything but flag handling
// and exit statuses lives in package capture, so that this file declares
// nothing but names of analyze's own in package main.
func analyzeCommand() *cli.Command {
	return &cli.Command{
		Name:      "analyze",
		Usage:     "derive elections, message counts and anomalies from a capture (pcapng)",
		ArgsUsage: "FILE",
		Description: "Reads a bullylab capture and prints its summary, its elections (trigger, detection\n" +
			"time, time to leader, leader, epoch, messages by type), per node counts and anomalies.\n" +
			"--json writes the same as a document of schema " + capture.Schema + ", whose every key, and\n" +
			"how its version changes, README.md describes in its section \"The analyze JSON\".\n" +
			"A capture cut short (its writer killed) is analyzed up to the cut, with a warning on stderr.\n" +
			"With --cluster-key, the tags of authenticated connections are verified too.\n\n" +
			"Exit status:\n" +
			"  0  the report is written, and nothing failed verification\n" +
			"  1  the report is written, and a frame failed verification or a HELLO was replayed\n" +
			"  2  nothing is analyzed: a usage error, or the capture or key file cannot be read\n" +
			"     or parsed, or --timeline names no election of the capture\n" +
			"  3  the report could not be written",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "write the report as JSON (schema " + capture.Schema + ")"},
			&cli.IntFlag{Name: "timeline", Usage: "also list the messages of election `N` in order"},
			&cli.UintFlag{Name: "port", Usage: "election TCP `PORT`", DefaultText: "from the capture, else 7946"},
			&cli.DurationFlag{Name: "quiet", Usage: "silence that ends an election", DefaultText: "from the capture's settings, at least 1s"},
			&cli.DurationFlag{Name: "trigger-window", Usage: "how long before an election a fault may have triggered it", DefaultText: "10s"},
			&cli.StringFlag{Name: "cluster-key", Usage: "verify authenticated connections with the cluster key in `FILE` (base64, mode 0600)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 && strings.HasPrefix(c.Args().Get(1), "-") {
				return usagef("analyze: options go before the file: bullylab analyze [--json] [--timeline N] [--port PORT] [--cluster-key FILE] FILE")
			}
			if c.NArg() != 1 {
				return usagef("analyze: want one capture file, got %d arguments", c.NArg())
			}
			file := c.Args().First()
			opts := capture.AnalyzeOptions{Name: file, Quiet: c.Duration("quiet"), TriggerWindow: c.Duration("trigger-window")}
			if c.IsSet("port") {
				p := c.Uint("port")
				if p == 0 || p > 65535 {
					return usagef("analyze %s: --port %d: want 1..65535", file, p)
				}
				opts.Ports = []uint16{uint16(p)}
			}
			if c.IsSet("cluster-key") {
				key, err := wire.ReadKeyFile(c.String("cluster-key"))
				if err != nil {
					return analyzeError(exitInputUnusable, "analyze %s: --cluster-key: %v", file, err)
				}
				opts.Key = &key
			}
			if os.Getenv("GOGC") == "" {
				defer debug.SetGCPercent(debug.SetGCPercent(analyzeGCPercent))
			}
			rep, err := capture.AnalyzeFile(file, opts)
			if err != nil {
				return analyzeError(exitInputUnusable, "analyze %v", err) // err names the file
			}
			for _, w := range rep.Warnings() {
				fmt.Fprintf(c.App.ErrWriter, "bullylab: warning: %s\n", bounded.Clip(w, len(w)))
			}
			if c.IsSet("timeline") {
				if rep.Timeline, err = rep.ElectionTimeline(c.Int("timeline")); err != nil {
					return analyzeError(exitInputUnusable, "analyze %s: --timeline: %v", file, err)
				}
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				err = enc.Encode(rep)
			} else {
				err = rep.WriteText(c.App.Writer)
			}
			if err != nil {
				return analyzeError(exitNoReport, "analyze %s: writing the report: %v", file, err)
			}
			if a := rep.Auth; !a.OK() {
				return analyzeError(exitAuthFailed, "analyze %s: authentication: %d frames failed, %d after them not accepted, %d HELLOs replayed",
					file, a.Failed, a.AfterFailure, a.ReplayCount)
			}
			return nil
		},
	}
}
