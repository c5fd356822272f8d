package view

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// Bounds of the SQL box.
const (
	sqlTimeout = 20 * time.Second
	sqlRows    = 1000
)

// sqlViews are the tables and views a query of the SQL box may read (and
// the view experiments of an experience table).
var sqlViews = []string{"experiences", "rejected", "rows", "groups", "steps"}

// sqlData is the SQL box's page.
type sqlData struct {
	Q      string
	Views  []string
	Result table
	More   bool
	Error  string
}

// sqlBox runs a read-only query over the views, when --allow-sql is given.
func (v *Viewer) sqlBox(w http.ResponseWriter, r *http.Request) error {
	if !v.o.AllowSQL {
		return &httpError{http.StatusForbidden, "the SQL box is off: start rftpipe view with --allow-sql"}
	}
	p, err := parseParams(r, "q")
	if err != nil {
		return err
	}
	d := sqlData{Q: p.str("q"), Views: sqlViews[:2]}
	if len(v.sources) == 1 {
		d.Views = sqlViews[:1]
	}
	d.Views = append(slices.Clone(d.Views), sqlViews[2:]...)
	if v.tableStore {
		d.Views = append(d.Views, duckdb.ExperimentsView)
	}
	if strings.TrimSpace(d.Q) == "" {
		return v.render(w, "sql", v.page("SQL", d))
	}
	ctx, cancel := context.WithTimeout(r.Context(), sqlTimeout)
	defer cancel()
	if err := v.checkReadOnly(ctx, d.Q, d.Views); err != nil {
		return err
	}
	d.Result, err = v.table(ctx, d.Q, sqlRows+1)
	if err != nil {
		if ctx.Err() != nil {
			return badRequest("the query ran past %s", sqlTimeout)
		}
		return badRequest("%s", duckdb.FirstLine(err.Error()))
	}
	if len(d.Result.Rows) > sqlRows {
		d.Result.Rows, d.More = d.Result.Rows[:sqlRows], true
	}
	return v.render(w, "sql", v.page("SQL", d))
}

// checkReadOnly refuses a query that is not one or more SELECTs reading only
// the views: DuckDB parses it (json_serialize_sql, which serializes SELECT
// statements only), and the parse tree must name no table function (which
// could read any file) and no table but the views.
func (v *Viewer) checkReadOnly(ctx context.Context, q string, views []string) error {
	var tree any
	if err := v.db.QueryRowContext(ctx, "SELECT json_serialize_sql(?::VARCHAR)", q).Scan(&tree); err != nil {
		return err
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return fmt.Errorf("view: json_serialize_sql gave %T", tree)
	}
	if e, _ := root["error"].(bool); e {
		msg, _ := root["error_message"].(string)
		return badRequest("only SELECT queries over the views are run: %s", duckdb.FirstLine(msg))
	}
	allowed := slices.Clone(views)
	if err := cteNames(root, &allowed); err != nil {
		return err
	}
	return walkTree(root, allowed)
}

// cteNames appends the names the query's WITH clauses define to names; a
// name must be a plain identifier (no dot, so no file DuckDB would read in
// its place elsewhere in the query).
func cteNames(n any, names *[]string) error {
	switch x := n.(type) {
	case map[string]any:
		if m, ok := x["cte_map"].(map[string]any); ok {
			entries, _ := m["map"].([]any)
			for _, e := range entries {
				key, _ := e.(map[string]any)["key"].(string)
				if !rsql.ValidIdent(key) {
					return badRequest("WITH %q: name a WITH query with letters, digits and _", key)
				}
				*names = append(*names, strings.ToLower(key))
			}
		}
		for _, c := range x {
			if err := cteNames(c, names); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range x {
			if err := cteNames(c, names); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkTree refuses a parse tree reading anything but the views.
func walkTree(n any, views []string) error {
	switch x := n.(type) {
	case map[string]any:
		switch x["type"] {
		case "TABLE_FUNCTION":
			return badRequest("only the views (%s) can be read: table functions are refused", strings.Join(views, ", "))
		case "BASE_TABLE": // a view, or a WITH query
			name, _ := x["table_name"].(string)
			schemaName, _ := x["schema_name"].(string)
			catalog, _ := x["catalog_name"].(string)
			if !slices.Contains(views, strings.ToLower(name)) || (schemaName != "" && schemaName != "main" && schemaName != "temp") || (catalog != "" && catalog != "memory" && catalog != "temp") {
				return badRequest("only the views (%s) can be read, not %q", strings.Join(views, ", "), name)
			}
		}
		for _, c := range x {
			if err := walkTree(c, views); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range x {
			if err := walkTree(c, views); err != nil {
				return err
			}
		}
	}
	return nil
}
