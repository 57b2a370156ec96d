//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bullylab/bullylab/capture"
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/node"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/bullylab/bullylab/wire"
	"github.com/bullylab/bullylab/wire/bounded"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// The testbed commands: up serves a lab in the foreground, the others talk
// to it over its control socket (netem.Client), except exec, which enters
// a node's namespace itself, and clean.

// exitPrivilege is the exit status of a testbed command run without the
// privileges it needs.
const exitPrivilege = 2

// requirePrivilege fails with exit status 2 unless this process is root or
// has CAP_NET_ADMIN. The check is cheap and comes first, so that a missing
// privilege is reported as such, not as whatever failed first without it.
func requirePrivilege(cmd string) error {
	if os.Geteuid() == 0 {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err == nil && data[0].Effective&(1<<unix.CAP_NET_ADMIN) != 0 {
		return nil
	}
	what := "to reach the testbed's network namespaces"
	if cmd == "up" {
		what = "to create network namespaces"
	}
	return cli.Exit(fmt.Sprintf("%s needs root or CAP_NET_ADMIN %s: run it with sudo", cmd, what), exitPrivilege)
}

// positional returns c's arguments with the flags among them applied: the
// flag package stops at the first argument, and `bullylab up star5 --run
// bl1a2b` is how people type it. An argument "--" ends the flags; it and
// what follows are returned as they are.
func positional(c *cli.Context) ([]string, error) {
	args := c.Args().Slice()
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i:]...), nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var flag cli.Flag
		for _, f := range c.Command.Flags {
			if slices.Contains(f.Names(), name) {
				flag = f
			}
		}
		if flag == nil {
			return nil, usagef("%s: unknown flag --%s%s", c.Command.Name, name, flagSuggestion(name, c.Command.Flags))
		}
		if _, isBool := flag.(*cli.BoolFlag); isBool && !hasVal {
			val, hasVal = "true", true
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, usagef("%s: flag --%s needs a value", c.Command.Name, name)
			}
			i++
			val = args[i]
		}
		if err := c.Set(name, val); err != nil {
			return nil, usagef("%s: --%s: %s %s", c.Command.Name, name, bounded.Quote(val), flagValueWant(name, err.Error(), c.Command.Flags))
		}
	}
	return pos, nil
}

// checkBackend checks --backend, which up and bench share: empty (probe),
// netem or nfqueue.
func checkBackend(b string) error {
	switch b {
	case "", netem.BackendNetem, netem.BackendNFQueue:
		return nil
	}
	return usagef("--backend %s: want %s or %s", bounded.Quote(b), netem.BackendNetem, netem.BackendNFQueue)
}

// algorithmFlag is up's --algorithm, over the topology's algorithm:
// field.
var algorithmFlag = &cli.StringFlag{Name: "algorithm", Usage: "election `algorithm` every node runs: " + strings.Join(node.Algorithms(), " or "), DefaultText: "the topology's algorithm:, else bully"}

// backendFlag is --backend, which up and bench share.
var backendFlag = &cli.StringFlag{Name: "backend", Usage: "impairment backend: netem or nfqueue", DefaultText: "netem when the kernel has it, else nfqueue"}

var runFlag = &cli.StringFlag{Name: "run", Usage: "run `NAME` of the testbed", DefaultText: "the only one up, if you started it"}

// checkRunFlag makes a --run value that cannot name a run a usage error,
// before anything needs root.
func checkRunFlag(run string) error {
	if run != "" && !netem.ValidRunName(run) {
		return usagef("--run %q: not a run name (%s)", run, netem.RunNameRule)
	}
	return nil
}

