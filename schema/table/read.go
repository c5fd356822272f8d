package table

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rftpipe/rftpipe/schema"
)

// Spec selects what a read of a table sees: the snapshot as of AsOf (a
// snapshot number, or a time in RFC 3339; the current one when empty), and
// the data files that can hold rows matching Where (`experiment = 'a' AND
// model_version >= 3`: comparisons of experiment or model_version with a
// literal, joined by AND), pruned by the experiment partition and the
// files' model_version range. Where prunes files, not rows: a file that
// holds a matching row is read whole. Since, when > 0, makes the read an
// increment: the rows appended after that snapshot (see Increment).
type Spec struct {
	AsOf  string
	Where string
	Since int64
}

// ParseStore splits a store argument naming a table, DIR or
// DIR?as_of=…&since=…&where=…, into the directory and the Spec; ok is false when
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
		case "since":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return "", s, true, schema.Errorf(dir, -1, "", "since %q: want a snapshot number", v)
			}
			s.Since = n
		default:
			return "", s, true, schema.Errorf(dir, -1, "", "unknown table option %q (valid: as_of, since, where)", k)
		}
	}
	return dir, s, true, nil
}

// Files returns the data files of the snapshot s selects, pruned by its
// Where, in the order they were committed: a table reads as its sources
// were ingested. With s.Since, they are the files appended after it
// (Since).
func (t *Table) Files(s Spec) ([]string, error) {
	es, err := t.entries()
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, schema.Errorf(t.Dir, -1, "", "empty table: nothing ingested yet")
	}
	if s.Since > 0 {
		added, _, err := t.increment(es, s)
		return t.paths(added), err
	}
	n := int64(-1)
	if s.AsOf != "" {
		if n, err = t.asOf(es, s.AsOf); err != nil {
			return nil, err
		}
	}
	keep := func(DataFile) bool { return true }
	if s.Where != "" {
		if keep, err = parseWhere(s.Where); err != nil {
			return nil, schema.Errorf(t.Dir, -1, "", "where %q: %v", s.Where, err)
		}
	}
	st := replay(es, n)
	var files []DataFile
	for _, p := range st.order {
		if keep(st.files[p]) {
			files = append(files, st.files[p])
		}
	}
	return t.paths(files), nil
}

// paths returns the paths of data files.
func (t *Table) paths(files []DataFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, t.Path(f))
	}
	return out
}

// Path returns the path of a data file.
func (t *Table) Path(f DataFile) string {
	return filepath.Join(t.Dir, filepath.FromSlash(f.Path))
}

// asOf resolves a snapshot number or a time to a snapshot that is not
// expired.
func (t *Table) asOf(es []entry, v string) (int64, error) {
	n, err := t.snapshotAt(es, v)
	if err != nil {
		return 0, err
	}
	if exp := replay(es, -1).expired; n < exp {
		return 0, schema.Errorf(t.Dir, -1, "", "as_of %s: snapshot %d is expired (the oldest kept is %d)", v, n, exp)
	}
	return n, nil
}

// snapshotAt resolves a snapshot number or a time to a snapshot number.
func (t *Table) snapshotAt(es []entry, v string) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 1 || n > int64(len(es)) {
			return 0, schema.Errorf(t.Dir, -1, "", "as_of: no snapshot %d (the table has 1 to %d)", n, len(es))
		}
		return n, nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, schema.Errorf(t.Dir, -1, "", "as_of %q: want a snapshot number or an RFC 3339 time (2026-01-02T03:04:05Z)", v)
	}
	n := int64(0)
	for _, e := range es {
		if !e.Time.After(at) {
			n = e.Snapshot
		}
	}
	if n == 0 {
		return 0, schema.Errorf(t.Dir, -1, "", "as_of %s: the table has no snapshot that old", v)
	}
	return n, nil
}

var (
	comparison = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<>|!=|=|<|>)\s*('(?:[^']|'')*'|-?[0-9]+)\s*$`)
	and        = regexp.MustCompile(`(?i)\s+AND\s+`)
)

// parseWhere parses comparisons joined by AND into a test of a data file:
// whether it can hold a matching row.
func parseWhere(where string) (func(DataFile) bool, error) {
	var tests []func(DataFile) bool
	for _, part := range and.Split(strings.TrimSpace(where), -1) {
		m := comparison.FindStringSubmatch(part)
		if m == nil {
			return nil, schema.BadInputf("cannot parse %q: want COLUMN OP LITERAL (OP one of = != < <= > >=, a literal an integer or 'text') joined by AND", part)
		}
		col, op, lit := m[1], m[2], m[3]
		switch col {
		case ExperimentColumn:
			if !strings.HasPrefix(lit, "'") {
				return nil, schema.BadInputf("%s: compare with 'text'", col)
			}
			v := strings.ReplaceAll(lit[1:len(lit)-1], "''", "'")
			tests = append(tests, func(f DataFile) bool { return holds(op, strings.Compare(f.Experiment, v)) })
		case VersionColumn:
			v, err := strconv.ParseInt(lit, 10, 64)
			if err != nil {
				return nil, schema.BadInputf("%s: compare with an integer", col)
			}
			tests = append(tests, func(f DataFile) bool { return mayHold(op, f.MinVersion, f.MaxVersion, v) })
		default:
			return nil, schema.BadInputf("column %q: a table prunes its files by %s and %s only", col, ExperimentColumn, VersionColumn)
		}
	}
	return func(f DataFile) bool {
		for _, t := range tests {
			if !t(f) {
				return false
			}
		}
		return true
	}, nil
}

// holds reports whether a comparison whose sides compare as c (-1, 0, 1)
// is true.
func holds(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "!=", "<>":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

// mayHold reports whether a file whose values lie in [lo, hi] can hold one
// for which `value OP v` is true; a file without a range (no non-null
// value) holds none.
func mayHold(op string, lo, hi *int64, v int64) bool {
	if lo == nil || hi == nil {
		return false
	}
	switch op {
	case "=":
		return *lo <= v && v <= *hi
	case "!=", "<>":
		return *lo != v || *hi != v
	case "<":
		return *lo < v
	case "<=":
		return *lo <= v
	case ">":
		return *hi > v
	}
	return *hi >= v
}

// ConfigFields are the key fields of a Trinity-RFT config a table records
// for an experiment: the column of the experiments view, and the field's
// path in the YAML.
var ConfigFields = []struct{ Column, Path string }{
	{"algorithm_type", "algorithm.algorithm_type"},
	{"repeat_times", "algorithm.repeat_times"},
	{"learning_rate", "algorithm.optimizer.lr"},
	{"model_path", "model.model_path"},
	{"project", "project"},
	{"group", "group"},
	{"name", "name"},
}

// Configs returns the recorded config fields of each experiment (by
// ConfigFields column) as of the snapshot s selects.
func (t *Table) Configs(s Spec) (map[string]map[string]string, error) {
	es, err := t.entries()
	if err != nil {
		return nil, err
	}
	n := int64(-1)
	if s.AsOf != "" {
		if n, err = t.asOf(es, s.AsOf); err != nil {
			return nil, err
		}
	}
	return replay(es, n).config, nil
}
