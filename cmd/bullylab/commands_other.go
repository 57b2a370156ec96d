//go:build !linux

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

// testbedCommands stand in for the commands that build testbeds of Linux
// network namespaces: each says so. Running nodes, analyzing captures and
// making keys work on any system.
func testbedCommands() []*cli.Command {
	var out []*cli.Command
	for _, name := range []string{"bench", "compare", "up", "status", "fault", "exec", "down", "clean"} {
		out = append(out, &cli.Command{
			Name:            name,
			Usage:           "(Linux only: testbeds are Linux network namespaces)",
			SkipFlagParsing: true,
			Action: func(*cli.Context) error {
				return fmt.Errorf("%s: needs Linux, whose network namespaces the testbeds are built of", name)
			},
		})
	}
	return out
}