func upCommand() *cli.Command {
	return &cli.Command{
		Name:      "up",
		Usage:     "build a topology's testbed, run a node in each namespace, and serve it until Ctrl-C or `bullylab down`",
		ArgsUsage: "TOPOLOGY",
		Description: "TOPOLOGY is a built-in topology (" + strings.Join(topologies.Names(), ", ") + ") or a file.\n" +
			"While it is up, `bullylab status`, `bullylab fault`, `bullylab exec` and `bullylab down` act on it.\n" +
			"Ctrl-C, SIGTERM or `bullylab down` tear it down: the node processes first, then the namespaces.\n" +
			"--capture FILE records every frame on the switch and every fault (as a comment record) for\n" +
			"`bullylab analyze` and Wireshark; the file is complete once up has exited. The cluster key is\n" +
			"kept beside it (FILE with the extension .key, mode 0600), after down too: give it to\n" +
			"`bullylab analyze --cluster-key` or the Wireshark dissector's Cluster key file to verify the frames.\n" +
			"A topology with a hosts section is built across its hosts, over SSH (see `bullylab hosts`):\n" +
			"each host captures its own nodes, and the captures are merged into FILE on this clock.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "run", Usage: "run `NAME` to use: " + netem.RunNameRule, DefaultText: "a fresh ID such as bl3f2a"},
			&cli.Int64Flag{Name: "seed", Usage: "draw the node IDs from this seed, to reproduce a run", DefaultText: "random"},
			&cli.StringFlag{Name: "binary", Usage: "bullylab `executable` the nodes run", DefaultText: "this one"},
			&cli.StringFlag{Name: "log-dir", Usage: "keep the node logs in `DIR`", DefaultText: "the run's state directory, removed on exit"},
			backendFlag,
			algorithmFlag,
			&cli.StringFlag{Name: "capture", Usage: "capture the switch from before the first node starts until teardown into pcapng `FILE`, faults included"},
		},
		Action: runUp,
	}
}

func runUp(c *cli.Context) error {
	topo, source, data, err := upTopology(c)
	if err != nil {
		return err
	}
	if len(topo.Hosts) > 0 {
		return runUpSpan(c, topo, source, data)
	}
	opts, err := upOptions(c)
	if err != nil {
		return err
	}
	// Signals stay caught until teardown is over: a second Ctrl-C must not
	// kill this process half-way through removing the testbed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	out := c.App.Writer
	fmt.Fprintf(out, "starting %s: %d nodes, %s election\n", topo.Name, len(topo.Nodes), topo.Algorithm)
	lb, err := lab.Boot(ctx, topo, opts)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("up: interrupted while starting; everything it created is removed")
		}
		return fmt.Errorf("up: %w", err)
	}
	if lc := lb.Capture(); lc != nil {
		keyFile, err := keepCaptureKey(lc.Path(), lb.Key())
		if err != nil {
			return errors.Join(fmt.Errorf("up: %w", err), stopCapture(out, lb), lb.Close())
		}
		fmt.Fprintf(out, "capturing the switch into %s; its cluster key kept in %s\n", lc.Path(), keyFile)
	}
	srv, err := lab.Serve(lb)
	if err != nil {
		return errors.Join(fmt.Errorf("up: %w", err), stopCapture(out, lb), lb.Close())
	}
	if err := reportUp(ctx, out, lb); err != nil {
		return errors.Join(err, srv.Close(), stopCapture(out, lb), lb.Close())
	}

	why := awaitDown(ctx, srv)
	start := time.Now()
	// The capture stops while the namespaces still exist; the SIGKILLs
	// that follow would add only connection resets to it.
	err = errors.Join(srv.Close(), stopCapture(out, lb), lb.Close())
	if err != nil {
		return fmt.Errorf("down: %w (`bullylab clean` removes what is left)", err)
	}
	fmt.Fprintf(out, "testbed %s down (%s): removed in %.2fs\n", lb.Run(), why, time.Since(start).Seconds())
	return nil
}

// awaitDown waits until up is interrupted or `bullylab down` asks it to
// stop, and says which.
func awaitDown(ctx context.Context, srv *lab.APIServer) string {
	select {
	case <-ctx.Done():
		return "interrupted"
	case <-srv.Down():
		return "bullylab down"
	}
}

// upTopology loads up's one argument, the topology, and returns it with
// its name and its file's contents.
func upTopology(c *cli.Context) (*topologies.Topology, string, []byte, error) {
	args, err := positional(c)
	if err != nil {
		return nil, "", nil, err
	}
	if len(args) > 1 {
		return nil, "", nil, usagef("up: unexpected argument %q (want one topology)", args[1])
	}
	if len(args) != 1 {
		return nil, "", nil, usagef("up: want one topology (a built-in such as star5, or a file), got %d arguments", len(args))
	}
	topo, data, err := topologies.LoadSource(args[0])
	if errors.Is(err, topologies.ErrNotFound) {
		return nil, "", nil, usagef("up: %v", err)
	}
	if err != nil {
		return nil, "", nil, err
	}
	if c.IsSet("algorithm") {
		if topo.Algorithm, err = parseAlgorithm("--algorithm", c.String("algorithm")); err != nil {
			return nil, "", nil, err
		}
	}
	return topo, args[0], data, nil
}

