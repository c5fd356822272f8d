package duckdb

import (
	"context"
	"database/sql"
	"sort"
	"strconv"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	rsql "github.com/rftpipe/rftpipe/sql"
)

// Literal renders a value given on the command line as a SQL literal:
// numbers, true, false and null as they are, anything else as a string.
func Literal(v string) string {
	switch strings.ToLower(v) {
	case "null", "true", "false":
		return strings.ToUpper(v)
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "xXnN_") {
		return v
	}
	return QuoteString(v)
}

// SetVars sets DuckDB variables (SET VARIABLE name = literal), which SQL
// reads with getvariable('name'). Values are SQL literals (see Literal).
func SetVars(ctx context.Context, db *sql.DB, vars map[string]string) error {
	names := make([]string, 0, len(vars))
	for n := range vars {
		if !rsql.ValidIdent(n) {
			return schema.BadInputf("bad variable name %q: want letters, digits and _", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		q := "SET VARIABLE " + n + " = " + vars[n]
		if _, err := db.ExecContext(ctx, q); err != nil {
			return queryError(ctx, db, q, err)
		}
	}
	return nil
}

// PrepareAnalysis readies db to run a over the view DefaultView and returns
// the query to run (a.Query over the view's columns): it checks that the view
// has the columns a reads and sets a's variables, to the literal in values
// where one is given (see Literal) and to their defaults otherwise. A value
// for a variable a does not read is bad input.
func PrepareAnalysis(ctx context.Context, db *sql.DB, a rsql.Analysis, values map[string]string) (string, error) {
	cols, err := Columns(ctx, db, DefaultView)
	if err != nil {
		return "", err
	}
	if err := a.Check(cols); err != nil {
		return "", err
	}
	vars := map[string]string{}
	for _, v := range a.Vars {
		vars[v.Name] = v.Default
	}
	for n, v := range values {
		if _, ok := a.Var(n); !ok {
			declared := make([]string, len(a.Vars))
			for i, d := range a.Vars {
				declared[i] = d.Name
			}
			if len(declared) == 0 {
				return "", schema.BadInputf("analysis %s takes no variables (got %s)", a.Name, n)
			}
			return "", schema.BadInputf("analysis %s has no variable %s (it has: %s)", a.Name, n, strings.Join(declared, ", "))
		}
		vars[n] = Literal(v)
	}
	if err := SetVars(ctx, db, vars); err != nil {
		return "", err
	}
	return a.Query(cols), nil
}
