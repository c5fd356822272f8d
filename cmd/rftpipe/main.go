// Command rftpipe turns logged rollouts into training-ready batches, analyses
// them with SQL and computes policy losses. Each subcommand lives in a file of
// its own; main only assembles them and maps errors to exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

func newApp() *cli.App {
	return &cli.App{
		Name:  "rftpipe",
		Usage: "reinforcement fine-tuning data pipeline: experience stores, advantages, policy losses",
		Commands: []*cli.Command{
			genCommand(),
			inspectCommand(),
			convertCommand(),
		},
		// Errors are printed once, by main, in one line.
		ExitErrHandler:  func(*cli.Context, error) {},
		HideHelpCommand: true,
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	app := newApp()
	err := app.RunContext(ctx, interspersed(app, os.Args))
	stop()
	os.Exit(report(os.Stderr, ctx, err))
}
