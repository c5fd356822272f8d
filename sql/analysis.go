package sql

// The canned analyses (analysis/*.sql) answer the questions users ask of
// their rollouts; `rftpipe sql --query NAME` runs one over the view
// "experiences" and `rftpipe sql --list` lists them.

import (
	"embed"
	"fmt"
	"io/fs"
	"math"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
)

//go:embed analysis/*.sql
var analysisFiles embed.FS

// Analysis is one canned query. Its file starts with a header of "--"
// comment lines:
//
//	-- What the query answers, in one line (shown by `rftpipe sql --list`).
//	-- Further free text …
//	-- requires: col, col         columns of "experiences" the query reads
//	-- var: name = LITERAL: doc   a DuckDB variable (getvariable('name')) and its default
//	-- var: name = LITERAL in RANGE: doc
//	                              a numeric one and its valid range (schema.Range)
//	-- var: name = LITERAL integer in RANGE: doc
//	                              an integer one (a fraction is refused, not rounded)
type Analysis struct {
	Name     string   // file name without ".sql"
	Doc      string   // the first header line: what the query answers
	Requires []string // columns the query reads from the view "experiences"
	Vars     []Var    // the variables the query reads, with their defaults
	SQL      string   // the whole file, header included
}

// Var is a DuckDB variable an analysis reads with getvariable(Name).
type Var struct {
	Name    string
	Default string // a SQL literal, e.g. 0.0, 32, NULL or 'x'
	// Range, when set, makes the variable a number in that interval (or
	// NULL, where the default is NULL); CheckVars enforces it.
	Range schema.Range
	// Integer makes the number an integer.
	Integer bool
	Doc     string
}

// producedBy names the command that writes a column the bundled and generated
// stores lack, for the message about a missing column.
var producedBy = map[string]string{
	schema.Advantages:  "`rftpipe run`",
	schema.Returns:     "`rftpipe run`",
	schema.DuplicateOf: "`rftpipe run` with duplication",
}

var (
	varLine = regexp.MustCompile(`^(\w+)\s*=\s*(.+?)(?:\s+(integer))?(?:\s+in\s+([\[(][^\])]*[\])]))?\s*:\s*(.*)$`)
	ident   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Analyses returns every canned analysis, sorted by name.
func Analyses() []Analysis {
	names, err := fs.Glob(analysisFiles, "analysis/*.sql")
	if err != nil {
		panic(err) // the pattern is constant
	}
	out := make([]Analysis, 0, len(names))
	for _, n := range names {
		b, err := analysisFiles.ReadFile(n)
		if err != nil {
			panic(err) // embedded files are always readable
		}
		a, err := parseAnalysis(strings.TrimSuffix(path.Base(n), ".sql"), string(b))
		if err != nil {
			panic(err) // the tests parse every file
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupAnalysis returns the named analysis; an unknown name is bad input and
// the error lists the known ones.
func LookupAnalysis(name string) (Analysis, error) {
	all := Analyses()
	names := make([]string, len(all))
	for i, a := range all {
		if a.Name == name {
			return a, nil
		}
		names[i] = a.Name
	}
	return Analysis{}, schema.BadInputf("unknown analysis %q (known: %s; see `rftpipe sql --list`)", name, strings.Join(names, ", "))
}

// parseAnalysis reads the header of an analysis file.
func parseAnalysis(name, text string) (Analysis, error) {
	a := Analysis{Name: name, SQL: text}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "--") {
			break
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "--"))
		switch {
		case a.Doc == "":
			a.Doc = line
		case strings.HasPrefix(line, "requires:"):
			for _, c := range strings.Split(strings.TrimPrefix(line, "requires:"), ",") {
				if c = strings.TrimSpace(c); c != "" {
					a.Requires = append(a.Requires, c)
				}
			}
		case strings.HasPrefix(line, "var:"):
			m := varLine.FindStringSubmatch(strings.TrimSpace(strings.TrimPrefix(line, "var:")))
			if m == nil {
				return a, fmt.Errorf("analysis %s: bad header line %q: want \"-- var: name = LITERAL: doc\"", name, line)
			}
			v := Var{Name: m[1], Default: m[2], Integer: m[3] != "", Range: schema.Range(m[4]), Doc: m[5]}
			if err := v.Range.Valid(); err != nil {
				return a, fmt.Errorf("analysis %s: variable %s: %v", name, v.Name, err)
			}
			a.Vars = append(a.Vars, v)
		}
	}
	if a.Doc == "" {
		return a, fmt.Errorf("analysis %s: the file must start with a comment saying what it answers", name)
	}
	return a, nil
}

// Check reports, as bad input, the columns the analysis needs that are not
// among columns (the columns of the view it runs on).
func (a Analysis) Check(columns []string) error {
	var missing, hints []string
	for _, c := range a.Requires {
		if !slices.Contains(columns, c) {
			missing = append(missing, c)
			if p, ok := producedBy[c]; ok {
				hints = append(hints, fmt.Sprintf("%s is written by %s", c, p))
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	msg := fmt.Sprintf("analysis %s needs column(s) %s, which the store lacks", a.Name, strings.Join(missing, ", "))
	if len(hints) > 0 {
		msg += " (" + strings.Join(hints, "; ") + ")"
	}
	have := slices.Clone(columns)
	sort.Strings(have)
	return schema.BadInputf("%s; it has: %s", msg, strings.Join(have, ", "))
}

// CheckVars checks the values given to the analysis' variables against
// their declared ranges: a variable with a range or a numeric default takes a
// finite number inside its range, or null where its default is NULL. Errors are bad input naming the
// variable.
func (a Analysis) CheckVars(values map[string]string) error {
	for n, raw := range values {
		v, ok := a.Var(n)
		if !ok || (v.Range == schema.Finite && !isNumber(v.Default)) {
			continue // not a number variable
		}
		if strings.EqualFold(raw, "null") && strings.EqualFold(v.Default, "NULL") {
			continue
		}
		x, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return schema.BadInputf("analysis %s: --var %s=%s: want a number in %s", a.Name, n, raw, v.Range)
		}
		if v.Integer && x != math.Trunc(x) {
			return schema.BadInputf("analysis %s: --var %s=%s: want an integer in %s", a.Name, n, raw, v.Range)
		}
		if err := v.Range.Check("analysis "+a.Name+": --var "+n, x); err != nil {
			return err
		}
	}
	return nil
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// Var returns the analysis variable of that name.
func (a Analysis) Var(name string) (Var, bool) {
	for _, v := range a.Vars {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// Query returns the analysis' SQL over a view with these columns as one
// statement without its trailing semicolon, so that it can be wrapped:
// SELECT … FROM (<Query>) or COPY (<Query>) TO …. Its {{group_key}} is the
// view's GroupKey.
func (a Analysis) Query(columns []string) string {
	q := strings.TrimSuffix(strings.TrimSpace(a.SQL), ";")
	return Substitute("analysis/"+a.Name+".sql", q, map[string]string{"group_key": GroupKey(columns)})
}

// GroupKey returns the columns that key a task group (tid = batch/task) of
// a view with these columns: batch, task, preceded by the experiment where
// the view has one (an experience table), since groups never span
// experiments (as `rftpipe run` groups them).
func GroupKey(columns []string) string {
	if slices.Contains(columns, schema.Experiment) {
		return schema.Experiment + ", " + schema.Batch + ", " + schema.Task
	}
	return schema.Batch + ", " + schema.Task
}

// ValidIdent reports whether s is a plain SQL identifier (letters, digits,
// underscores; not starting with a digit): the form of view and variable names.
func ValidIdent(s string) bool { return ident.MatchString(s) }