// upOptions checks up's flags and the host, and returns the lab's
// options.
func upOptions(c *cli.Context) (lab.BootOptions, error) {
	var opts lab.BootOptions
	var err error
	run := c.String("run")
	if err := checkRunFlag(run); err != nil {
		return opts, err
	}
	if err := checkBackend(c.String("backend")); err != nil {
		return opts, err
	}
	if err := requireNamespaces("up"); err != nil {
		return opts, err
	}
	binary := c.String("binary")
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return opts, fmt.Errorf("up: finding this executable for the nodes: %w (give --binary)", err)
		}
	}
	opts = lab.BootOptions{
		Binary: binary, Run: run, Seed: c.Int64("seed"), LogDir: c.String("log-dir"), Backend: c.String("backend"),
	}
	if capPath := c.String("capture"); capPath != "" {
		if capPath, err = filepath.Abs(capPath); err != nil {
			return opts, fmt.Errorf("up: --capture: %w", err)
		}
		opts.Capture = &lab.CaptureOptions{Path: capPath, FromBoot: true}
	}
	return opts, nil
}

// requireNamespaces fails unless this process may create network
// namespaces, with the exit code and advice for a missing privilege.
func requireNamespaces(cmd string) error {
	if err := requirePrivilege(cmd); err != nil {
		return err
	}
	if err := netem.ProbeNamespaces(); errors.Is(err, netem.ErrNotPermitted) {
		return cli.Exit(cmd+" needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN, to create network namespaces: run it with sudo", exitPrivilege)
	} else if err != nil {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	return nil
}

// reportUp prints the nodes (up to 32) and the leader they agree on, or
// that they did not within 30 s.
func reportUp(ctx context.Context, out io.Writer, lb *lab.Lab) error {
	st := lb.Status()
	if len(st.Nodes) <= 32 {
		if err := writeStatusTable(out, st.Nodes); err != nil {
			return err
		}
	}
	const leaderWait = 30 * time.Second
	wctx, cancel := context.WithTimeout(ctx, leaderWait)
	ag, werr := lb.Monitor().WaitLeader(wctx, nil)
	cancel()
	backend, why := lb.Faults().Backend()
	// The first clause says why; the rest, what the backend cannot do, is
	// in `bullylab status --json`.
	why, _, _ = strings.Cut(why, "; ")
	switch {
	case werr == nil:
		fmt.Fprintf(out, "testbed %s up: %d nodes, leader %s (epoch %d) %.2fs after start; impairment backend: %s (%s)\n",
			lb.Run(), len(st.Nodes), ag.Node, ag.Epoch, ag.At.Sub(lb.Times().Begin).Seconds(), backend, why)
	case ctx.Err() == nil:
		fmt.Fprintf(out, "testbed %s up: %d nodes, no agreed leader after %v (%v); impairment backend: %s (%s)\n",
			lb.Run(), len(st.Nodes), leaderWait, werr, backend, why)
	}
	if ctx.Err() == nil {
		fmt.Fprintf(out, "state in %s; `bullylab status`, `bullylab fault`, `bullylab exec NODE -- CMD`; Ctrl-C or `bullylab down` to stop\n",
			netem.StateDir(lb.Run()))
	}
	return nil
}

// keepCaptureKey writes key beside the capture at capturePath
// (capture.ClusterKeyFile), owner-only, where it stays once the testbed and
// its own key file are gone, and returns its path. A key file left there
// by an earlier capture of the same name, which this one replaces, is
// replaced too.
func keepCaptureKey(capturePath string, key wire.Key) (string, error) {
	path := capture.ClusterKeyFile(capturePath)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("--capture: %w", err)
	}
	if err := wire.WriteKeyFile(path, key); err != nil {
		return "", fmt.Errorf("--capture: %w", err)
	}
	return path, nil
}

