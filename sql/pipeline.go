// Package sql holds rftpipe's SQL as real .sql files embedded in the binary.
// DuckDB runs them over the input store itself (read_parquet), so only small
// scalar results cross into Go.
package sql

import (
	"embed"
	"strings"
)

//go:embed pipeline/*.sql
var pipelineFiles embed.FS

// Pipeline returns pipeline/NAME.sql, the SQL of the advantage pipeline's
// grouping pass, with every {{key}} replaced by vars[key] (already quoted SQL:
// a literal, a list, an identifier). It panics on an unknown name or an
// unreplaced placeholder: the files are part of the binary, so either is a
// programming error.
func Pipeline(name string, vars map[string]string) string {
	b, err := pipelineFiles.ReadFile("pipeline/" + name + ".sql")
	if err != nil {
		panic("sql: no pipeline query " + name)
	}
	return Substitute("pipeline/"+name+".sql", string(b), vars)
}

// Substitute replaces every {{key}} of the template q (the embedded file
// named file) in one pass, so that text coming from vars (a quoted path may
// hold "{{") is never read as a placeholder. An unknown key or an
// unterminated placeholder panics (see Pipeline).
func Substitute(file, q string, vars map[string]string) string {
	var b strings.Builder
	for {
		i := strings.Index(q, "{{")
		if i < 0 {
			b.WriteString(q)
			return b.String()
		}
		j := strings.Index(q[i:], "}}")
		if j < 0 {
			panic("sql: " + file + ": unterminated placeholder at " + q[i:min(len(q), i+30)])
		}
		v, ok := vars[q[i+2:i+j]]
		if !ok {
			panic("sql: " + file + ": unreplaced placeholder " + q[i:i+j+2])
		}
		b.WriteString(q[:i])
		b.WriteString(v)
		q = q[i+j+2:]
	}
}
