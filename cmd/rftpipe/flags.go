package main

import "github.com/urfave/cli/v2"

// Flags shared by several commands.

func outFlag() cli.Flag {
	return &cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "output store (`FILE`: .parquet, .arrow, .arrows or .jsonl)"}
}

func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "table", Usage: "output format: table | json"}
}

// deviceFlag selects where loss, KL and entropy kernels run (gpu.Select):
// cpu, cuda (an error, exit 2, without a CUDA device) or auto (CUDA when a
// driver and device answer, else the CPU, said in one line on stderr).
func deviceFlag() cli.Flag {
	return &cli.StringFlag{Name: "device", Value: "cpu", Usage: "where the loss kernels run: cpu | cuda | auto"}
}

func progressFlag() cli.Flag {
	return &cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr: auto (when a terminal) | always | never"}
}
