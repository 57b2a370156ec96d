//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/netem/bench"
	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/bench/results"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/urfave/cli/v2"
)

// benchCommand is `bullylab bench`.
func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "run a fault scenario many times on a testbed and measure its elections",
		Description: "Each run builds the topology's testbed, captures it live, waits for a stable leader,\n" +
			"runs the scenario and measures from the capture the election its measured fault (the last\n" +
			"before its measured wait_leader) triggered: time to leader (from the fault until the winning\n" +
			"COORDINATOR, the ring's ELECTED, left the leader for the last live node it had to reach),\n" +
			"detection time (from the fault to the election's first message: its first ELECTION or HALT,\n" +
			"the ring's RING_ELECTION) and messages by type, checked against the nodes' counters and the\n" +
			"SLE1/SLE2 properties; report.html defines each metric in full and draws the election of\n" +
			"each run --diagram-runs picks. Percentiles are nearest-rank over the runs that passed: with\n" +
			"fewer than 100 of them p99 is the slowest run, with fewer than 20 p95 too.\n" +
			"--algorithm bully,ring runs each run of a scenario on each algorithm in turn, with the same\n" +
			"seed and fault schedule, so that the host's noise hits both alike; the summary, results.json\n" +
			"(\"algorithm\"), bench.txt (/algorithm=NAME) and report.html keep them apart, side by side.\n" +
			"`bullylab report` sets several benches side by side (star5, star16 and star64, say) and\n" +
			"draws their leader crashes' messages against N.\n" +
			"Writes results.json, bench.txt (benchstat input), report.html and one pcapng per run to --out,\n" +
			"all mode 0644, and each run's cluster key beside its capture (run-*.key, mode 0600: give it to\n" +
			"analyze --cluster-key or the Wireshark dissector's Cluster key file). Needs root: it creates network namespaces. The inputs are checked first, the\n" +
			"scenario against the topology included, so that a mistake costs no testbed.\n" +
			"SIGINT or SIGTERM stops the run in progress (its testbed torn down, the run dropped) and\n" +
			"writes the outputs of the runs that finished, marked partial; the exit status is then 130\n" +
			"(SIGINT) or 143 (SIGTERM). A second signal skips the writing: the testbed is still torn down.\n" +
			"A third ends bench at once; `bullylab clean` removes what it leaves.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "topology", Value: "star16", Usage: "built-in topology `NAME` or a topology file (built-ins: " + strings.Join(topologies.Names(), ", ") + ")"},
			&cli.StringFlag{Name: "scenario", Value: "leader-crash", Usage: "built-in scenario `NAME` or a scenario file (.yaml) (built-ins: " + strings.Join(scenario.BuiltinNames(), ", ") + ")"},
			&cli.IntFlag{Name: "runs", Value: 30, Usage: "runs per scenario"},
			&cli.Int64Flag{Name: "seed", Value: 1, Usage: "seed of run 1; run i uses seed+i-1"},
			&cli.StringFlag{Name: "out", Value: "bench-out", Usage: "output `DIR`; one holding another bench's outputs is refused unless --force"},
			&cli.BoolFlag{Name: "force", Usage: "remove the outputs of another bench in --out first (results.json, bench.txt, report.html, run-*.pcapng, run-*.key; nothing else)"},
			&cli.IntFlag{Name: "k", Usage: "cascade: how many of the top nodes crash", DefaultText: "3"},
			&cli.StringFlag{Name: "delays", Usage: "latency-sweep: comma-separated delays", DefaultText: "0,10ms,50ms,100ms"},
			&cli.StringFlag{Name: "loss", Usage: "loss: comma-separated percentages dropped, one scenario each", DefaultText: "1,5,10,20"},
			&cli.IntFlag{Name: "faults", Usage: "chaos: how many faults", DefaultText: "10"},
			&cli.DurationFlag{Name: "hold", Usage: "chained, quorum-loss, bridge: how long the cut is held before the heal", DefaultText: scenario.DefaultHold.String()},
			backendFlag,
			&cli.StringFlag{Name: "algorithm", Usage: "election `algorithms` to run, comma-separated (" + strings.Join(node.Algorithms(), ", ") + "): each run of a scenario runs on each in turn, with the same seed and faults, and the summary sets them side by side", DefaultText: "the topology's algorithm:, else bully"},
			&cli.StringSliceFlag{Name: "set", Usage: "set an election timing of every node over the topology's: `NAME=DURATION` with NAME one of " + strings.Join(topologies.SettingNames(), ", ") + " as in a topology file; repeatable"},
			&cli.StringFlag{Name: "diagram-runs", Value: report.DefaultDiagramRuns, Usage: "the runs of each scenario whose election report.html draws: run numbers and fastest, median, slowest or all, comma-separated"},
			&cli.StringFlag{Name: "diagram-scale", Value: string(report.ScaleAuto), Usage: "the diagrams' time scale: true (linear), compressed (long gaps drawn shorter on a log scale) or auto (true when the diagram stays legible)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &exitError{fmt.Sprintf("bench: unexpected argument %s (options only)", bounded.Quote(c.Args().First())), 2}
			}
			runs := c.Int("runs")
			if runs < 1 {
				return &exitError{fmt.Sprintf("bench: --runs %d: want at least 1", runs), 2}
			}
			if err := checkBackend(c.String("backend")); err != nil {
				return &exitError{err.Error(), 2}
			}
			diagramRuns, err := report.ParseDiagramRuns(c.String("diagram-runs"))
			if err == nil {
				err = diagramRuns.CheckRuns(runs)
			}
			if err != nil {
				return &exitError{fmt.Sprintf("bench: --diagram-runs: %v", err), 2}
			}
			diagramScale, err := report.ParseDiagramScale(c.String("diagram-scale"))
			if err != nil {
				return &exitError{fmt.Sprintf("bench: --diagram-scale: %v", err), 2}
			}
			topo, data, err := topologies.LoadSource(c.String("topology"))
			if err != nil {
				return &exitError{fmt.Sprintf("bench: --topology: %v", err), 2}
			}
			var sets []topologies.SettingOverride
			for _, kv := range c.StringSlice("set") {
				o, err := topologies.ParseSettingOverride(kv)
				if err != nil {
					return &exitError{fmt.Sprintf("bench: --set: %v", err), 2}
				}
				sets = append(sets, o)
			}
			if len(sets) > 0 {
				if len(topo.Hosts) > 0 {
					// The hosts' agents build their nodes from the file.
					return &exitError{fmt.Sprintf("bench: --set: topology %s spans hosts, whose agents read its timings from the file: set them there", topo.Name), 2}
				}
				name := topo.Name
				if topo, sets, err = topo.WithSettings(sets); err != nil {
					return &exitError{fmt.Sprintf("bench: --set: topology %s: %v", name, err), 2}
				}
			}
			algorithms := []string{topo.Algorithm}
			if c.IsSet("algorithm") {
				if algorithms, err = parseAlgorithms(c.String("algorithm")); err != nil {
					return &exitError{"bench: " + err.Error(), 2}
				}
			}
			params := scenario.Params{Nodes: len(topo.Nodes), K: c.Int("k"),
				Faults: c.Int("faults"), Seed: c.Int64("seed"), Hold: c.Duration("hold")}
			if c.IsSet("hold") && params.Hold <= 0 {
				return &exitError{fmt.Sprintf("bench: --hold %v: want a positive duration", params.Hold), 2}
			}
			given := map[string]string{}
			for _, f := range []string{"k", "delays", "loss", "faults", "hold"} {
				if c.IsSet(f) {
					given[f] = c.String(f)
					if f != "delays" && f != "loss" {
						given[f] = fmt.Sprint(c.Value(f))
					}
				}
			}
			if c.IsSet("delays") {
				if params.Delays, err = parseDelays(c.String("delays")); err != nil {
					return &exitError{fmt.Sprintf("bench: --delays: %v", err), 2}
				}
			}
			if c.IsSet("loss") {
				if params.Losses, err = parseLosses(c.String("loss")); err != nil {
					return &exitError{fmt.Sprintf("bench: --loss: %v", err), 2}
				}
				// As results.json said it when --loss took one number.
				given["loss"] = formatLosses(params.Losses)
			}
			scs, err := scenario.Lookup(c.String("scenario"), params)
			if err != nil {
				return &exitError{fmt.Sprintf("bench: --scenario: %v", err), 2}
			}
			if err := bench.CheckScenarios(topo, scs); err != nil {
				return &exitError{fmt.Sprintf("bench: --scenario: %v", err), 2}
			}
			out := c.String("out")
			if !c.Bool("force") {
				if err := bench.CheckOutDir(out); err != nil {
					return &exitError{fmt.Sprintf("bench: --out: %v", err), 2}
				}
			}
			hosts := spanHosts(c.String("topology"), data, topo)
			if hosts == nil {
				if err := bench.CheckHostFiles(topo, scs, algorithms); err != nil {
					return &exitError{"bench: " + err.Error(), 2}
				}
			}
			// Last of the checks: what is wrong with the input is worth
			// knowing before sudo. Across hosts, the hosts' agents build
			// the namespaces.
			if os.Geteuid() != 0 && hosts == nil {
				return &exitError{"bench needs root to build network namespaces: run it with sudo", 2}
			}
			if c.Bool("force") {
				if err := bench.RemoveOutputs(out); err != nil {
					return &exitError{fmt.Sprintf("bench: --force: %v", err), 2}
				}
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("bench: finding the bullylab binary: %v", err)
			}
			if hosts != nil {
				hosts.Binary = bin
			}
			ctx, intr := notifyInterrupt(c.App.ErrWriter)
			defer intr.stop()
			measured, err := bench.RunBench(ctx, bench.RunOptions{
				Topology: topo, SettingOverrides: sets, Scenarios: scs, Algorithms: algorithms, ScenarioArg: c.String("scenario"), Params: given,
				Runs: runs, Seed: c.Int64("seed"), OutDir: out, Binary: bin, Version: version,
				Backend: c.String("backend"), DiagramRuns: diagramRuns, DiagramScale: diagramScale,
				Progress: bench.NewProgress(c.App.ErrWriter, runs*len(scs)*len(algorithms)),
				Abort:    intr.abort, Hosts: hosts,
			})
			var res *results.Results
			if measured != nil {
				res = measured.Results
				if werr := writeBenchOutputs(out, measured, c.App.Writer); werr != nil {
					err = werr
				}
			}
			if sig := intr.signal(); sig != 0 && (errors.Is(err, bench.ErrInterrupted) || errors.Is(err, bench.ErrAborted)) {
				msg := fmt.Sprintf("bench: %v", err)
				if res != nil && res.Partial != nil && res.Partial.RunsDone > 0 && !errors.Is(err, bench.ErrAborted) {
					p := res.Partial
					msg = fmt.Sprintf("bench: %s after %d of %d runs; partial results in %s", p.Reason, p.RunsDone, p.RunsPlanned, out)
				}
				return &exitError{msg, 128 + int(sig)}
			}
			if err != nil {
				return fmt.Errorf("bench: %v", err)
			}
			fmt.Fprintf(c.App.Writer, "results in %s (results.json, bench.txt, report.html)\n", out)
			failed := 0
			for _, sc := range res.Scenarios {
				failed += sc.Summary.Failed
			}
			if failed > 0 {
				what := fmt.Sprintf("%d runs failed", failed)
				if failed == 1 {
					what = "1 run failed"
				}
				return &exitError{fmt.Sprintf("bench: %s (see %s/results.json)", what, out), 1}
			}
			return nil
		},
	}
}

