package view

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of request input.
const (
	pageSize    = 50   // rows of a paged table
	maxPage     = 1e6  // highest page number
	maxText     = 1000 // characters of a text parameter
	maxTokenSeq = 64   // token ids of a token search
)

// httpError is a request the viewer refuses: its status and a message for
// the person who made it.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

// badRequest is a 400 with the message.
func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// notFound is a 404 with the message.
func notFound(format string, args ...any) error {
	return &httpError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// params reads a request's query parameters: only the names the page
// takes, each at most once, valid UTF-8 of bounded length.
type params struct{ q url.Values }

// parseParams refuses a query with a parameter the page does not take.
func parseParams(r *http.Request, known ...string) (params, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return params{}, badRequest("bad query string: %v", err)
	}
	for k, vs := range q {
		if !slices.Contains(known, k) {
			return params{}, badRequest("unknown parameter %q (this page takes: %s)", k, strings.Join(known, ", "))
		}
		if len(vs) > 1 {
			return params{}, badRequest("parameter %s given %d times", k, len(vs))
		}
		if !utf8.ValidString(vs[0]) || len(vs[0]) > maxText {
			return params{}, badRequest("parameter %s: want UTF-8 text of at most %d bytes", k, maxText)
		}
	}
	return params{q}, nil
}

// str returns parameter name, or "" when absent.
func (p params) str(name string) string { return p.q.Get(name) }

// required returns parameter name, refusing it absent or empty.
func (p params) required(name string) (string, error) {
	s := p.q.Get(name)
	if s == "" {
		return "", badRequest("missing parameter %s", name)
	}
	return s, nil
}

// key returns parameter name, an id that may be empty (a store without
// the column has the empty key), refusing it absent.
func (p params) key(name string) (string, error) {
	if !p.q.Has(name) {
		return "", badRequest("missing parameter %s", name)
	}
	return p.q.Get(name), nil
}

// int returns the integer parameter name in [lo, hi], def when absent.
func (p params) int(name string, lo, hi, def int64) (int64, error) {
	s := p.q.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("parameter %s: want an integer in [%d, %d], got %q", name, lo, hi, s)
	}
	return n, nil
}

// page returns the 1-based page number (parameter page).
func (p params) page() (int64, error) { return p.int("page", 1, maxPage, 1) }

// oneOf returns parameter name, which must be one of allowed; def when absent.
func (p params) oneOf(name string, allowed []string, def string) (string, error) {
	s := p.q.Get(name)
	if s == "" {
		return def, nil
	}
	if !slices.Contains(allowed, s) {
		return "", badRequest("parameter %s: want one of %s, got %q", name, strings.Join(allowed, ", "), s)
	}
	return s, nil
}

// sorting reads parameters sort (one of the columns) and dir (asc or desc)
// and returns the ORDER BY list: the column, then the tie-breakers ties.
func (p params) sorting(columns []string, def, defDir string, ties string) (col, dir, order string, err error) {
	if col, err = p.oneOf("sort", columns, def); err != nil {
		return
	}
	if dir, err = p.oneOf("dir", []string{"asc", "desc"}, defDir); err != nil {
		return
	}
	d := " " + strings.ToUpper(dir) + " NULLS LAST, "
	key := col
	if col == "batch" || col == "task" { // ids: numbers in number order, else text
		key = col + "_num" + d + col
	}
	return col, dir, key + d + ties, nil
}

// tokenSeq parses a token-id sequence: integers separated by spaces or commas.
func tokenSeq(s string) ([]int64, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' })
	if len(fields) == 0 || len(fields) > maxTokenSeq {
		return nil, badRequest("token search: want 1 to %d token ids separated by spaces or commas", maxTokenSeq)
	}
	ids := make([]int64, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, badRequest("token search: %q is not a token id (a non-negative integer)", f)
		}
		ids[i] = n
	}
	return ids, nil
}

// checkRegexp refuses a pattern RE2 (Go's and DuckDB's syntax) cannot compile.
func checkRegexp(s string) error {
	if _, err := regexp.Compile(s); err != nil {
		return badRequest("bad regular expression: %v", err)
	}
	return nil
}

// experiment returns parameter experiment, one of the store's experiments:
// given as one of them, that one ("" where the store has rows of no
// experiment); else, absent or empty, the store's only one, or "" (all of
// them) unless required, which a store of several experiments refuses.
func (v *Viewer) experiment(p params, required bool) (string, error) {
	e := p.q.Get("experiment")
	switch {
	case p.q.Has("experiment") && slices.Contains(v.experiments, e):
		return e, nil // "" too: the rows of no experiment, where the store has some
	case e == "" && len(v.experiments) == 1:
		return v.experiments[0], nil
	case e == "" && required && len(v.experiments) > 1:
		return "", badRequest("missing parameter experiment (the store's experiments: %s)", strings.Join(v.experiments, ", "))
	case e == "" || slices.Contains(v.experiments, e):
		return e, nil
	}
	if len(v.experiments) < 2 {
		return "", badRequest("parameter experiment: the store has no experiments (no experiment column of several values), got %q", e)
	}
	return "", badRequest("parameter experiment: want one of the store's experiments %s, got %q", strings.Join(v.experiments, ", "), e)
}
