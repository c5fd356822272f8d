package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
)

// lossOutput is what `rftpipe loss --format json` prints; a value that is
// not a finite number (which JSON cannot hold) is null.
type lossOutput struct {
	Fn      string              `json:"fn"`
	Args    map[string]any      `json:"args"`
	Rows    int                 `json:"rows"`
	Tokens  int                 `json:"tokens"`
	Loss    *float64            `json:"loss"`
	Metrics map[string]*float64 `json:"metrics"`
}

// jsonFloat returns v, or nil when it is not finite.
func jsonFloat(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func jsonMetrics(m map[string]float64) map[string]*float64 {
	out := make(map[string]*float64, len(m))
	for k, v := range m {
		out[k] = jsonFloat(v)
	}
	return out
}

func lossCommand() *cli.Command {
	return &cli.Command{
		Name:  "loss",
		Usage: "compute a policy loss (+ KL and entropy terms) over a store as one batch, streamed: its metrics and dLoss/dlogprob",
		Description: "The store is one micro-batch: final_loss = pg_loss - entropy_loss + kl_loss, metrics named as the\n" +
			"trainer publishes them (actor/...). Inputs are read from list columns (see --col); the current\n" +
			"policy's log-prob defaults to a `logprob` column, else to the rollout `logprobs` (ratio 1).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "fn", Usage: "policy loss `NAME`: " + strings.Join(builder.Names(builder.PolicyLosses), ", ")},
			&cli.StringSliceFlag{Name: "arg", Usage: "policy loss argument `NAME=VALUE` over its default_args (repeatable; null for None)"},
			&cli.StringFlag{Name: "loss-agg-mode", Usage: "algorithm.loss_agg_mode for the policy (overriding its loss_agg_mode unless respect_own_loss_agg_mode), KL and entropy terms (default: --arg loss_agg_mode, else token-mean)"},
			&cli.StringFlag{Name: "kl-loss-fn", Value: "none", Usage: "KL loss `NAME`: " + strings.Join(builder.Names(builder.KLFns), ", ")},
			floatFlag(&cli.Float64Flag{Name: "kl-coef", Value: 0.001, Usage: "KL loss coefficient"}, schema.Finite),
			&cli.StringFlag{Name: "entropy-loss-fn", Value: "default", Usage: "entropy loss `NAME`: " + strings.Join(builder.Names(builder.EntropyFns), ", ")},
			floatFlag(&cli.Float64Flag{Name: "entropy-coef", Value: 0, Usage: "entropy coefficient (the term is computed when the store has an entropy input)"}, schema.Finite),
			&cli.StringFlag{Name: "in", Usage: "input store (`STORE`: file, directory, glob or Trinity buffer URL)"},
			&cli.StringSliceFlag{Name: "col", Usage: "read input `CANONICAL=COLUMN` (" + strings.Join(schema.InputNames(), ", ") + "; verl names accepted)"},
			int64Flag(&cli.Int64Flag{Name: "step", Value: 1, Usage: "training step of the batch (mix_chord's schedule; the trainer counts from 1)"}, schema.AtLeast1),
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the policy loss's random choice (clip_cov; same input and seed, same output)"},
			&cli.StringFlag{Name: "grad-out", Usage: "write grad_logprob list<float32> (+ id columns) aligned with the input rows to `FILE`"},
			deviceFlag(),
			formatFlag(),
		}, append(append(monitorFlags(), algorithmFlags()...), shardFlags(true)...)...),
		Action: runLoss,
	}
}

func runLoss(c *cli.Context) error {
	format := c.String("format")
	if format != "table" && format != "json" {
		return schema.Usagef("--format %q: want table or json", format)
	}
	o, err := lossOptions(c)
	if err != nil {
		return err
	}
	r, err := builder.Loss(c.Context, o, func(err error) int { return exitStatus(c.Context, err) })
	if err != nil {
		return err
	}
	printWarnings(c, "loss", r.Warnings)
	w := c.App.Writer
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(lossOutput{Fn: r.Fn, Args: r.Args, Rows: int(r.Rows), Tokens: r.Tokens,
			Loss: jsonFloat(r.Loss), Metrics: jsonMetrics(r.Metrics)})
	}
	return lossTable(w, r.Metrics)
}

func lossTable(w io.Writer, m map[string]float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE")
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(tw, "%s\t%.10g\n", k, m[k])
	}
	return tw.Flush()
}
