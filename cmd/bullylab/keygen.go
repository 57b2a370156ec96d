package main

import (
	"fmt"

	"github.com/bullylab/bullylab/wire"
	"github.com/urfave/cli/v2"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:  "keygen",
		Usage: "make a new cluster key for `bullylab node --cluster-key`",
		Description: "Prints a new random cluster key (32 bytes, base64) on stdout, or with --out\n" +
			"writes it to a new file of mode 0600. Every node of a cluster reads the same\n" +
			"key; keep the file readable by the nodes' user only.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the key to the new `FILE` (mode 0600) instead of stdout; an existing file is never overwritten"},
		},
		Action: runKeygen,
	}
}

func runKeygen(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("keygen: unexpected argument %q", c.Args().First())
	}
	k, err := wire.NewKey()
	if err != nil {
		return err
	}
	if out := c.String("out"); out != "" {
		return wire.WriteKeyFile(out, k)
	}
	_, err = fmt.Fprintln(c.App.Writer, k.Encode())
	return err
}
