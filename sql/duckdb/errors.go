package duckdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	duck "github.com/marcboeker/go-duckdb"

	"github.com/rftpipe/rftpipe/schema"
)

// QueryError is a statement DuckDB refused or failed to run: bad SQL, an
// unknown column, a failed cast. It is bad input (errors.Is(err,
// schema.ErrBadInput)).
type QueryError struct {
	Msg    string // DuckDB's message, e.g. `Parser Error: syntax error at or near "FORM"`
	Query  string // the statement
	Line   int    // 1-based line of the error in Query; 0 when DuckDB gave no position
	Column int    // 1-based column (in characters)
	// Type is DuckDB's error type (go-duckdb's, from the message's prefix).
	Type   duck.ErrorType
	detail string // DuckDB's full message with its LINE/caret context
}

// Error returns DuckDB's message on one line with the position, as
// `Parser Error: syntax error at or near "FORM" (line 1, column 10)`.
func (e *QueryError) Error() string {
	msg := e.Msg
	if e.Line > 0 {
		msg += fmt.Sprintf(" (line %d, column %d)", e.Line, e.Column)
	}
	return msg
}

// Detail returns DuckDB's message as DuckDB renders it, over several lines:
// the message, hints such as candidate columns, and the offending line of the
// query with a caret under the position.
func (e *QueryError) Detail() string { return e.detail }

// Unwrap makes the error bad input.
func (e *QueryError) Unwrap() error { return schema.ErrBadInput }

var lineRE = regexp.MustCompile(`(?m)^LINE (\d+): `)

// queryError turns an error of running query into a *QueryError carrying
// DuckDB's message and the position in query. Errors that are not DuckDB's
// (a cancelled context) come back as they are.
func queryError(ctx context.Context, db *sql.DB, query string, err error) error {
	return queryErrorIn(ctx, db, query, query, 0, err)
}

// queryErrorIn is queryError for a query DuckDB ran inside a wrapper: ran is
// the text DuckDB ran, in which query starts at line skip+1. DuckDB puts the
// position (as a LINE/caret context) in binder and most runtime messages but
// not in parser ones; for those it is asked for with json_serialize_sql.
func queryErrorIn(ctx context.Context, db *sql.DB, ran, query string, skip int, err error) error {
	var de *duck.Error
	if err == nil || ctx.Err() != nil || !errors.As(err, &de) {
		return err
	}
	msg := strings.TrimSpace(de.Msg)
	e := &QueryError{Msg: FirstLine(msg), Query: query, Type: de.Type, detail: msg}
	var line, col int
	if loc := lineRE.FindStringSubmatchIndex(msg); loc != nil {
		line, _ = strconv.Atoi(msg[loc[2]:loc[3]])
		col = columnOf(ran, line, msg[loc[1]:], loc[1]-loc[0])
		msg = strings.TrimSpace(msg[:loc[0]])
	} else if pos, ok := parserPosition(ctx, db, ran); ok {
		line, col = lineColumn(ran, pos)
	}
	if line -= skip; line >= 1 && col >= 1 {
		e.Line, e.Column = line, col
		e.detail = msg + "\n" + caretContext(query, line, col)
	}
	return e
}

// parserPosition asks DuckDB's parser for the byte offset of a syntax error.
func parserPosition(ctx context.Context, db *sql.DB, query string) (int, bool) {
	var js string
	if err := db.QueryRowContext(ctx, "SELECT json_serialize_sql("+QuoteString(query)+")::VARCHAR").Scan(&js); err != nil {
		return 0, false
	}
	var r struct {
		Error    bool   `json:"error"`
		Position string `json:"position"`
	}
	if json.Unmarshal([]byte(js), &r) != nil || !r.Error || r.Position == "" {
		return 0, false
	}
	pos, err := strconv.Atoi(r.Position)
	return pos, err == nil && pos >= 0 && pos <= len(query)
}

// lineColumn converts a byte offset in s to a 1-based line and column (in
// characters).
func lineColumn(s string, pos int) (line, col int) {
	before := s[:pos]
	line = strings.Count(before, "\n") + 1
	start := strings.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCountInString(before[start:]) + 1
}

// queryLine returns line n (1-based) of s, or "".
func queryLine(s string, n int) string {
	lines := strings.Split(s, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimRight(lines[n-1], "\r")
}

// columnOf recovers the column DuckDB's caret points at from its context
//
//	LINE 3: ...window of the line...
//	                 ^
//
// ctx is the text after the "LINE n: " prefix of prefixLen characters. The
// caret sits under the error; "..." marks cut ends of the window. DuckDB
// (1.1) takes the window's start relative to the line but cuts it from the
// whole query, so on lines after the first the window may show text from
// elsewhere (even across lines); its start is then found in the whole query.
func columnOf(query string, line int, ctx string, prefixLen int) int {
	last := strings.LastIndexByte(ctx, '\n')
	if last < 0 || strings.Trim(ctx[last+1:], " ") != "^" {
		return 0
	}
	window := ctx[:last]
	off := strings.IndexByte(ctx[last+1:], '^') - prefixLen // characters into the window
	if strings.HasPrefix(window, "...") {
		window = window[3:]
		off -= 3
	}
	window = strings.TrimSuffix(window, "...")
	if full := queryLine(query, line); strings.Contains(full, window) {
		return utf8.RuneCountInString(full[:strings.Index(full, window)]) + off + 1
	}
	if i := strings.Index(query, window); i >= 0 {
		return utf8.RuneCountInString(query[:i]) + off + 1
	}
	return off + 1
}

// contextWidth is how many characters of a long query line the caret context
// shows on either side of the position.
const contextWidth = 60

// caretContext renders line `line` of query DuckDB's way, with a caret under
// column col; a long line is cut around col ("..." marks the cuts).
func caretContext(query string, line, col int) string {
	prefix := fmt.Sprintf("LINE %d: ", line)
	text := []rune(queryLine(query, line))
	col = min(col, len(text)+1)
	from, to := max(0, col-1-contextWidth), min(len(text), col-1+contextWidth)
	shown := string(text[from:to])
	pad := len(prefix) + col - 1 - from
	if from > 0 {
		shown = "..." + shown
		pad += 3
	}
	if to < len(text) {
		shown += "..."
	}
	return prefix + shown + "\n" + strings.Repeat(" ", pad) + "^"
}
