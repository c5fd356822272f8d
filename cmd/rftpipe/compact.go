package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/table/feed"
)

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:      "compact",
		Usage:     "rewrite an experience table's runs of small data files into one file each, one snapshot per run; with --expire-before, remove the files only older snapshots read",
		ArgsUsage: "TABLE",
		Flags: append([]cli.Flag{
			int64Flag(&cli.Int64Flag{Name: "target-rows", Value: feed.DefaultTargetRows, Usage: "merge data files of fewer rows than this"}, schema.AtLeast1),
			&cli.TimestampFlag{Name: "expire-before", Layout: time.RFC3339, Usage: "expire the snapshots older than this time (RFC 3339) and remove the data files only they read"},
			&cli.StringFlag{Name: "codec", Value: "zstd", Usage: "Parquet codec of the merged files: zstd | snappy | gzip | none"},
		}, catalogFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return schema.Usagef("compact takes TABLE")
			}
			var before time.Time
			if ts := c.Timestamp("expire-before"); ts != nil {
				before = *ts
			}
			dir := c.Args().First()
			cat, err := feed.CatalogTarget(c.String("catalog"), c.String("catalog-name"), c.String("catalog-table"), dir)
			if err != nil {
				return err
			}
			res, err := feed.Compact(c.Context, dir, c.Int64("target-rows"), before, c.String("codec"), cat)
			if err != nil {
				return err
			}
			printWarnings(c, "compact", res.Warnings)
			fmt.Fprintf(c.App.ErrWriter, "compact: %d data files merged into %d, %d expired files removed\n", res.Merged, res.Written, res.Expired)
			return nil
		},
	}
}
