package main

import (
	"crypto/ed25519"
	"fmt"

	"github.com/bullylab/bullylab/wire"
	"github.com/urfave/cli/v2"
)

func keygenCommand() *cli.Command {
	return &cli.Command{
		Name:  "keygen",
		Usage: "make a new cluster key for `bullylab node --cluster-key`, or a member key for --member-key",
		Description: "Prints a new random cluster key (32 bytes, base64) on stdout, or with --out\n" +
			"writes it to a new file of mode 0600. Every node of a cluster reads the same\n" +
			"key; keep the file readable by the nodes' user only.\n\n" +
			"With --member it makes a node's own member key instead, an ed25519 key pair:\n" +
			"the private key goes to the new file --out (mode 0600) for that node's\n" +
			"--member-key, and the public key is printed as the peers file's third field\n" +
			"takes it (ID host:port ed25519:...). The node signs its HELLOs with it, so\n" +
			"that no other member can speak in its name.",
		OnUsageError: onUsageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "write the key to the new `FILE` (mode 0600) instead of stdout; an existing file is never overwritten"},
			&cli.BoolFlag{Name: "member", Usage: "make a member key: its private key to --out, its public key on stdout"},
		},
		Action: runKeygen,
	}
}

func runKeygen(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("keygen: unexpected argument %q", c.Args().First())
	}
	out := c.String("out")
	if c.Bool("member") {
		if out == "" {
			// The private key is the node's alone: it goes to a file made
			// for it, not through a terminal or a pipe.
			return usagef("keygen --member: give --out FILE for the private key; the public key is printed")
		}
		priv, err := wire.NewMemberKey()
		if err != nil {
			return err
		}
		if err := wire.WriteMemberKeyFile(out, priv); err != nil {
			return err
		}
		_, err = fmt.Fprintln(c.App.Writer, wire.EncodePublicKey(priv.Public().(ed25519.PublicKey)))
		return err
	}
	k, err := wire.NewKey()
	if err != nil {
		return err
	}
	if out != "" {
		return wire.WriteKeyFile(out, k)
	}
	_, err = fmt.Fprintln(c.App.Writer, k.Encode())
	return err
}
