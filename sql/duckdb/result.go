package duckdb

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	duck "github.com/marcboeker/go-duckdb"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
)

// Format is an output format for query results.
type Format string

// Output formats.
const (
	Table   Format = "table"   // aligned columns for people, numbers right-aligned
	CSV     Format = "csv"     // RFC 4180 with a header line; NULL is an empty field
	JSON    Format = "json"    // an array of objects, one per line, columns in order
	Parquet Format = "parquet" // written by DuckDB's COPY (see CopyParquet)
)

// ParseFormat parses a format name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Table, CSV, JSON, Parquet:
		return f, nil
	}
	return "", schema.BadInputf("unknown format %q (valid: table, csv, json, parquet)", s)
}

// FormatOf infers the format from an output file name (.csv, .json,
// .parquet/.pq); anything else is a table.
func FormatOf(path string) Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return CSV
	case ".json", ".jsonl", ".ndjson":
		return JSON
	case ".parquet", ".pq":
		return Parquet
	}
	return Table
}

// tableSample is the number of leading rows a table's column widths are
// measured on; later rows stream through and may overflow a column.
const tableSample = 1000

// Write runs query and writes its result to w as a table, CSV or JSON. It
// returns the number of rows. SQL errors come back as *QueryError.
func Write(ctx context.Context, db *sql.DB, query string, f Format, w io.Writer) (int64, error) {
	if f == Parquet {
		return 0, schema.BadInputf("parquet output needs an output file (--out)")
	}
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return 0, queryError(ctx, db, query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	var out sink
	switch f {
	case CSV:
		out = &csvSink{w: csv.NewWriter(w)}
	case JSON:
		out = &jsonSink{w: w, cols: cols}
	default:
		out = &tableSink{w: w, cols: cols}
	}
	if err := out.header(cols); err != nil {
		return 0, err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var n int64
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, err
		}
		if err := out.row(vals); err != nil {
			return n, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, queryError(ctx, db, query, err)
	}
	return n, out.close()
}

// CopyParquet runs query and writes its result, with DuckDB's COPY, to the
// Parquet file out (zstd): DuckDB writes a temp file beside out, which is
// synced and renamed into place, so out is never half-written. query must be
// one statement. It returns the number of rows.
func CopyParquet(ctx context.Context, db *sql.DB, query, out string) (int64, error) {
	if objstore.IsURL(out) {
		return copyParquetObject(ctx, db, query, out)
	}
	// rftpipe's temp name (hidden, ending .tmp: no store glob takes it, and
	// a later run sweeps it if this process is killed), and no temp file of
	// DuckDB's own: it would write tmp_NAME, which a directory store reads.
	to, err := store.Target(out)
	if err != nil {
		return 0, err
	}
	tmp, err := store.CreateTemp(to)
	if err != nil {
		return 0, fmt.Errorf("sql: %w", err)
	}
	tmpName := tmp.Name()
	tmp.Close()
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()
	// The query starts on the wrapper's second line.
	copySQL := "COPY (\n" + strings.TrimSuffix(strings.TrimSpace(query), ";") + "\n) TO " + QuoteString(tmpName) + " (FORMAT PARQUET, COMPRESSION ZSTD, USE_TMP_FILE false)"
	var n int64
	if err := db.QueryRowContext(ctx, copySQL).Scan(&n); err != nil {
		return 0, queryErrorIn(ctx, db, copySQL, query, 1, err)
	}
	if err := syncFile(tmpName); err != nil {
		return 0, err
	}
	if err := os.Rename(tmpName, to); err != nil {
		return 0, fmt.Errorf("sql: %w", err)
	}
	done = true
	return n, nil
}

// syncFile makes name readable by all (CreateTemp made it 0600) and syncs it.
func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sql: %w", err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return fmt.Errorf("sql: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sql: %w", err)
	}
	return f.Close()
}

// sink writes result rows in one format.
type sink interface {
	header(cols []string) error
	row(vals []any) error
	close() error
}

type csvSink struct{ w *csv.Writer }

func (s *csvSink) header(cols []string) error { return s.w.Write(cols) }

func (s *csvSink) row(vals []any) error {
	rec := make([]string, len(vals))
	for i, v := range vals {
		if v != nil {
			rec[i] = text(v, false)
		}
	}
	return s.w.Write(rec)
}

func (s *csvSink) close() error {
	s.w.Flush()
	return s.w.Error()
}

type jsonSink struct {
	w    io.Writer
	cols []string
	keys [][]byte
	n    int
	buf  []byte
}

func (s *jsonSink) header(cols []string) error {
	for _, c := range cols {
		k, _ := json.Marshal(c)
		s.keys = append(s.keys, k)
	}
	_, err := io.WriteString(s.w, "[")
	return err
}

func (s *jsonSink) row(vals []any) error {
	b := s.buf[:0]
	if s.n > 0 {
		b = append(b, ',')
	}
	b = append(b, "\n{"...)
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, s.keys[i]...)
		b = append(b, ':')
		js, err := json.Marshal(jsonValue(v))
		if err != nil {
			return fmt.Errorf("sql: column %s: %w", s.cols[i], err)
		}
		b = append(b, js...)
	}
	b = append(b, '}')
	s.buf = b
	s.n++
	_, err := s.w.Write(b)
	return err
}

