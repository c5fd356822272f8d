package main

import (
	"fmt"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

func convertCommand() *cli.Command {
	return &cli.Command{
		Name:      "convert",
		Usage:     "convert a store between JSONL, Parquet, Arrow and Trinity-RFT buffers (format from the file names; a buffer is a sqlite:// or postgresql:// URL with ?table=, see the README's \"Using rftpipe with Trinity-RFT\")",
		ArgsUsage: "IN OUT",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec: zstd | snappy | gzip | none"},
			progressFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return schema.Usagef("convert takes IN and OUT")
			}
			in, out := c.Args().Get(0), c.Args().Get(1)
			if err := store.CheckOutputs(c.Context, []string{in}, []store.Output{{Path: out}}, false); err != nil {
				return err
			}
			n, warnings, err := copyStore(c, in, out, store.ParquetOptions{Codec: c.String("codec")})
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
// row's shape; it returns the rows copied and the input's warnings (rows a
// buffer read but did not yield). A conversion is lossless: every reward
// the input holds (null, NaN, ±Inf) is copied, since only stages that
// compute from rewards have a use for --on-invalid-reward.
func copyStore(c *cli.Context, in, out string, po store.ParquetOptions) (int64, []string, error) {
	r, err := store.Open(in, store.Context(c.Context))
	if err != nil {
		return 0, nil, err
	}
	defer r.Close()
	bar := newProgress(c, "convert", -1)
	defer bar.Done()
	n, err := store.Copy(c.Context, r, out, func(rec arrow.Record) error {
		file, row, _ := r.Pos()
		bar.Add(rec.NumRows())
		return schema.Validate(file, row, rec, schema.ValidateOptions{AllowInvalidReward: true})
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
