package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/urfave/cli/v2"

	"github.com/bullylab/bullylab/netem/remote"
	"github.com/bullylab/bullylab/topologies"
)

// hostsCommand checks the hosts a topology spans, before a testbed uses
// them.
func hostsCommand() *cli.Command {
	return &cli.Command{
		Name:      "hosts",
		Usage:     "check the hosts a topology spans: SSH, the agent, clocks, namespaces",
		ArgsUsage: "TOPOLOGY",
		Description: "Reaches every host of TOPOLOGY's hosts section over SSH (host keys checked against\n" +
			"known_hosts), copies this bullylab there when the host's differs, starts its agent and\n" +
			"reports the host's kernel, its clock's offset from this one with the offset's error\n" +
			"bound, and whether it can run a testbed. Exit status 1 when a host fails.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			switch c.NArg() {
			case 0:
				return usagef("hosts: want a topology (a file with a hosts section)")
			case 1:
			default:
				return usagef("hosts: unexpected argument %q (one topology only)", c.Args().Get(1))
			}
			topo, err := topologies.Load(c.Args().First())
			if err != nil {
				return &exitError{fmt.Sprintf("hosts: %v", err), 2}
			}
			if len(topo.Hosts) == 0 {
				return &exitError{fmt.Sprintf("hosts: topology %s has no hosts section: it runs on this machine alone", topo.Name), 2}
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("hosts: this binary: %w", err)
			}
			reports := remote.Check(c.Context, topo.Hosts, remote.CheckOptions{Binary: bin, Version: version})
			if err := writeHostsTable(c.App.Writer, reports); err != nil {
				return err
			}
			var failed []string
			for _, r := range reports {
				switch {
				case r.Err != nil:
					failed = append(failed, r.Err.Error())
				case r.Unfit != "":
					failed = append(failed, fmt.Sprintf("host %s cannot run a testbed: %s", r.Host.Name, r.Unfit))
				}
			}
			if len(failed) > 0 {
				return errors.New("hosts: " + strings.Join(failed, "; "))
			}
			return nil
		},
	}
}

// writeHostsTable prints one row per host.
func writeHostsTable(w io.Writer, reports []remote.HostReport) error {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
	)
	t.Header([]string{"host", "ssh", "nodes", "kernel", "bullylab", "clock offset", "testbed"})
	for _, r := range reports {
		kernel, agent, clock, fit := "-", "-", "-", "-"
		if r.Agent.Kernel != "" {
			kernel = r.Agent.Kernel
			agent = r.Agent.Version
			if r.Copied {
				agent += " (copied)"
			}
		}
		if r.Clock.Samples > 0 {
			clock = fmt.Sprintf("%v ± %v", r.Clock.Offset.Round(time.Microsecond), r.Clock.Bound.Round(time.Microsecond))
		}
		switch {
		case r.Err != nil:
			fit = "unreached"
		case r.Unfit != "":
			fit = "unfit"
		default:
			fit = "ok"
		}
		t.Append([]string{r.Host.Name, r.Host.SSH, fmt.Sprint(len(r.Host.Nodes)), kernel, agent, clock, fit})
	}
	return t.Render()
}
