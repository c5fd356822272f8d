package table

import (
	"context"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	itable "github.com/apache/iceberg-go/table"

	"github.com/rftpipe/rftpipe/schema"
)

// Spec selects what a read of a table sees: the snapshot as of AsOf (a
// snapshot id, or a time in RFC 3339; the current one when empty), and the
// data files that can hold rows matching Where (`experiment = 'a' AND
// model_version >= 3`: comparisons of a column with a literal joined by
// AND), pruned by the experiment partition and the files' column
// statistics. Where prunes files, not rows: a file that holds a matching
// row is read whole.
type Spec struct {
	AsOf  string
	Where string
}

// ParseStore splits a store argument naming a table, DIR or
// DIR?as_of=…&where=…, into the directory and the Spec; ok is false when
// path does not name a table.
func ParseStore(path string) (dir string, s Spec, ok bool, err error) {
	dir, query, _ := strings.Cut(path, "?")
	if !IsTable(dir) {
		return "", Spec{}, false, nil
	}
	if query == "" {
		return dir, s, true, nil
	}
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "as_of":
			s.AsOf = v
		case "where":
			s.Where = v
		default:
			return "", s, true, schema.Errorf(dir, -1, "", "unknown table option %q (valid: as_of, where)", k)
		}
	}
	return dir, s, true, nil
}

// Snapshot is one commit of a table.
type Snapshot struct {
	ID         int64
	Time       time.Time
	Operation  string
	Source     string // the ingested source ("" for a compaction)
	Experiment string
	Rows       int64 // rows added
}

// Snapshots lists the table's snapshots, oldest first.
func (t *Table) Snapshots(ctx context.Context) ([]Snapshot, error) {
	tbl, err := t.load(ctx)
	if err != nil || tbl == nil {
		return nil, err
	}
	var out []Snapshot
	for _, s := range tbl.Metadata().Snapshots() {
		sn := Snapshot{ID: s.SnapshotID, Time: time.UnixMilli(s.TimestampMs).UTC()}
		if s.Summary != nil {
			sn.Operation = string(s.Summary.Operation)
			sn.Source = s.Summary.Properties["rftpipe.source"]
			sn.Experiment = s.Summary.Properties["rftpipe.experiment"]
			sn.Rows, _ = strconv.ParseInt(s.Summary.Properties["added-records"], 10, 64)
		}
		out = append(out, sn)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// Files returns the data files (absolute paths, sorted) of the snapshot s
// selects, pruned by its Where.
func (t *Table) Files(ctx context.Context, s Spec) ([]string, error) {
	tbl, err := t.load(ctx)
	if err != nil {
		return nil, err
	}
	if tbl == nil {
		return nil, schema.Errorf(t.Dir, -1, "", "empty table: nothing ingested yet")
	}
	var opts []itable.ScanOption
	if s.AsOf != "" {
		id, err := t.asOf(tbl, s.AsOf)
		if err != nil {
			return nil, err
		}
		opts = append(opts, itable.WithSnapshotID(id))
	}
	if s.Where != "" {
		e, err := parseWhere(s.Where)
		if err != nil {
			return nil, schema.Errorf(t.Dir, -1, "", "where %q: %v", s.Where, err)
		}
		opts = append(opts, itable.WithRowFilter(e))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return nil, schema.Errorf(t.Dir, -1, "", "cannot plan the read: %v", err)
	}
	files := make([]string, 0, len(tasks))
	for _, task := range tasks {
		files = append(files, strings.TrimPrefix(task.File.FilePath(), "file://"))
	}
	sort.Strings(files)
	return files, nil
}

// asOf resolves a snapshot id or a time to a snapshot id.
func (t *Table) asOf(tbl *itable.Table, v string) (int64, error) {
	if id, err := strconv.ParseInt(v, 10, 64); err == nil {
		if tbl.SnapshotByID(id) == nil {
			return 0, schema.Errorf(t.Dir, -1, "", "as_of: no snapshot %d (expired, or never one)", id)
		}
		return id, nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, schema.Errorf(t.Dir, -1, "", "as_of %q: want a snapshot id or an RFC 3339 time (2026-01-02T03:04:05Z)", v)
	}
	s := tbl.SnapshotAsOf(at.UnixMilli(), true)
	if s == nil {
		return 0, schema.Errorf(t.Dir, -1, "", "as_of %s: the table has no snapshot that old", v)
	}
	return s.SnapshotID, nil
}

var comparison = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<>|!=|=|<|>)\s*('(?:[^']|'')*'|-?[0-9]+(?:\.[0-9]+)?)\s*$`)

var and = regexp.MustCompile(`(?i)\s+AND\s+`)

// parseWhere parses comparisons of a column with a literal joined by AND.
func parseWhere(where string) (iceberg.BooleanExpression, error) {
	var terms []iceberg.BooleanExpression
	for _, part := range and.Split(strings.TrimSpace(where), -1) {
		m := comparison.FindStringSubmatch(part)
		if m == nil {
			return nil, schema.BadInputf("cannot parse %q: want COLUMN OP LITERAL (OP one of = != < <= > >=, a literal a number or 'text') joined by AND", part)
		}
		terms = append(terms, predicate(iceberg.Reference(m[1]), m[2], m[3]))
	}
	if len(terms) == 1 {
		return terms[0], nil
	}
	return iceberg.NewAnd(terms[0], terms[1], terms[2:]...), nil
}

// predicate builds the comparison of ref with the literal lit.
func predicate(ref iceberg.UnboundTerm, op, lit string) iceberg.BooleanExpression {
	if strings.HasPrefix(lit, "'") {
		return compare(ref, op, strings.ReplaceAll(lit[1:len(lit)-1], "''", "'"))
	}
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return compare(ref, op, n)
	}
	f, _ := strconv.ParseFloat(lit, 64)
	return compare(ref, op, f)
}

func compare[T iceberg.LiteralType](ref iceberg.UnboundTerm, op string, v T) iceberg.BooleanExpression {
	switch op {
	case "=":
		return iceberg.EqualTo(ref, v)
	case "!=", "<>":
		return iceberg.NotEqualTo(ref, v)
	case "<":
		return iceberg.LessThan(ref, v)
	case "<=":
		return iceberg.LessThanEqual(ref, v)
	case ">":
		return iceberg.GreaterThan(ref, v)
	}
	return iceberg.GreaterThanEqual(ref, v)
}
