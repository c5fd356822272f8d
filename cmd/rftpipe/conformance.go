package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
)

func conformanceCommand() *cli.Command {
	return &cli.Command{
		Name:  "conformance",
		Usage: "run the golden vectors of DIR (one KIND.json per kind) against rftpipe; exit 1 if any case fails",
		Description: "On a CUDA device the kernels store inputs and gradient in float64 and every case is checked at its own\n" +
			"tolerance. --float32 checks the device's default float32 storage instead, at rtol 1e-5 / atol 1e-6; a case\n" +
			"that fails is ill-conditioned, listed and not failed, when the CPU computing exactly on the same\n" +
			"float32-rounded inputs misses the tolerance too.\n\nkinds:\n" + kindsHelp(),
		ArgsUsage: "DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kind", Usage: "comma-separated kinds to run (default: every KIND.json in DIR): " + strings.Join(builder.Names(builder.ConformanceKinds), ", ")},
			deviceFlag(),
			&cli.BoolFlag{Name: "float32", Usage: "on a device: check float32 storage at rtol 1e-5 / atol 1e-6 (ill-conditioned cases listed, not failed)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return schema.Usagef("conformance takes one DIR")
			}
			var kinds []string
			for _, k := range strings.Split(c.String("kind"), ",") {
				if k = strings.TrimSpace(k); k != "" {
					kinds = append(kinds, k)
				}
			}
			rep, err := builder.Conformance(builder.ConformanceOptions{Dir: c.Args().First(), Kinds: kinds,
				Device: c.String("device"), Float32: c.Bool("float32"), Log: c.App.ErrWriter})
			if err != nil {
				return err
			}
			w := c.App.Writer
			if rep.Checking != "" {
				fmt.Fprintln(w, rep.Checking)
			}
			for _, m := range rep.Mismatches {
				fmt.Fprintln(w, m)
			}
			for _, m := range rep.Ill {
				fmt.Fprintf(w, "ill-conditioned for float32 storage: %s\n", m)
			}
			fmt.Fprint(w, rep.Summary())
			if rep.IllConditioned > 0 {
				fmt.Fprintf(w, " (%d ill-conditioned for float32 storage, not failed)", rep.IllConditioned)
			}
			fmt.Fprintln(w)
			if rep.Failed > 0 {
				return exitCode(exitFailure)
			}
			return nil
		},
	}
}

// kindsHelp lists the golden kinds with what their vectors check.
func kindsHelp() string {
	var b strings.Builder
	for _, e := range builder.Entries(builder.ConformanceKinds) {
		fmt.Fprintf(&b, "  %-20s %s\n", e.Name, e.Doc)
	}
	return strings.TrimRight(b.String(), "\n")
}
