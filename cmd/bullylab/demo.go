package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/bullylab/bullylab/node/cluster"
	"github.com/urfave/cli/v2"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:         "demo",
		Usage:        "run a local cluster, kill -9 its leader, restart it, and time each election",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "nodes", Value: 5, Usage: "cluster size"},
			&cli.DurationFlag{Name: "phase-timeout", Value: 15 * time.Second, Usage: "give up when a phase takes longer"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the temp dir (data dirs, logs) for inspection"},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("demo: unexpected argument %q", c.Args().First())
	}
	n := c.Int("nodes")
	if n < 2 {
		return usagef("--nodes %d: need at least 2", n)
	}
	if n > 100 {
		return usagef("--nodes %d: at most 100", n)
	}
	if c.Duration("phase-timeout") <= 0 {
		return usagef("--phase-timeout %v: must be positive", c.Duration("phase-timeout"))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find own executable: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := c.App.Writer

	opts := cluster.Spec{Binary: exe, Nodes: n}
	if c.Bool("keep") {
		dir, err := os.MkdirTemp("", "bullylab-demo-")
		if err != nil {
			return fmt.Errorf("demo: %v", err)
		}
		opts.Dir = dir
	}
	cl, err := cluster.Launch(ctx, opts)
	if err != nil {
		return demoError(ctx, err)
	}
	defer cl.Close()
	if c.Bool("keep") {
		fmt.Fprintf(out, "started %d nodes on 127.0.0.1; data dirs and logs kept in %s\n", n, cl.Dir)
	} else {
		fmt.Fprintf(out, "started %d nodes on 127.0.0.1\n", n)
	}

	phases, err := cluster.Failover(ctx, cl, c.Duration("phase-timeout"))
	printPhases(out, phases)
	if err != nil {
		return demoError(ctx, err)
	}
	fmt.Fprintln(out, "ok: the highest live node led after every step, each time under a higher epoch")
	return nil
}

func demoError(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return errors.New("demo: interrupted; all nodes killed")
	}
	return fmt.Errorf("demo: %v", err)
}

func printPhases(w interface{ Write([]byte) (int, error) }, phases []cluster.Phase) {
	if len(phases) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tACTION\tLEADER\tEPOCH\tAGREED\tTIME")
	for _, p := range phases {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d nodes\t%v\n",
			p.Name, p.Action, p.Leader, p.Epoch, p.Nodes, p.Took.Round(time.Millisecond))
	}
	tw.Flush()
}
