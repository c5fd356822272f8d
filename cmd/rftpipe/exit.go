package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

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

// report prints err in one line on w and returns the process exit code. An
// interrupted run exits 130 (SIGINT) — the signal handler cancelled ctx.
func report(w io.Writer, ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(w, "rftpipe: interrupted")
		return 130
	}
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")
	fmt.Fprintln(w, "rftpipe: "+msg)
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
