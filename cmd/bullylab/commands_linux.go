package main

import (
	"github.com/bullylab/bullylab/netem"
	"github.com/bullylab/bullylab/netem/lab"
	"github.com/bullylab/bullylab/netem/remote"
	"github.com/urfave/cli/v2"
)

// testbedCommands are the commands that build testbeds of network
// namespaces, which only Linux has.
func testbedCommands() []*cli.Command {
	return []*cli.Command{
		benchCommand(),
		compareCommand(),
		upCommand(),
		statusCommand(),
		faultCommand(),
		execCommand(),
		downCommand(),
		cleanCommand(),
		labHostCommand(),
		agentCommand(),
	}
}

// labHostCommand is the shared host process a lab starts for a topology
// with `hosting: shared`; it speaks the lab's protocol on its standard
// input and output, so it is not for people.
func labHostCommand() *cli.Command {
	return &cli.Command{
		Name:         "lab-host",
		Usage:        "run the nodes of a lab in one process (started by the lab)",
		Hidden:       true,
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("lab-host: unexpected argument %q", c.Args().First())
			}
			return lab.RunHost(c.App.Reader, c.App.Writer)
		},
	}
}

// agentCommand is what a controller runs on each host of a testbed that
// spans hosts, over SSH; it speaks the agent protocol on its standard input
// and output (netem/remote), so it is not for people.
func agentCommand() *cli.Command {
	return &cli.Command{
		Name:         "agent",
		Usage:        "serve a testbed's controller on this host (started over SSH)",
		Hidden:       true,
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("agent: unexpected argument %q", c.Args().First())
			}
			return remote.RunAgent(c.App.Reader, c.App.Writer,
				remote.AgentConfig{Version: version, Probe: probeHost, Shares: &remote.HostShares{}})
		},
	}
}

// probeHost says why this host cannot build a testbed, or which
// impairment backend its faults would use.
func probeHost() (string, error) {
	if err := netem.ProbeNamespaces(); err != nil {
		return "", err
	}
	caps, err := netem.Probe()
	if err != nil {
		return "", err
	}
	return caps.Backend(), nil
}
