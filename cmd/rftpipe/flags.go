package main

import (
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
)

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
	return &cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress bar on stderr: auto (when a terminal) | always | never",
		Action: func(_ *cli.Context, v string) error {
			if v != "auto" && v != "always" && v != "never" {
				return schema.Usagef("--progress %q: want auto, always or never", v)
			}
			return nil
		}}
}

// Numeric flags declare their valid range here, once: the usage text names
// it and a value outside it is refused before the command starts (exit 2).
// A default outside the range means "not set": the help says so, in the
// flag's DefaultText or as "unset", never as the number.

func floatFlag(f *cli.Float64Flag, r schema.Range) *cli.Float64Flag {
	f.Usage += " (range " + r.String() + ")"
	f.DefaultText = unsetText(r, f.Value, f.DefaultText)
	f.Action = func(_ *cli.Context, v float64) error { return flagRange(f.Name, r, v, v) }
	return f
}

func intFlag(f *cli.IntFlag, r schema.Range) *cli.IntFlag {
	f.Usage += " (range " + r.String() + ")"
	f.DefaultText = unsetText(r, float64(f.Value), f.DefaultText)
	f.Action = func(_ *cli.Context, v int) error { return flagRange(f.Name, r, float64(v), v) }
	return f
}

func int64Flag(f *cli.Int64Flag, r schema.Range) *cli.Int64Flag {
	f.Usage += " (range " + r.String() + ")"
	f.DefaultText = unsetText(r, float64(f.Value), f.DefaultText)
	f.Action = func(_ *cli.Context, v int64) error { return flagRange(f.Name, r, float64(v), v) }
	return f
}

// unsetText returns the help's default text of a flag whose default is
// def: text as given, else "unset" when def lies outside the range.
func unsetText(r schema.Range, def float64, text string) string {
	if text == "" && !r.Contains(def) {
		return "unset"
	}
	return text
}

// flagRange checks --name's value x (given as v) against r.
func flagRange(name string, r schema.Range, x float64, v any) error {
	if r.Contains(x) {
		return nil
	}
	return schema.Usagef("--%s %v is outside its valid range %s", name, v, r)
}
