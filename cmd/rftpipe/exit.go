package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/rftpipe/rftpipe/schema"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1 // a fault: I/O error, internal error, failed conformance
	exitBadInput = 2 // usage error or bad input data
)

// errUsage is returned by commands for a malformed command line.
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", schema.ErrUsage, fmt.Sprintf(format, args...))
}

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
	if errors.Is(err, schema.ErrBadInput) || errors.Is(err, schema.ErrUsage) || isCLIUsage(err) {
		return exitBadInput
	}
	return exitFailure
}

// isCLIUsage recognises urfave/cli's own flag parsing errors.
func isCLIUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"flag provided but not defined", "Required flag", "Required flags", "invalid value", "No help topic", "flag needs an argument"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
