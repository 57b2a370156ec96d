//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/wire"
)

// runUpSpan is `bullylab up` for a topology across hosts: the hosts'
// agents build the testbed, and this process serves its control API
// (status, fault, down) from a state directory of its own, until Ctrl-C
// or `bullylab down`. A SIGKILL ends the SSH connections, and each agent
// tears its share down; `bullylab clean --hosts` sweeps what a dead
// agent left.
func runUpSpan(c *cli.Context, topo *topologies.Topology, file string, data []byte) error {
	for _, f := range []string{"run", "binary", "log-dir"} {
		if c.IsSet(f) {
			return usagef("up: --%s is for a testbed on this host; %s spans %d hosts", f, topo.Name, len(topo.Hosts))
		}
	}
	if err := checkBackend(c.String("backend")); err != nil {
		return err
	}
	hosts := spanHosts(file, data, topo)
	var err error
	if hosts.Binary, err = os.Executable(); err != nil {
		return fmt.Errorf("up: this binary: %w", err)
	}
	opts := remote.SpanOptions{CheckOptions: hosts.CheckOptions, Seed: c.Int64("seed"), Backend: c.String("backend")}
	if capPath := c.String("capture"); capPath != "" {
		if opts.Capture, err = filepath.Abs(capPath); err != nil {
			return fmt.Errorf("up: --capture: %w", err)
		}
		opts.CaptureMode = 0o644
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	out := c.App.Writer
	fmt.Fprintf(out, "starting %s across %d hosts: %d nodes\n", topo.Name, len(topo.Hosts), len(topo.Nodes))
	sp, err := remote.BuildSpan(ctx, topo, hosts.Source, hosts.File, opts)
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("up: interrupted while starting; the hosts removed what they built")
		}
		return fmt.Errorf("up: %w", err)
	}
	if sp.Capturing() {
		capKey, err := keepCaptureKey(opts.Capture, sp.Key())
		if err != nil {
			return errors.Join(fmt.Errorf("up: %w", err), sp.Close())
		}
		fmt.Fprintf(out, "capturing every host's nodes, merged into %s at down; its cluster key kept in %s\n", opts.Capture, capKey)
	}
	srv, keyFile, err := serveSpan(sp)
	if err != nil {
		return errors.Join(fmt.Errorf("up: %w", err), sp.Close())
	}
	defer netem.ReleaseRun(sp.Run())
	if err := reportSpan(ctx, out, sp, keyFile); err != nil {
		return errors.Join(err, srv.Close(), downSpan(out, sp))
	}
	why := awaitDown(ctx, srv)
	start := time.Now()
	if err := errors.Join(srv.Close(), downSpan(out, sp)); err != nil {
		return fmt.Errorf("down: %w (`bullylab clean --hosts %s` removes what is left)", err, file)
	}
	fmt.Fprintf(out, "testbed %s down (%s): removed from %d hosts in %.2fs\n", sp.Run(), why, len(topo.Hosts), time.Since(start).Seconds())
	return nil
}

// serveSpan claims the span's run here, for its control socket and its
// cluster key (which verifies the merged capture), and serves it.
func serveSpan(sp *remote.Span) (*lab.APIServer, string, error) {
	if err := netem.ClaimRun(sp.Run(), sp.Topology().Name); err != nil {
		return nil, "", err
	}
	keyFile := netem.KeyPath(sp.Run())
	if err := wire.WriteKeyFile(keyFile, sp.Key()); err != nil {
		return nil, "", errors.Join(err, netem.ReleaseRun(sp.Run()))
	}
	status := func() lab.RunStatus {
		st := sp.RunStatus()
		st.KeyFile = keyFile
		return st
	}
	srv, err := lab.ServeTestbed(lab.Served{Run: sp.Run(), Status: status, Apply: sp.Apply})
	if err != nil {
		return nil, "", errors.Join(err, netem.ReleaseRun(sp.Run()))
	}
	return srv, keyFile, nil
}

// reportSpan prints the nodes (up to 32), the hosts' clocks and the
// leader the nodes agree on, or that they did not within 30 s.
func reportSpan(ctx context.Context, out io.Writer, sp *remote.Span, keyFile string) error {
	st := sp.NodeStates()
	if len(st) <= 32 {
		if err := writeStatusTable(out, st); err != nil {
			return err
		}
	}
	var clocks []string
	for k, o := range sp.Clocks() {
		clocks = append(clocks, fmt.Sprintf("%s %s", sp.Topology().Hosts[k].Name, o))
	}
	fmt.Fprintf(out, "hosts' clocks against this one: %s\n", strings.Join(clocks, ", "))
	const leaderWait = 30 * time.Second
	wctx, cancel := context.WithTimeout(ctx, leaderWait)
	ag, werr := sp.WaitLeader(wctx, nil)
	cancel()
	switch {
	case werr == nil:
		fmt.Fprintf(out, "testbed %s up across %d hosts: %d nodes, leader %s (epoch %d) %.2fs after start\n",
			sp.Run(), len(sp.Topology().Hosts), len(st), ag.Node, ag.Epoch, ag.At.Sub(sp.Started()).Seconds())
	case ctx.Err() == nil:
		fmt.Fprintf(out, "testbed %s up across %d hosts: %d nodes, no agreed leader after %v (%v)\n",
			sp.Run(), len(sp.Topology().Hosts), len(st), leaderWait, werr)
	}
	if ctx.Err() == nil {
		fmt.Fprintf(out, "control socket and key in %s; `bullylab status`, `bullylab fault`; Ctrl-C or `bullylab down` to stop\n",
			filepath.Dir(keyFile))
	}
	return nil
}

// downSpan merges the hosts' captures, if any, then tears every share
// down.
func downSpan(out io.Writer, sp *remote.Span) error {
	var capErr error
	if sp.Capturing() {
		st, err := sp.StopCapture()
		if sc := sp.Captured(); err == nil && sc != nil {
			fmt.Fprintf(out, "capture %s: %d packets from %d hosts, %d dropped; times within ±%v of each other\n",
				sc.Path, st.Packets, len(sc.Merge.Hosts), st.Drops, sc.Merge.ErrorBound)
		}
		capErr = err
	}
	return errors.Join(capErr, sp.Close())
}
