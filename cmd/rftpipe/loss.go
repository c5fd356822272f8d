package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// idColumns are copied from the input into --grad-out when present.
var idColumns = []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix}

// lossOutput is what `rftpipe loss --format json` prints; a value that is
// not a finite number (which JSON cannot hold) is null.
type lossOutput struct {
	Fn      string              `json:"fn"`
	Args    args.Values         `json:"args"`
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

func jsonMetrics(m agg.Metrics) map[string]*float64 {
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
			&cli.StringFlag{Name: "fn", Usage: "policy loss `NAME`: " + strings.Join(loss.Default().Names(), ", ")},
			&cli.StringSliceFlag{Name: "arg", Usage: "policy loss argument `NAME=VALUE` over its default_args (repeatable; null for None)"},
			&cli.StringFlag{Name: "loss-agg-mode", Usage: "algorithm.loss_agg_mode for the policy (overriding its loss_agg_mode unless respect_own_loss_agg_mode), KL and entropy terms (default: --arg loss_agg_mode, else token-mean)"},
			&cli.StringFlag{Name: "kl-loss-fn", Value: "none", Usage: "KL loss `NAME`: " + strings.Join(kl.Registry().Names(), ", ")},
			floatFlag(&cli.Float64Flag{Name: "kl-coef", Value: 0.001, Usage: "KL loss coefficient"}, args.NonNeg),
			&cli.StringFlag{Name: "entropy-loss-fn", Value: "default", Usage: "entropy loss `NAME`: " + strings.Join(entropy.Registry().Names(), ", ")},
			floatFlag(&cli.Float64Flag{Name: "entropy-coef", Value: 0, Usage: "entropy coefficient (the term is computed when the store has an entropy input)"}, args.NonNeg),
			&cli.StringFlag{Name: "in", Usage: "input store (`STORE`: file, directory, glob or Trinity buffer URL)"},
			&cli.StringSliceFlag{Name: "col", Usage: "read input `CANONICAL=COLUMN` (logprob, old_logprob, ref_logprob, advantages, action_mask, expert_mask, teacher_logprob, entropy, values; verl names accepted)"},
			int64Flag(&cli.Int64Flag{Name: "step", Value: 1, Usage: "training step of the batch (mix_chord's schedule; the trainer counts from 1)"}, args.AtLeast1),
			&cli.StringFlag{Name: "grad-out", Usage: "write grad_logprob list<float32> (+ id columns) aligned with the input rows to `FILE`"},
			deviceFlag(),
			formatFlag(),
		}, append(append(monitorFlags(), algorithmFlags()...), shardFlags()...)...),
		Action: runLoss,
	}
}

func runLoss(c *cli.Context) error {
	format := c.String("format")
	if format != "table" && format != "json" {
		return usagef("--format %q: want table or json", format)
	}
	var o *objective.Objective
	var err error
	if isAlgorithmJob(c) {
		o, err = algorithmObjective(c)
	} else {
		o, err = flagObjective(c)
	}
	if err != nil {
		return err
	}
	in := c.String("in")
	if in == "" {
		return usagef("give --in STORE")
	}
	cols, err := colFlags(c.StringSlice("col"))
	if err != nil {
		return err
	}
	ev, _, err := gpu.Select(c.String("device"), c.App.ErrWriter)
	if err != nil {
		return err
	}
	label := o.Policy.Name()
	if c.IsSet("config") {
		label = jobLabel(c.String("config"), label)
	}
	return monitored(c, label, c.String("metrics"), c.String("prom"), func() (agg.Metrics, error) {
		st := pipeline.NewLoss(o, ev, cols, c.Int64("step"))
		sh, err := shardOf(c)
		if err != nil {
			return nil, err
		}
		res, err := pipeline.Run(c.Context, pipeline.Job{
			In: in, Out: c.String("grad-out"), Stages: []pipeline.Stage{st}, Keep: idColumns, Shard: sh,
		})
		if err != nil {
			return nil, err
		}
		r := st.Result()
		printWarnings(c, "loss", res.Warnings)
		w := c.App.Writer
		if format == "json" {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return r.Metrics, enc.Encode(lossOutput{Fn: o.Policy.Name(), Args: o.Policy.Args, Rows: int(res.In), Tokens: st.Tokens(),
				Loss: jsonFloat(r.Loss), Metrics: jsonMetrics(r.Metrics)})
		}
		return r.Metrics, lossTable(w, r.Metrics)
	})
}

// flagObjective configures the objective from --fn, --arg, --loss-agg-mode,
// --kl-loss-fn, --kl-coef, --entropy-loss-fn, --entropy-coef.
func flagObjective(c *cli.Context) (*objective.Objective, error) {
	if !c.IsSet("fn") {
		return nil, usagef("give --fn, --algorithm or --config")
	}
	def, err := loss.Default().Get(c.String("fn"))
	if err != nil {
		return nil, err
	}
	user, err := def.Schema().ParseKV(c.StringSlice("arg"))
	if err != nil {
		return nil, fmt.Errorf("policy loss %s: %w", def.Name, err)
	}
	return objective.New(objective.Config{
		PolicyLoss: def.Name, Args: user, LossAggMode: c.String("loss-agg-mode"),
		KLLoss: c.String("kl-loss-fn"), KLCoef: c.Float64("kl-coef"),
		Entropy: c.String("entropy-loss-fn"), EntropyCoef: c.Float64("entropy-coef"),
	})
}

// colFlags parses --col INPUT=COLUMN (verl names of the inputs accepted).
func colFlags(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range kvs {
		in, col, ok := strings.Cut(kv, "=")
		in = tokens.Canonical(in)
		valid := false
		for _, d := range pipeline.Inputs {
			valid = valid || d.Input == in
		}
		if !ok || !valid || col == "" {
			return nil, usagef("--col %q: want CANONICAL=COLUMN with CANONICAL one of logprob, old_logprob, ref_logprob, advantages, action_mask, expert_mask, teacher_logprob, entropy, values", kv)
		}
		out[in] = col
	}
	return out, nil
}

func lossTable(w io.Writer, m agg.Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE")
	for _, k := range m.Names() {
		fmt.Fprintf(tw, "%s\t%.10g\n", k, m[k])
	}
	return tw.Flush()
}
