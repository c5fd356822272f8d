// Command rftpipe turns logged rollouts into training-ready batches, analyses
// them with SQL and computes policy losses. Each subcommand lives in a file of
// its own; main only assembles them and maps errors to exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// version is set at build time (go build -ldflags "-X main.version=v1.2.3");
// otherwise the module version of the build, or "devel".
var version string

// appVersion returns the version `rftpipe --version` prints.
func appVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func newApp() *cli.App {
	app := &cli.App{
		Name:                 "rftpipe",
		Usage:                "reinforcement fine-tuning data pipeline: experience stores, advantages, policy losses",
		Version:              appVersion(),
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			streaming(genCommand()),
			inspectCommand(),
			streaming(convertCommand()),
			streaming(runCommand()),
			sqlCommand(),
			reportCommand(),
			viewCommand(),
			algorithmsCommand(),
			conformanceCommand(),
			benchCommand(),
			streaming(lossCommand()),
			streaming(ingestCommand()),
			streaming(compactCommand()),
			mergeMetricsCommand(),
			completionCommand(),
		},
		// Errors are printed once, by main, in one line.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError:   flagError,
	}
	usageErrors(app.Commands)
	// Without a command: the help; with an unknown one: a usage error.
	app.Action = func(c *cli.Context) error {
		if c.NArg() == 0 {
			return cli.ShowAppHelp(c)
		}
		var names []string
		for _, cmd := range c.App.VisibleCommands() {
			names = append(names, cmd.Name)
		}
		return schema.Usagef("unknown command %q (commands: %s; rftpipe help CMD)", c.Args().First(), strings.Join(names, ", "))
	}
	return app
}

// streaming marks a command that streams a store: before it runs, the heap
// gets store.HeapLimit as its soft limit unless GOMEMLIMIT sets one.
func streaming(c *cli.Command) *cli.Command {
	c.Before = func(*cli.Context) error {
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(store.HeapLimit)
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
	stop := profile(os.Getenv("RFTPIPE_CPUPROFILE"))
	app := newApp()
	err := app.RunContext(ctx, interspersed(app, os.Args))
	stop()
	os.Exit(report(os.Stderr, ctx, err))
}

// profile writes a CPU profile of the whole command to path (the
// RFTPIPE_CPUPROFILE variable; go tool pprof reads it) until the returned
// func is called. An empty path profiles nothing; a path that cannot be
// created is said on stderr and the command runs unprofiled.
func profile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		os.Stderr.WriteString("rftpipe: RFTPIPE_CPUPROFILE: " + err.Error() + "\n")
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
