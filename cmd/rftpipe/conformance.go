package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/advantage"
	"github.com/rftpipe/rftpipe/stages/conformance"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/operator"
	"github.com/rftpipe/rftpipe/stages/rollout"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// conformanceRegistry is every golden kind rftpipe implements: one line per
// kind. Kinds of a golden directory missing here are counted as skipped. ev
// evaluates the loss, KL and entropy kernels (CPU or GPU, --device).
func conformanceRegistry(ev tokens.Evaluator) (*conformance.Registry, error) {
	reg := conformance.NewRegistry()
	for kind, run := range map[string]conformance.Runner{
		"policy_loss":        loss.ConformanceRunnerOn(loss.Default(), ev),
		"kl":                 kl.ConformanceRunnerOn(ev),
		"entropy":            entropy.ConformanceRunnerOn(ev),
		"advantage":          advantage.ConformanceRunner(advantage.Default()),
		"add_strategy":       addstrategy.ConformanceRunner(addstrategy.Default()),
		"rollout_correction": rollout.ConformanceRunner(loss.Default()),
		"operator":           operator.ConformanceRunner(operator.Default()),
	} {
		if err := reg.Add(kind, run); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

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
			reg, err := conformanceRegistry(ev)
			if err != nil {
				return err
			}
			var kinds []string
			for _, k := range strings.Split(c.String("kind"), ",") {
				if k = strings.TrimSpace(k); k != "" {
					kinds = append(kinds, k)
				}
			}
			rep, err := conformance.RunDir(c.Args().First(), kinds, reg)
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
