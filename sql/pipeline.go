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
	q := string(b)
	for k, v := range vars {
		q = strings.ReplaceAll(q, "{{"+k+"}}", v)
	}
	if i := strings.Index(q, "{{"); i >= 0 {
		panic("sql: pipeline/" + name + ".sql: unreplaced placeholder at " + q[i:min(len(q), i+30)])
	}
	return q
}