// writeBenchOutputs writes what a bench measured into dir and its summary
// table on summary, when the bench has outputs to write: a write error
// replaces the bench's own, an interrupt's.
func writeBenchOutputs(dir string, measured *bench.Outcome, summary io.Writer) error {
	if !measured.Writable {
		return nil
	}
	if err := report.WriteOutputs(dir, measured.Results, measured.Sequences); err != nil {
		return err
	}
	return results.WriteSummary(summary, measured.Results)
}

// interrupt is how `bullylab bench` hears SIGINT and SIGTERM: the first
// ends the bench's context (cause "interrupted by SIGINT"), the second
// closes abort, and a third takes the signal's default action, ending
// the process at once: a teardown or a report can take minutes on a
// machine a collapsing election has overloaded (star1000's, at load
// 120, had two SIGINTs wait for minutes), and `bullylab clean` removes
// what the process leaves.
type interrupt struct {
	abort chan struct{}
	sigs  chan os.Signal
	done  chan struct{}
	got   atomic.Int32 // the first signal's number, 0 before
}

// notifyInterrupt starts listening for SIGINT and SIGTERM, saying on w
// what each does.
func notifyInterrupt(w io.Writer) (context.Context, *interrupt) {
	ctx, cancel := context.WithCancelCause(context.Background())
	in := &interrupt{abort: make(chan struct{}), sigs: make(chan os.Signal, 2), done: make(chan struct{})}
	signal.Notify(in.sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-in.sigs:
			sig, _ := s.(syscall.Signal)
			in.got.Store(int32(sig))
			again := "Ctrl-C again"
			if sig == syscall.SIGTERM {
				again = "SIGINT or SIGTERM again"
			}
			fmt.Fprintf(w, "\nbench: %s: stopping the run in progress, then writing the finished runs' results (%s to abort)\n", signalName(sig), again)
			cancel(fmt.Errorf("interrupted by %s", signalName(sig)))
		case <-in.done:
			return
		}
		select {
		case s := <-in.sigs:
			signal.Stop(in.sigs)
			fmt.Fprintf(w, "\nbench: %s again: aborting once the testbed is torn down (a third time to exit at once, leaving what `bullylab clean` removes)\n", signalName(s.(syscall.Signal)))
			close(in.abort)
		case <-in.done:
		}
	}()
	return ctx, in
}

