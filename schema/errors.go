package schema

import (
	"errors"
	"fmt"
	"strings"
)

// Error kinds. Every error rftpipe reports wraps one of them; cmd/rftpipe maps
// ErrBadInput (and ErrUsage) to exit code 2 and anything else to 1.
var (
	// ErrBadInput marks a problem with the user's data or arguments.
	ErrBadInput = errors.New("bad input")
	// ErrUsage marks a malformed command line or configuration.
	ErrUsage = errors.New("usage")
)

// InputError locates a problem in an input store: file, row and column, any of
// which may be unknown (empty / -1).
type InputError struct {
	File   string
	Row    int64 // 0-based row index within the store; -1 when not row-specific
	Column string
	Msg    string
	Err    error // optional cause
}

// Error renders "FILE: row R: column C: MSG", leaving out unknown parts,
// with any password redacted (Redact).
func (e *InputError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(RedactURL(e.File)) // one name: quotes and spaces in it too
		b.WriteString(": ")
	}
	if e.Row >= 0 {
		fmt.Fprintf(&b, "row %d: ", e.Row)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, "column %q: ", e.Column)
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(oneLine(e.Err.Error()))
	}
	return Redact(b.String())
}

// Unwrap makes errors.Is(err, ErrBadInput) true and exposes the cause.
func (e *InputError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadInput, e.Err}
	}
	return []error{ErrBadInput}
}

// Errorf returns an *InputError for file/row/column (row -1: none).
func Errorf(file string, row int64, column, format string, args ...any) error {
	return &InputError{File: file, Row: row, Column: column, Msg: fmt.Sprintf(format, args...)}
}

// BadInputf returns an error wrapping ErrBadInput with no location, for bad
// arguments and configuration values.
func BadInputf(format string, args ...any) error {
	return fmt.Errorf("%w", &InputError{Row: -1, Msg: fmt.Sprintf(format, args...)})
}

// Usagef returns an error wrapping ErrUsage: "usage: " and the message.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// UsageError is a malformed command line as a parser rftpipe does not own
// (urfave/cli's flag parsing) says it, in the parser's words; it wraps
// ErrUsage and the parser's error.
type UsageError struct{ Err error }

// Error returns the parser's message.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap makes errors.Is(err, ErrUsage) true and exposes the cause.
func (e *UsageError) Unwrap() []error { return []error{ErrUsage, e.Err} }

// oneLine folds a multi-line message (some libraries return several lines).
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// MissingInputError is a per-token input (a name of rftpipe's vocabulary)
// that a computation needs and its batch lacks. It wraps ErrBadInput.
type MissingInputError struct {
	// Column is the missing input; More are further missing ones.
	Column string
	More   []string
	// Has lists the inputs the batch has; nil when not listed.
	Has []string
}

// Error renders "missing input C[, D…][ (batch has: …)]".
func (e *MissingInputError) Error() string {
	msg := "missing input " + strings.Join(append([]string{e.Column}, e.More...), ", ")
	if e.Has != nil {
		msg += " (batch has: " + strings.Join(e.Has, ", ") + ")"
	}
	return msg
}

// Unwrap makes errors.Is(err, ErrBadInput) true.
func (e *MissingInputError) Unwrap() error { return ErrBadInput }
