package main

import (
	"fmt"
	"log"
	"net"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/view"
)

func viewCommand() *cli.Command {
	return &cli.Command{
		Name:  "view",
		Usage: "serve a read-only web page over a store: curves, steps, groups, rollouts, tokens, search",
		Description: "From the overview's curves to the rollouts behind them: each explore step's groups (kept or\n" +
			"dropped, by which stage and why: give the run's --rejected store), a group's rollouts side by side,\n" +
			"a rollout's text and tokens coloured by a per-token column, search by text, regular expression or\n" +
			"token ids. The SQL box is off unless --allow-sql. Stop it with Ctrl-C.\n\n" +
			"   rftpipe view fixtures/stores/full.parquet\n" +
			"   rftpipe view out/run.parquet --rejected out/rejected.parquet --addr 127.0.0.1:9000",
		ArgsUsage: "STORE",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "`HOST:PORT` to listen on (another host than loopback serves the store to the network)"},
			&cli.StringFlag{Name: "rejected", Usage: "the rejected-rows `STORE` of the run that wrote STORE (run --rejected): shows the dropped groups and why"},
			&cli.BoolFlag{Name: "allow-sql", Usage: "serve the SQL box: read-only SELECTs over the views"},
			threadsFlag(),
			memoryLimitFlag(),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return schema.Usagef("view takes one STORE (rftpipe view STORE)")
			}
			addr := c.String("addr")
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return schema.Usagef("--addr %s: want HOST:PORT", addr)
			}
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				fmt.Fprintf(c.App.ErrWriter, "view: warning: --addr %s serves the store to every host that can reach this one (no authentication)\n", addr)
			}
			start := time.Now()
			v, err := view.Open(c.Context, view.Options{
				Store: c.Args().First(), Rejected: c.String("rejected"), AllowSQL: c.Bool("allow-sql"),
				Threads: c.Int("threads"), MemoryLimit: c.String("memory-limit"),
				Log: log.New(c.App.ErrWriter, "", log.LstdFlags),
			})
			if err != nil {
				return err
			}
			defer v.Close()
			printWarnings(c, "view", v.Warnings())
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return schema.BadInputf("--addr %s: %v", addr, err)
			}
			fmt.Fprintf(c.App.ErrWriter, "view: indexed %s in %.1fs; serving http://%s/ (Ctrl-C stops)\n",
				schema.Redact(c.Args().First()), time.Since(start).Seconds(), ln.Addr())
			if err := v.Serve(c.Context, ln, 5*time.Second); err != nil {
				return err
			}
			fmt.Fprintln(c.App.ErrWriter, "view: stopped")
			return nil
		},
	}
}