// stopCapture stops lb's capture, if it has one, and prints its counters.
func stopCapture(out io.Writer, lb *lab.Lab) error {
	lc := lb.Capture()
	if lc == nil {
		return nil
	}
	st, err := lc.Stop()
	fmt.Fprintf(out, "capture %s: %d packets written; the switch socket accepted %d frames, dropped %d, froze %d times; %d written late\n",
		lc.Path(), st.Written, st.Packets, st.Drops, st.Freezes, st.Late)
	if err != nil {
		return fmt.Errorf("up: %w", err)
	}
	return nil
}

// writeStatusTable prints one row per node.
func writeStatusTable(w io.Writer, nodes []lab.NodeState) error {
	L, R := tw.AlignLeft, tw.AlignRight
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: []tw.Align{L, L, L, R, L, L, L, R, L, L, L}}),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	t.Header([]string{"node", "namespace", "address", "pid", "state", "status", "leader", "epoch", "network", "backend", "impairment"})
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, s := range nodes {
		pid, epoch, leader := "-", "-", "-"
		if s.PID != 0 {
			pid = strconv.Itoa(s.PID)
		}
		if s.Status != "" {
			epoch = strconv.FormatUint(s.Epoch, 10)
			leader = dash(s.Leader)
		}
		status := s.Status
		if status == "" && s.Error != "" {
			status = "not answering"
		}
		var network []string
		if s.Isolated {
			network = append(network, "isolated")
		}
		if len(s.Blocked) > 0 {
			network = append(network, "drops "+strings.Join(s.Blocked, ","))
		}
		ns := s.Namespace
		if s.Host != "" {
			ns = s.Host + ":" + dash(ns)
		}
		row := []string{s.Node, ns, s.Addr, pid, s.State, dash(status), leader, epoch,
			dash(strings.Join(network, "; ")), dash(s.Backend), dash(s.Impairment)}
		if err := t.Append(row); err != nil {
			return err
		}
	}
	return t.Render()
}

// writeRunsUp is what status prints when it was given no --run and there
// is no run of the caller's alone to show: every testbed up, who started
// it, and how to pick one.
func writeRunsUp(w io.Writer, which *lab.WhichRunError) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	t.Header([]string{"run", "topology", "started by", "started at"})
	for _, r := range which.Runs {
		by := r.StartedBy()
		if r.Of(which.User) {
			by += ", you"
		}
		if err := t.Append([]string{r.Run, r.Topology, by, r.Created.Local().Format("2006-01-02 15:04:05")}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	if len(which.Runs) == 1 {
		r := which.Runs[0]
		_, err := fmt.Fprintf(w, "the only testbed up, %s, was started by %s, not by you: `bullylab status --run %s` shows it\n", r.Run, r.StartedBy(), r.Run)
		return err
	}
	_, err := fmt.Fprintf(w, "%d testbeds are up: pick one with --run NAME\n", len(which.Runs))
	return err
}

// statusSchema names the JSON document of `bullylab status --json`, as
// bench.CompareSchema names compare's: a program reading it checks the
// name and knows the fields. A change that would break such a program
// (a field removed, renamed or given another meaning) takes a new version;
// new fields do not.
const statusSchema = "bullylab.status/v1"

// statusJSON is lab.RunStatus under its schema name, which comes first.
type statusJSON struct {
	Schema string `json:"schema"`
	*lab.RunStatus
}

// writeStatusJSON prints st as `status --json` does.
func writeStatusJSON(w io.Writer, st *lab.RunStatus) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(statusJSON{Schema: statusSchema, RunStatus: st})
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the nodes of a testbed that is up: process, election status, leader, faults in force, capture",
		Description: "Without --run it shows the only testbed up if you started it (through sudo: the user sudo\n" +
			"ran it for); otherwise it lists the testbeds up and who started each.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			runFlag,
			&cli.BoolFlag{Name: "json", Usage: "print the status as JSON, a document whose \"schema\" is " + statusSchema},
		},
		Action: func(c *cli.Context) error {
			if args, err := positional(c); err != nil {
				return err
			} else if len(args) > 0 {
				return usagef("status: unexpected argument %q", args[0])
			}
			if err := checkRunFlag(c.String("run")); err != nil {
				return err
			}
			if err := requirePrivilege("status"); err != nil {
				return err
			}
			cl, err := lab.Dial(c.String("run"))
			if which, ok := errors.AsType[*lab.WhichRunError](err); ok && !c.Bool("json") {
				return writeRunsUp(c.App.Writer, which)
			}
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
			defer cancel()
			st, err := cl.Status(ctx)
			if err != nil {
				return err
			}
			out := c.App.Writer
			if c.Bool("json") {
				return writeStatusJSON(out, st)
			}
			if err := writeStatusTable(out, st.Nodes); err != nil {
				return err
			}
			running := 0
			for _, s := range st.Nodes {
				if s.State == lab.ProcRunning {
					running++
				}
			}
			if st.Capture != nil {
				fmt.Fprintf(out, "capturing into %s since %s: %d packets written so far\n",
					st.Capture.File, st.Capture.Started.Format("15:04:05"), st.Capture.Written)
			}
			if st.Leader != nil {
				fmt.Fprintf(out, "testbed %s (%s): leader %s at epoch %d, all %d running nodes agree; impairment backend: %s\n",
					st.Run, st.Topology, st.Leader.Node, st.Leader.Epoch, running, st.Backend)
			} else {
				fmt.Fprintf(out, "testbed %s (%s): the %d running nodes do not agree on a leader; impairment backend: %s\n",
					st.Run, st.Topology, running, st.Backend)
			}
			return nil
		},
	}
}

