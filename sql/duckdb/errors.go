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

var lineRE = regexp.MustCompile(`(?m)^LINE (\d+): (.*)\n( *)\^`)

// queryError turns an error of running query into a *QueryError carrying
// DuckDB's message and the position in query. DuckDB puts the position
// (with a LINE/caret context) in binder and most runtime messages but not in
// parser ones; for those it is asked for with json_serialize_sql. Errors that
// are not DuckDB's (a cancelled context) come back as they are.
func queryError(ctx context.Context, db *sql.DB, query string, err error) error {
	var de *duck.Error
	if err == nil || ctx.Err() != nil || !errors.As(err, &de) {
		return err
	}
	msg := strings.TrimSpace(de.Msg)
	e := &QueryError{Msg: oneLine(msg), Query: query, detail: msg}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Column = columnOf(query, e.Line, m[2], len("LINE "+m[1]+": "), len(m[3]))
		return e
	}
	if pos, ok := parserPosition(ctx, db, query); ok {
		e.Line, e.Column = lineColumn(query, pos)
		e.detail = msg + "\n" + caretContext(query, e.Line, e.Column)
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

// columnOf recovers the column DuckDB's caret points at. DuckDB shows a window
// of the line ("..." marks cut ends) after a prefix of prefixLen characters,
// and the caret caret characters from the start of its context line.
func columnOf(query string, line int, shown string, prefixLen, caret int) int {
	off := caret - prefixLen // characters into the shown text
	window := shown
	if strings.HasPrefix(window, "...") {
		window = window[3:]
		off -= 3
	}
	window = strings.TrimSuffix(window, "...")
	full := queryLine(query, line)
	start := strings.Index(full, window)
	if start < 0 {
		start = 0
	}
	return utf8.RuneCountInString(full[:start]) + off + 1
}

// caretContext renders line `line` of query DuckDB's way, with a caret under
// column col.
func caretContext(query string, line, col int) string {
	prefix := fmt.Sprintf("LINE %d: ", line)
	return prefix + queryLine(query, line) + "\n" + strings.Repeat(" ", len(prefix)+col-1) + "^"
}
