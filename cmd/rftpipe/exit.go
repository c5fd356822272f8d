package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1 // a fault: I/O error, internal error, failed conformance
	exitBadInput = 2 // usage error or bad input data
)

// exitCode is an error that carries its own exit code and has already been
// reported (e.g. conformance failures, printed case by case).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// interrupted is the cancellation cause set by the signal handler.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return "interrupted by " + i.sig.String() }

// report prints err in one line on w and returns the process exit code. A run
// stopped by a signal exits 128+signal (130 for SIGINT, 143 for SIGTERM).
func report(w io.Writer, ctx context.Context, err error) int {
	code := exitStatus(ctx, err)
	var quiet exitCode
	switch {
	case err == nil || errors.As(err, &quiet):
	case code > 128:
		fmt.Fprintln(w, "rftpipe: "+context.Cause(ctx).Error())
	default:
		fmt.Fprintln(w, "rftpipe: "+schema.Redact(strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")))
	}
	return code
}

// exitStatus returns the process exit code for err.
func exitStatus(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	var sig interrupted
	if errors.As(context.Cause(ctx), &sig) {
		return 128 + int(sig.sig)
	}
	var cliExit cli.ExitCoder // cli's own: "No help topic for 'x'"
	if errors.Is(err, schema.ErrBadInput) || errors.Is(err, schema.ErrUsage) || errors.As(err, &cliExit) {
		return exitBadInput
	}
	return exitFailure
}

// usageErrors makes the command-line errors of cmds and their sub-commands
// usage errors: flag parsing errors (OnUsageError), and a missing flag
// declared Required — checked before the command's action, since cli's own
// check returns an error no type tells apart. cli shows such an error as it
// does its own: on stdout, then the help.
func usageErrors(cmds []*cli.Command) {
	for _, cmd := range cmds {
		cmd.OnUsageError = flagError
		if action := cmd.Action; action != nil {
			if names := takeRequired(cmd.Flags); len(names) > 0 {
				cmd.Action = func(c *cli.Context) error {
					if err := checkRequired(c, names); err != nil {
						return err
					}
					return action(c)
				}
			}
		}
		usageErrors(cmd.Subcommands)
	}
}

// flagError is the OnUsageError of the app and of every command: cli's
// report of err (on stdout, with the help) and err as a usage error.
func flagError(c *cli.Context, err error, isSubcommand bool) error {
	fmt.Fprintf(c.App.Writer, "Incorrect Usage: %s\n\n", err)
	if isSubcommand {
		_ = cli.ShowSubcommandHelp(c)
	} else {
		_ = cli.ShowAppHelp(c)
	}
	return &schema.UsageError{Err: err}
}

// takeRequired returns the names of the flags declared Required and clears
// their Required, so that checkRequired, not cli, checks them.
func takeRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Required {
			sf.Required = false
			names = append(names, sf.Name)
		}
	}
	return names
}

// checkRequired is cli's check of Required flags, its message and its
// help, as a usage error.
func checkRequired(c *cli.Context, names []string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	tmpl := c.Command.CustomHelpTemplate
	if tmpl == "" {
		tmpl = cli.CommandHelpTemplate
	}
	cli.HelpPrinter(c.App.Writer, tmpl, c.Command)
	err := fmt.Errorf("Required flag %q not set", missing[0])
	if len(missing) > 1 {
		err = fmt.Errorf("Required flags %q not set", strings.Join(missing, ", "))
	}
	return &schema.UsageError{Err: err}
}