const faultHelp = `Faults (NODE is a node name; GROUP a comma list of nodes or a topology group):
  crash NODE...            SIGKILL the nodes' processes
  restart NODE...          start crashed or exited nodes again, same ID and data dir
  pause NODE...            SIGSTOP the nodes (a hung node: a grey failure)
  resume NODE...           SIGCONT paused nodes
  isolate [--mode M] NODE...
                           drop every packet to and from the nodes (at the receivers)
  unisolate NODE...        reconnect them
  partition [--one-way] [--mode M] GROUP GROUP...
                           cut the groups from each other (one-way: only what the
                           first group sends to the second), replacing any partition
  cut [--one-way] [--mode M] NODE:NODE...
                           cut each pair of nodes (one-way: only what the first
                           sends to the second), every other link up; replaces any cut
  heal                     remove every partition, cut and isolation
  delay NODE[:PEER] DURATION [--jitter DURATION]
                           delay what NODE sends (to PEER only); 0 removes it
  loss NODE[:PEER] PERCENT drop that share of what NODE sends (to PEER only), on arrival
  clear [NODE... | NODE:PEER]
                           back to the topology's impairments (all nodes by default;
                           NODE:PEER: only what NODE sends to PEER, as delay and loss take)
  campaign NODE...         have the nodes start an election
  leave NODE...            have the nodes announce LEAVE and exit
  join NODE...             start nodes that are down as newcomers announcing JOIN
  clock NODE... OFFSET [RATEppm]
                           set the nodes' wall clocks OFFSET from their host's (like +90s
                           or -2m), drifting at RATE ppm (like 500ppm); 0 puts them back
--mode drop (the default) drops what is cut silently; --mode reset answers it with TCP
resets, so connections across the cut fail at once. --run NAME picks the testbed: it is
needed when several are up, or when the only one is another user's; flags may follow
the arguments.`

func faultCommand() *cli.Command {
	return &cli.Command{
		Name:        "fault",
		Usage:       "inject a fault into a testbed that is up",
		ArgsUsage:   "KIND ARGS... [--run NAME]",
		Description: faultHelp,
		// Flags may follow the arguments (`delay n1 50ms --jitter 5ms`),
		// which the flag package does not allow: parseFaultArgs does it.
		SkipFlagParsing: true,
		HideHelpCommand: true,
		// For the help only: parseFaultArgs reads them.
		Flags:  faultFlags,
		Action: runFault,
	}
}

// faultFlags are the flags of `bullylab fault`, which parseFaultArgs reads.
var faultFlags = []cli.Flag{
	runFlag,
	&cli.BoolFlag{Name: "one-way", Usage: "partition, cut: cut only what the first group (node) sends to the second"},
	&cli.StringFlag{Name: "jitter", Usage: "delay: vary the delay by up to `DURATION`"},
	&cli.StringFlag{Name: "mode", Usage: "partition, isolate, cut: `MODE` drop (silently, the default) or reset (TCP resets)"},
}

// faultArgs is a parsed `bullylab fault` command line.
type faultArgs struct {
	run    string
	oneWay bool
	jitter string
	mode   string
	pos    []string
}

