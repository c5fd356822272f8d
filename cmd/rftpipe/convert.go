package main

import (
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

func convertCommand() *cli.Command {
	return &cli.Command{
		Name:      "convert",
		Usage:     "convert a store between JSONL, Parquet, Arrow and Trinity-RFT buffers (format from the file names; a buffer is a sqlite:// or postgresql:// URL with ?table=, see the README's \"Using rftpipe with Trinity-RFT\")",
		ArgsUsage: "IN OUT",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec: zstd | snappy | gzip | none"},
			&cli.StringFlag{Name: "on-invalid-reward", Value: "error", Usage: "null/NaN/Inf rewards: error (stop at the first, naming its row) | keep; DPO and SFT rows (the input's, or an output buffer's schema_type=dpo|sft) may have null rewards either way"},
			progressFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usagef("convert takes IN and OUT")
			}
			in, out := c.Args().Get(0), c.Args().Get(1)
			opt := schema.ValidateOptions{RequireReward: true}
			switch c.String("on-invalid-reward") {
			case "error":
			case "keep":
				opt.AllowInvalidReward = true
			default:
				return usagef("--on-invalid-reward must be error or keep")
			}
			if err := store.CheckOutputs(c.Context, []string{in}, []store.Output{{Path: out}}, false); err != nil {
				return err
			}
			n, warnings, err := copyStore(c, in, out, store.ParquetOptions{Codec: c.String("codec")}, opt)
			if err != nil {
				return err
			}
			printWarnings(c, "convert", warnings)
			fmt.Fprintf(c.App.ErrWriter, "convert: %d experiences %s -> %s\n", n, schema.Redact(in), schema.Redact(out))
			return nil
		},
	}
}

// copyStore streams every batch of in to out, atomically, validating each
// row; it returns the rows copied and the input's warnings (rows a buffer
// read but did not yield).
func copyStore(c *cli.Context, in, out string, po store.ParquetOptions, opt schema.ValidateOptions) (int64, []string, error) {
	r, err := store.Open(in, store.Context(c.Context))
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	if trinity.RewardOptional(r.Schema(), out) {
		opt.RequireReward = false
	}
	bar := newProgress(c, "convert", -1)
	defer bar.Done()
	n, err := store.Copy(c.Context, r, out, func(rec arrow.Record) error {
		file, row, _ := r.Pos()
		bar.Add(rec.NumRows())
		return schema.Validate(file, row, rec, opt)
	}, store.NotOver(in), store.WithParquet(po))
	return n, r.Warnings(), err
}

// printWarnings prints the input's warnings (rows a buffer read but did not
// yield), one line each.
func printWarnings(c *cli.Context, cmd string, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "%s: warning: %s\n", cmd, w)
	}
}