// signal is the first signal heard, 0 when none was.
func (in *interrupt) signal() syscall.Signal { return syscall.Signal(in.got.Load()) }

// stop stops listening: signals get their default action again.
func (in *interrupt) stop() {
	signal.Stop(in.sigs)
	close(in.done)
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// parseAlgorithms reads bench's --algorithm: names node.Algorithms
// lists, comma-separated, none twice.
func parseAlgorithms(s string) ([]string, error) {
	var as []string
	for _, f := range strings.Split(s, ",") {
		a, err := parseAlgorithm("--algorithm", strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if slices.Contains(as, a) {
			return nil, fmt.Errorf("--algorithm: %s is listed twice", a)
		}
		as = append(as, a)
	}
	return as, nil
}

func parseDelays(s string) ([]time.Duration, error) {
	var ds []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "0" {
			ds = append(ds, 0)
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("%q is not a delay such as 50ms", f)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// parseLosses reads --loss: percentages such as 5 or 2.5%, separated by
// commas. Range and repeats are the scenario's to check.
func parseLosses(s string) ([]float64, error) {
	var ps []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		p, err := strconv.ParseFloat(strings.TrimSuffix(f, "%"), 64)
		if err != nil || math.IsNaN(p) || math.IsInf(p, 0) {
			return nil, fmt.Errorf("%q is not a percentage such as 5 or 2.5%%", f)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func formatLosses(ps []float64) string {
	ss := make([]string, len(ps))
	for i, p := range ps {
		ss[i] = strconv.FormatFloat(p, 'g', -1, 64)
	}
	return strings.Join(ss, ",")
}

// compareCommand is `bullylab compare BASE NEW`.
func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "compare",
		Usage:     "compare two benches (results.json or bench.txt) and fail on a regression",
		ArgsUsage: "BASE NEW",
		Description: "Compares per scenario the time to leader p50/p95/p99/max, the detection p50/p95,\n" +
			"the mean messages per election and the share of failed runs. Each row is tested for what it\n" +
			"shows: the bootstrap interval of the difference, new minus base, of that row's statistic (its\n" +
			"nearest-rank percentile or its mean), each side's runs resampled with replacement 2000 times by\n" +
			"a generator seeded from the row, so the same files always give the same intervals, at\n" +
			"confidence 1 - --alpha. A row regressed when its interval lies above zero and it grew beyond\n" +
			"--max-regress (and a noise floor of 1 ms or half a message); a side needs 5 passed runs for an\n" +
			"interval, and with fewer only failed runs can regress, which a note says. Failed runs regress\n" +
			"on any larger share of them. A results.json of a partial (interrupted) bench is\n" +
			"compared on the runs it holds, with a warning on stderr and a note. Exits 0 when nothing\n" +
			"regressed, 1 on a regression, 2 when the inputs cannot be compared.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "max-regress", Value: "10%", Usage: "largest growth of a metric that is not a regression, a percentage such as 10%"},
			&cli.Float64Flag{Name: "alpha", Value: results.DefaultAlpha, Usage: "1 - the confidence of each row's bootstrap interval, in (0, 1): 0.05 for 95% intervals"},
			&cli.StringFlag{Name: "format", Value: results.FormatTable, Usage: "output: " + strings.Join(results.ComparisonFormats, ", ") + " (markdown fits a CI job summary)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return &exitError{fmt.Sprintf("compare: want BASE and NEW, got %d arguments", c.NArg()), 2}
			}
			th, err := results.ParseThreshold(c.String("max-regress"))
			if err != nil {
				return &exitError{fmt.Sprintf("compare: %v", err), 2}
			}
			if f := c.String("format"); !slices.Contains(results.ComparisonFormats, f) {
				return usagef("compare: --format %q: want one of %s", f, strings.Join(results.ComparisonFormats, ", "))
			}
			if a := c.Float64("alpha"); !(a > 0 && a < 1) {
				return &exitError{fmt.Sprintf("compare: --alpha %g: want a significance level in (0, 1), such as 0.05", a), 2}
			}
			cmp, err := results.CompareFiles(c.Args().Get(0), c.Args().Get(1), results.CompareOptions{MaxRegress: th, Alpha: c.Float64("alpha")})
			v := results.VerdictOf(cmp, err)
			if err != nil {
				return &exitError{fmt.Sprintf("compare: %v", err), v.ExitCode()}
			}
			// On stderr as well as among the notes: a partial side's
			// metrics are of fewer runs than it planned.
			for _, p := range cmp.Partial {
				fmt.Fprintf(c.App.ErrWriter, "compare: warning: %s\n", p)
			}
			if err := results.WriteComparisonAs(c.App.Writer, cmp, c.String("format")); err != nil {
				return err
			}
			if v != results.Pass {
				return &exitError{"compare: " + strconv.Itoa(len(cmp.Regressions())) + " metrics regressed beyond " + c.String("max-regress"), v.ExitCode()}
			}
			return nil
		},
	}
}

// spanHosts is how a bench or up reaches the hosts of topo, loaded from
// source with contents data; nil for a topology without hosts. The file
// goes to every host's agent, which builds its share from it.
func spanHosts(source string, data []byte, topo *topologies.Topology) *bench.HostsOptions {
	if len(topo.Hosts) == 0 {
		return nil
	}
	return &bench.HostsOptions{CheckOptions: remote.CheckOptions{Version: version}, Source: source, File: data}
}