func parseFaultArgs(args []string) (faultArgs, error) {
	var fa faultArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || negativeNumber(a) {
			fa.pos = append(fa.pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", usagef("fault: flag --%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch name {
		case "run":
			if fa.run, err = value(); err == nil {
				err = checkRunFlag(fa.run)
			}
		case "jitter":
			fa.jitter, err = value()
		case "mode":
			fa.mode, err = value()
		case "one-way":
			if hasVal {
				return fa, usagef("fault: flag --one-way takes no value")
			}
			fa.oneWay = true
		case "h", "help":
			return fa, errFaultHelp
		default:
			if hint := flagSuggestion(name, slices.Concat(faultFlags, []cli.Flag{cli.HelpFlag})); hint != "" {
				return fa, usagef("fault: unknown flag --%s%s", name, hint)
			}
			return fa, usagef("fault: unknown flag --%s (flags: --run, --one-way, --jitter, --mode)", name)
		}
		if err != nil {
			return fa, err
		}
	}
	return fa, nil
}

var errFaultHelp = errors.New("help")

// negativeNumber reports whether a is an argument such as -90s or -20ppm,
// a clock fault's, rather than a flag.
func negativeNumber(a string) bool {
	return len(a) > 1 && a[0] == '-' && (a[1] >= '0' && a[1] <= '9' || a[1] == '.')
}

// faultRequest turns the arguments into the fault to apply.
func faultRequest(fa faultArgs) (fault.Fault, error) {
	if len(fa.pos) == 0 {
		return fault.Fault{}, usagef("fault: which fault? (%s; see bullylab fault --help)", fault.KindList())
	}
	f, err := fault.ParseWords(fa.pos, fault.WordOptions{OneWay: fa.oneWay, Jitter: fa.jitter, Mode: fa.mode})
	if err != nil {
		return f, usagef("%s", err)
	}
	return f, nil
}

func runFault(c *cli.Context) error {
	fa, err := parseFaultArgs(c.Args().Slice())
	if errors.Is(err, errFaultHelp) {
		// The help every command has: fault parses its own flags.
		if l := c.Lineage(); len(l) > 1 {
			return cli.ShowCommandHelp(l[1], c.Command.Name)
		}
		return cli.ShowSubcommandHelp(c)
	}
	if err != nil {
		return err
	}
	f, err := faultRequest(fa)
	if err != nil {
		return err
	}
	if err := requirePrivilege("fault"); err != nil {
		return err
	}
	cl, err := lab.Dial(fa.run)
	if err != nil {
		return err
	}
	// A restart waits for the nodes' control sockets.
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	rec, err := cl.Fault(ctx, f)
	if err != nil {
		return err
	}
	what := strings.Join(rec.Nodes, " ")
	if len(rec.Peers) > 0 {
		what = strings.Join(rec.Nodes, ",") + ":" + strings.Join(rec.Peers, ",")
	}
	if len(rec.Groups) > 0 {
		var gs []string
		for _, g := range rec.Groups {
			gs = append(gs, strings.Join(g, ","))
		}
		what = strings.Join(gs, " ")
	}
	if len(rec.Links) > 0 {
		var ls []string
		for _, l := range rec.Links {
			ls = append(ls, l[0]+":"+l[1])
		}
		what = strings.Join(ls, " ")
	}
	if what != "" {
		what = " " + what
	}
	fmt.Fprintf(c.App.Writer, "%s%s: %s (testbed %s, %s)\n", rec.Kind, what, rec.Detail, cl.Run(), rec.Time.Format("15:04:05.000"))
	return nil
}

func execCommand() *cli.Command {
	return &cli.Command{
		Name:         "exec",
		Usage:        "run a command in a node's network namespace, with this terminal",
		ArgsUsage:    "NODE -- CMD [ARGS...]",
		OnUsageError: onUsageError,
		Flags:        []cli.Flag{runFlag},
		Action: func(c *cli.Context) error {
			args, err := positional(c)
			if err != nil {
				return err
			}
			if len(args) > 1 && args[1] == "--" {
				args = append(args[:1], args[2:]...)
			}
			if len(args) < 2 {
				return usagef("exec: want NODE -- CMD [ARGS...]")
			}
			if err := checkRunFlag(c.String("run")); err != nil {
				return err
			}
			if err := requirePrivilege("exec"); err != nil {
				return err
			}
			run, err := lab.FindRun(c.String("run"))
			if err != nil {
				return err
			}
			if err := execElsewhere(c.Context, run, args[0]); err != nil {
				return err
			}
			tb, err := netem.Attach(run)
			if err != nil {
				return err
			}
			defer tb.Close()
			if _, err := tb.Namespace(args[0]); err != nil {
				return err
			}
			err = tb.Exec(args[0], args[1:])
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				// The command's own status, silently: it spoke for itself.
				return cli.Exit("", max(ee.ExitCode(), 1))
			}
			return err
		},
	}
}

