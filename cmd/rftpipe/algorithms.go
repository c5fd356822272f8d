package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline/builder"
	"github.com/rftpipe/rftpipe/schema"
)

func algorithmsCommand() *cli.Command {
	return &cli.Command{
		Name:      "algorithms",
		Usage:     "list the algorithm types (flags and default components), or show one with its resolved default config",
		ArgsUsage: "[NAME]",
		Flags:     []cli.Flag{formatFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return schema.Usagef("algorithms takes at most one NAME")
			}
			format := c.String("format")
			if format != "table" && format != "json" {
				return schema.Usagef("--format %q: want table or json", format)
			}
			names := builder.Names(builder.Algorithms)
			if c.NArg() == 1 {
				names = []string{c.Args().First()}
			}
			docs := make([]builder.AlgorithmDoc, 0, len(names))
			for _, n := range names {
				d, err := builder.Algorithm(n)
				if err != nil {
					return err
				}
				docs = append(docs, d)
			}
			w := c.App.Writer
			switch {
			case format == "json":
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(docs)
			case c.NArg() == 1:
				return algorithmDetail(w, docs[0])
			default:
				return algorithmTable(w, docs)
			}
		},
	}
}

// algorithmTable prints one line per type: flags and default components.
func algorithmTable(w io.Writer, docs []builder.AlgorithmDoc) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "NAME\tCRITIC\tREF\tADV_IN_TRAINER\tBALANCE\tSCHEMA")
	for _, k := range builder.SlotKeys() {
		fmt.Fprint(tw, "\t", strings.ToUpper(k))
	}
	fmt.Fprintln(tw)
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "-"
	}
	for _, d := range docs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", d.Name, yn(d.UseCritic), yn(d.UseReference),
			yn(d.ComputeAdvantageInTrainer), yn(d.CanBalanceBatch), d.Schema)
		for _, s := range d.Components {
			fmt.Fprint(tw, "\t", s.Fn)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// algorithmDetail prints one type with its resolved default config.
func algorithmDetail(w io.Writer, d builder.AlgorithmDoc) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s (upstream %s)\n", d.Name, d.Class)
	fmt.Fprintf(tw, "description\t%s\n", d.Doc)
	for _, f := range []struct {
		k string
		v any
	}{
		{"use_critic", d.UseCritic}, {"use_reference", d.UseReference},
		{"compute_advantage_in_trainer", d.ComputeAdvantageInTrainer},
		{"can_balance_batch", d.CanBalanceBatch}, {"schema", d.Schema},
	} {
		fmt.Fprintf(tw, "%s\t%v\n", f.k, f.v)
	}
	cfg := d.DefaultConfig
	fmt.Fprintln(tw, "default config\t")
	fmt.Fprintf(tw, "  repeat_times\t%d\n", cfg.RepeatTimes)
	for _, s := range d.Components {
		fmt.Fprintf(tw, "  %s\t%s", s.Key, s.Fn)
		if a := s.Args; a != nil {
			raw, err := json.Marshal(a)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, " %s", raw)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "  loss_agg_mode\t%s\n", cfg.LossAggMode)
	return tw.Flush()
}
