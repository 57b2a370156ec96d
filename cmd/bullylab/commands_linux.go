package main

import "github.com/urfave/cli/v2"

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
	}
}
