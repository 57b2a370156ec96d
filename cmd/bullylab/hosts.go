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
			"bound, and whether it can build a testbed's namespaces and fault them (namespaces: ok and\n" +
			"the impairment backend, unfit or unreached). Exit status 1 when a host fails.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			switch c.NArg() {
			case 0:
				return usagef("hosts: want a topology (a file with a hosts section)")
			case 1:
			default:
				return usagef("hosts: unexpected argument %q (one topology only)", c.Args().Get(1))
			}
			topo, bin, err := loadHosts("hosts", c.Args().First())
			if err != nil {
				return err
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
	t.Header([]string{"host", "ssh", "nodes", "kernel", "bullylab", "clock offset", "namespaces"})
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
			fit = "ok, faults by " + r.Backend
		}
		t.Append([]string{r.Host.Name, r.Host.SSH, fmt.Sprint(len(r.Host.Nodes)), kernel, agent, clock, fit})
	}
	return t.Render()
}

// loadHosts loads the topology with hosts that cmd was given, and this
// binary, which goes to the hosts.
func loadHosts(cmd, file string) (*topologies.Topology, string, error) {
	topo, err := topologies.Load(file)
	if err != nil {
		return nil, "", &exitError{fmt.Sprintf("%s: %v", cmd, err), 2}
	}
	if len(topo.Hosts) == 0 {
		return nil, "", &exitError{fmt.Sprintf("%s: topology %s has no hosts section: it runs on this machine alone", cmd, topo.Name), 2}
	}
	bin, err := os.Executable()
	if err != nil {
		return nil, "", fmt.Errorf("%s: this binary: %w", cmd, err)
	}
	return topo, bin, nil
}

// cleanHosts runs `bullylab clean` on every host of file's topology, of
// the runs' shares alone when runs are named: a line for each host, and
// exit status 1 naming those that failed.
func cleanHosts(c *cli.Context, file string, runs []string) error {
	topo, bin, err := loadHosts("clean", file)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range remote.CleanHosts(c.Context, topo.Hosts, remote.CheckOptions{Binary: bin, Version: version}, runs...) {
		if r.Err != nil {
			failed = append(failed, r.Err.Error())
			fmt.Fprintf(c.App.Writer, "%s: failed\n", r.Host.Name)
			continue
		}
		fmt.Fprintf(c.App.Writer, "%s: %s\n", r.Host.Name, strings.ReplaceAll(r.Output, "\n", "; "))
	}
	if len(failed) > 0 {
		return errors.New("clean: " + strings.Join(failed, "; "))
	}
	return nil
}
