package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/inspect"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:  "inspect",
		Usage: "summarise a store: schema, rows, distinct tasks/runs/steps, rewards, response lengths",
		Description: "Reads and validates every row (ragged lists, null ids, token/mask mismatches, non-finite\n" +
			"log-probs: exit 2 naming the file, row and column); null, NaN and infinite rewards are counted.",
		ArgsUsage: "STORE",
		Flags:     []cli.Flag{formatFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return schema.Usagef("inspect takes one STORE")
			}
			if f := c.String("format"); f != "table" && f != "json" {
				return schema.Usagef("--format %q: want table or json", f)
			}
			sum, err := inspect.Store(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			if c.String("format") == "json" {
				return sum.WriteJSON(c.App.Writer)
			}
			return sum.WriteTable(c.App.Writer)
		},
	}
}
