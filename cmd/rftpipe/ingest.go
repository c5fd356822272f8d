package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table/feed"
)

func ingestCommand() *cli.Command {
	return &cli.Command{
		Name:      "ingest",
		Usage:     "append the rows of a store or Trinity-RFT buffer that an experience table does not hold yet (exactly once, by the source's watermark)",
		ArgsUsage: "STORE TABLE",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "experiment", Required: true, Usage: "the experiment the rows belong to (the table's partition)"},
			&cli.StringFlag{Name: "experiment-config", Usage: "the experiment's Trinity-RFT config (YAML): its key fields are recorded in the table"},
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec of the data files: zstd | snappy | gzip | none"},
		}, catalogFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return schema.Usagef("ingest takes STORE and TABLE")
			}
			in, dir := c.Args().Get(0), c.Args().Get(1)
			cat, err := feed.CatalogTarget(c.String("catalog"), c.String("catalog-name"), c.String("catalog-table"), dir)
			if err != nil {
				return err
			}
			res, err := feed.Ingest(c.Context, in, dir, feed.Options{Experiment: c.String("experiment"), Config: c.String("experiment-config"), Codec: c.String("codec"), Catalog: cat})
			if err != nil {
				return err
			}
			printWarnings(c, "ingest", res.Warnings)
			if res.Rows == 0 {
				fmt.Fprintf(c.App.ErrWriter, "ingest: 0 new in %s\n", schema.Redact(in))
				return nil
			}
			fmt.Fprintf(c.App.ErrWriter, "ingest: %d new from %s -> %s (snapshot %d; %d rows read)\n", res.Rows, schema.Redact(in), dir, res.Snapshots[len(res.Snapshots)-1], res.Read)
			return nil
		},
	}
}
