package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/pipeline/build"
)

func conformanceCommand() *cli.Command {
	return &cli.Command{
		Name:      "conformance",
		Usage:     "run the golden vectors of DIR (one KIND.json per kind) against rftpipe; exit 1 if any case fails",
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kind", Usage: "comma-separated kinds to run (default: every KIND.json in DIR), e.g. policy_loss,kl,entropy"},
			deviceFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("conformance takes one DIR")
			}
			ev, _, err := gpu.Select(c.String("device"), c.App.ErrWriter)
			if err != nil {
				return err
			}
			var kinds []string
			for _, k := range strings.Split(c.String("kind"), ",") {
				if k = strings.TrimSpace(k); k != "" {
					kinds = append(kinds, k)
				}
			}
			rep, err := build.RunConformance(c.Args().First(), kinds, ev)
			if err != nil {
				return err
			}
			w := c.App.Writer
			for _, m := range rep.Mismatches {
				fmt.Fprintln(w, m)
			}
			fmt.Fprintln(w, rep.Summary())
			if rep.Failed > 0 {
				return exitCode(exitFailure)
			}
			return nil
		},
	}
}