func (s *jsonSink) close() error {
	_, err := io.WriteString(s.w, "\n]\n")
	return err
}

// tableSink aligns columns, measuring widths on the first tableSample rows.
// Its cells and column names are escaped (escapeControl): a table is read
// on a terminal, which a store's text must not drive.
type tableSink struct {
	w       io.Writer
	cols    []string
	pending [][]string
	numeric []bool
	widths  []int
	flushed bool
}

func (s *tableSink) header(cols []string) error {
	s.numeric = make([]bool, len(cols))
	for i := range s.numeric {
		s.numeric[i] = true
	}
	return nil
}

func (s *tableSink) row(vals []any) error {
	cells := make([]string, len(vals))
	for i, v := range vals {
		cells[i] = escapeControl(text(v, true))
		if v != nil && !isNumber(v) {
			s.numeric[i] = false
		}
	}
	if s.flushed {
		return s.line(cells)
	}
	s.pending = append(s.pending, cells)
	if len(s.pending) >= tableSample {
		return s.flush()
	}
	return nil
}

func (s *tableSink) flush() error {
	s.flushed = true
	for i, c := range s.cols {
		s.cols[i] = escapeControl(c)
	}
	s.widths = make([]int, len(s.cols))
	for i, c := range s.cols {
		s.widths[i] = utf8.RuneCountInString(c)
	}
	for _, r := range s.pending {
		for i, c := range r {
			s.widths[i] = max(s.widths[i], utf8.RuneCountInString(c))
		}
	}
	if err := s.line(s.cols); err != nil {
		return err
	}
	rule := make([]string, len(s.cols))
	for i, w := range s.widths {
		rule[i] = strings.Repeat("-", w)
	}
	if err := s.line(rule); err != nil {
		return err
	}
	for _, r := range s.pending {
		if err := s.line(r); err != nil {
			return err
		}
	}
	s.pending = nil
	return nil
}

func (s *tableSink) line(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString("  ")
		}
		pad := max(0, s.widths[i]-utf8.RuneCountInString(c))
		if s.numeric[i] {
			b.WriteString(strings.Repeat(" ", pad))
			b.WriteString(c)
		} else {
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", pad))
			}
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(s.w, strings.TrimRight(b.String(), " \n")+"\n")
	return err
}

func (s *tableSink) close() error {
	if !s.flushed {
		return s.flush()
	}
	return nil
}

// escapeControl writes the control characters of s — C0, DEL and C1, which
// a terminal may take as commands (ESC starts its escape sequences) — and
// the bytes of s that are not UTF-8 as Go escapes: \x1b, \u009b, \xff.
func escapeControl(s string) string {
	if !strings.ContainsFunc(s, isControl) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1, r < 0x80 && isControl(r):
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case isControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// isControl reports whether r is a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }

func isNumber(v any) bool {
	switch v.(type) {
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, int, uint, float32, float64, *big.Int, duck.Decimal:
		return true
	}
	return false
}

// text renders a value as text: NULL for nil (table), floats with 6
// significant digits in tables and exactly in CSV, lists and structs as JSON.
func text(v any, table bool) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case int32, int16, int8, uint8, uint16, uint32, uint64, int, uint:
		return fmt.Sprint(x)
	case float64:
		return formatFloat(x, 64, table)
	case float32:
		return formatFloat(float64(x), 32, table)
	case *big.Int:
		return x.String()
	case duck.Decimal:
		return x.String()
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case []byte:
		return hex.EncodeToString(x)
	case duck.Interval:
		return fmt.Sprintf("%d months %d days %d us", x.Months, x.Days, x.Micros)
	}
	b, err := json.Marshal(jsonValue(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func formatFloat(f float64, bits int, table bool) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case table && f == math.Trunc(f) && math.Abs(f) < 1e15:
		return strconv.FormatFloat(f, 'f', -1, 64)
	case table:
		return strconv.FormatFloat(f, 'g', 6, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, bits)
}

// jsonValue maps a scanned DuckDB value to one encoding/json renders as JSON
// would: NaN and infinities become null (JSON has no such numbers), maps get
// string keys, decimals and huge integers stay exact numbers.
func jsonValue(v any) any {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil
		}
	case *big.Int:
		return json.Number(x.String())
	case duck.Decimal:
		return json.Number(x.String())
	case duck.Interval:
		return text(x, false)
	case []byte:
		return hex.EncodeToString(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValue(e)
		}
		return out
	case duck.Map:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[text(k, false)] = jsonValue(e)
		}
		return out
	}
	return v
}

// copyParquetObject is CopyParquet into object storage, which DuckDB does
// not write: the result goes to a local file in a temp dir, then is
// uploaded as one (store.WriteFile: whole or not at all).
func copyParquetObject(ctx context.Context, db *sql.DB, query, out string) (int64, error) {
	dir, err := store.TempDir()
	if err != nil {
		return 0, fmt.Errorf("sql: %w", err)
	}
	defer os.RemoveAll(dir)
	local := filepath.Join(dir, "result.parquet")
	n, err := CopyParquet(ctx, db, query, local)
	if err != nil {
		return 0, err
	}
	return n, store.WriteFile(ctx, out, func(w io.Writer) error {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(w, f)
		return err
	})
}
