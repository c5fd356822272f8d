package main

import "github.com/urfave/cli/v2"

// Flags shared by several commands.

func outFlag() cli.Flag {
	return &cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "output store (`FILE`: .parquet, .arrow, .arrows or .jsonl)"}
}

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "table", Usage: "output format: table | json"}
}

func progressFlag() cli.Flag {
	return &cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr: auto (when a terminal) | always | never"}
}