// execElsewhere fails exec for a node of a testbed across hosts, whose
// namespace is on its host: it says which, and how to get there.
func execElsewhere(ctx context.Context, run, node string) error {
	cl, err := lab.Dial(run)
	if err != nil {
		return nil // Attach says what is wrong
	}
	st, err := cl.Status(ctx)
	if err != nil {
		return nil
	}
	for _, n := range st.Nodes {
		if n.Node == node && n.Host != "" {
			return fmt.Errorf("exec: node %s of testbed %s runs on host %s: ssh there and run ip netns exec %s CMD", node, run, n.Host, n.Namespace)
		}
	}
	return nil
}

func downCommand() *cli.Command {
	return &cli.Command{
		Name:  "down",
		Usage: "tear down a testbed that is up and wait until it is gone",
		Description: "Without --run it tears down the only testbed up, and only if you started it (through sudo:\n" +
			"the user sudo ran it for); otherwise it says which testbeds are up, and whose.",
		OnUsageError: onUsageError,
		Flags:        []cli.Flag{runFlag},
		Action: func(c *cli.Context) error {
			if args, err := positional(c); err != nil {
				return err
			} else if len(args) > 0 {
				return usagef("down: unexpected argument %q", args[0])
			}
			if err := checkRunFlag(c.String("run")); err != nil {
				return err
			}
			if err := requirePrivilege("down"); err != nil {
				return err
			}
			cl, err := lab.Dial(c.String("run"))
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, time.Minute)
			defer cancel()
			if err := cl.Down(ctx); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "testbed %s down\n", cl.Run())
			return nil
		},
	}
}

func cleanCommand() *cli.Command {
	return &cli.Command{
		Name:  "clean",
		Usage: "remove what testbeds whose process died left behind (processes, namespaces, links, state)",
		Description: "Without --run it cleans every run whose process is gone, of whoever started it; a script\n" +
			"or test that shares the machine names its own runs. A run whose process still runs is left alone.",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "run", Usage: "clean only run `NAME`: repeat the flag, or separate names by commas", DefaultText: "every dead run"},
			&cli.StringFlag{Name: "hosts", Usage: "clean every host of the topology `FILE`'s hosts section instead, over SSH (with --run, the runs' shares there)"},
		},
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("clean: unexpected argument %q", c.Args().First())
			}
			runs, err := cleanRuns(c.StringSlice("run"))
			if err != nil {
				return err
			}
			if c.IsSet("hosts") {
				return cleanHosts(c, c.String("hosts"), runs)
			}
			if err := requirePrivilege("clean"); err != nil {
				return err
			}
			var rep netem.CleanReport
			if len(runs) > 0 {
				rep, err = netem.CleanRuns(c.Context, runs...)
			} else {
				rep, err = netem.Clean(c.Context)
			}
			out := c.App.Writer
			fmt.Fprintln(out, rep)
			if len(rep.Runs) > 0 {
				fmt.Fprintf(out, "runs cleaned: %s\n", strings.Join(rep.Runs, ", "))
			}
			return err
		},
	}
}

// cleanRuns checks clean's --run values, each a name or a comma list of
// them, and returns the names.
func cleanRuns(values []string) ([]string, error) {
	var runs []string
	for _, v := range values {
		for _, run := range strings.Split(v, ",") {
			run = strings.TrimSpace(run)
			if err := checkRunFlag(run); err != nil || run == "" {
				return nil, usagef("clean: --run %q: not a run name (%s)", run, netem.RunNameRule)
			}
			if !slices.Contains(runs, run) {
				runs = append(runs, run)
			}
		}
	}
	return runs, nil
}
