// Command rftpipe turns logged rollouts into training-ready batches, analyses
// them with SQL and computes policy losses. Each subcommand lives in a file of
// its own; main only assembles them and maps errors to exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/pipeline"
)

func newApp() *cli.App {
	return &cli.App{
		Name:  "rftpipe",
		Usage: "reinforcement fine-tuning data pipeline: experience stores, advantages, policy losses",
		Commands: []*cli.Command{
			streaming(genCommand()),
			inspectCommand(),
			streaming(convertCommand()),
			streaming(runCommand()),
			sqlCommand(),
			reportCommand(),
			algorithmsCommand(),
			conformanceCommand(),
			benchCommand(),
			lossCommand(),
		},
		// Errors are printed once, by main, in one line.
		ExitErrHandler:  func(*cli.Context, error) {},
		HideHelpCommand: true,
	}
}

// streaming marks a command that streams a store: before it runs, the heap
// gets pipeline.HeapLimit as its soft limit unless GOMEMLIMIT sets one. (Not
// every command: loss holds a whole token batch, which may exceed it, and
// would then spend its time collecting.)
func streaming(c *cli.Command) *cli.Command {
	c.Before = func(*cli.Context) error {
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(pipeline.HeapLimit)
		}
		return nil
	}
	return c
}

func main() {
	// A signal cancels the context: commands stop at the next batch, their
	// deferred Aborts remove temp files, and the exit code says which signal.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel(interrupted{sig.(syscall.Signal)})
		signal.Stop(sigs) // a second signal kills at once
	}()
	app := newApp()
	err := app.RunContext(ctx, interspersed(app, os.Args))
	os.Exit(report(os.Stderr, ctx, err))
}
