package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"

	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/synth"
)

// The valid ranges of gen's counts and lengths (synth checks them again).
var (
	countRange = schema.Range(fmt.Sprintf("[1,%d]", synth.MaxCount))
	lenRange   = schema.Range(fmt.Sprintf("[1,%d]", synth.MaxLen))
)

func genCommand() *cli.Command {
	d := synth.Default()
	return &cli.Command{
		Name:      "gen",
		Usage:     "generate a seeded synthetic experience store",
		ArgsUsage: " ",
		Description: "Writes a store of the given kind: single (one answer per row), multi (multi-turn rows with\n" +
			"masked tool tokens), dpo (Trinity's DPO records: prompt, chosen, rejected) or pairs (DPO as the\n" +
			"trainer reads it: each pair two adjacent rows, chosen then rejected; --runs is 2).\n\n" +
			"--with adds the trainer-side inputs presets and losses read: " + strings.Join(synth.TrainerColumns, ", ") + ",\n" +
			"or all of them (--with all). old_logprob is the rollout logprobs plus small noise (what rollout\n" +
			"correction corrects), logprob the current policy a little further off, ref_logprob the reference\n" +
			"model; in a pairs store the chosen rows gain log-probability against the reference and the rejected\n" +
			"ones lose it. The other columns come out the same bytes with or without --with.\n\n" +
			"--info adds a multi-step agent's info (JSON): env_state_hash, the anchor state a step starts from\n" +
			"(shared by every run's first step, one of two states of the task at a later step), and step_reward\n" +
			"(gigpo's inputs). --reward-components a,b adds reward_a, reward_b (0 or 1 each; gdpo's inputs) and\n" +
			"makes the reward their sum. The other columns keep their bytes with or without them.\n\n" +
			"Examples:\n" +
			"  rftpipe gen --tasks 32 --runs 8 --with all --seed 17 --out full.parquet\n" +
			"  rftpipe gen --kind pairs --tasks 32 --with logprob,ref_logprob --seed 19 --out pairs.parquet\n" +
			"  rftpipe gen --kind multi --steps 3 --info --seed 23 --out gigpo.parquet\n" +
			"  rftpipe gen --reward-components correct,format --seed 29 --out multireward.parquet",
		Flags: []cli.Flag{
			intFlag(&cli.IntFlag{Name: "tasks", Value: d.Tasks, Usage: "number of tasks (distinct batch/task ids)"}, countRange),
			intFlag(&cli.IntFlag{Name: "runs", Value: d.Runs, Usage: "runs (rollouts) per task"}, countRange),
			intFlag(&cli.IntFlag{Name: "steps", Value: d.Steps, Usage: "steps per run (multi-step episodes)"}, countRange),
			intFlag(&cli.IntFlag{Name: "tasks-per-batch", Value: d.TasksPerBatch, Usage: "tasks per explore batch"}, countRange),
			intFlag(&cli.IntFlag{Name: "prompt-len", Value: d.PromptLen, Usage: "prompt tokens per experience"}, lenRange),
			&cli.StringFlag{Name: "resp-len", Value: "256", Usage: fmt.Sprintf("response tokens: N or MIN:MAX, in %s", lenRange)},
			&cli.StringFlag{Name: "reward", Value: d.Reward, Usage: "bernoulli:P (P in (0,1)) | uniform | normal"},
			&cli.StringFlag{Name: "kind", Value: string(d.Kind), Usage: "single | multi | dpo | pairs"},
			&cli.StringFlag{Name: "with", Usage: "trainer-side columns to add: `LIST` of " + strings.Join(synth.TrainerColumns, ",") + ", or all"},
			&cli.BoolFlag{Name: "info", Usage: "add info with env_state_hash and step_reward (a multi-step agent's anchor states)"},
			&cli.StringFlag{Name: "reward-components", Usage: "add a reward_NAME column per name of `LIST` (comma-separated); the reward is their sum"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "random seed (same seed, same bytes)"},
			outFlag(),
			progressFlag(),
		},
		Action: func(c *cli.Context) error {
			cfg := synth.Default()
			cfg.Tasks, cfg.Runs, cfg.Steps = c.Int("tasks"), c.Int("runs"), c.Int("steps")
			cfg.TasksPerBatch, cfg.PromptLen = c.Int("tasks-per-batch"), c.Int("prompt-len")
			cfg.Reward, cfg.Kind, cfg.Seed = c.String("reward"), synth.Kind(c.String("kind")), c.Uint64("seed")
			if cfg.Kind == synth.Pairs && !c.IsSet("runs") {
				cfg.Runs = 2
			}
			var err error
			if cfg.With, err = synth.ParseWith(c.String("with")); err != nil {
				return err
			}
			cfg.Info = c.Bool("info")
			if s := c.String("reward-components"); s != "" {
				cfg.RewardComponents = strings.Split(s, ",")
			}
			if cfg.RespMin, cfg.RespMax, err = synth.ParseRange(c.String("resp-len")); err != nil {
				return err
			}
			start := time.Now()
			w, err := store.Create(c.String("out"), cfg.Schema())
			if err != nil {
				return err
			}
			defer w.Abort()
			bar := newProgress(c, "gen", cfg.Rows())
			err = synth.Generate(c.Context, cfg, func(rec arrow.Record) error {
				bar.Add(rec.NumRows())
				return w.Write(rec)
			})
			bar.Done()
			if err != nil {
				return err
			}
			if err := w.Commit(); err != nil {
				return err
			}
			fmt.Fprintf(c.App.ErrWriter, "gen: wrote %d experiences to %s in %.1fs\n", w.Rows(), schema.Redact(c.String("out")), time.Since(start).Seconds())
			return nil
		},
	}
}
