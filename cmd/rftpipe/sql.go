package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

func sqlCommand() *cli.Command {
	return &cli.Command{
		Name:  "sql",
		Usage: "run SQL (DuckDB) over experience stores: a query, a file or a canned analysis",
		Description: "The first --store is the view experiences (and its NAME, if given); the others are views\n" +
			"named by their NAME. A store is a Parquet file, a directory of Parquet files, a glob or a Trinity\n" +
			"buffer URL (sqlite:///F.db?table=T, postgresql://HOST/DB?table=T); JSONL, Arrow and buffer stores\n" +
			"are converted to a temporary Parquet file first. QUERY - reads the query\n" +
			"from stdin. Variables (--var) are read in SQL with getvariable('name').\n\n" +
			"   rftpipe sql \"SELECT task, count(*) FROM experiences GROUP BY task\" --store fixtures/stores/demo.parquet\n" +
			"   rftpipe sql --query group_filter --var std_threshold=0.1 --store out/run.parquet\n" +
			"   rftpipe sql --list",
		ArgsUsage: "[QUERY]",
		Flags: append([]cli.Flag{
			&cli.GenericFlag{Name: "store", Value: &multiFlag{}, Usage: "`[NAME=]PATH` of a store: file, directory, glob or Trinity buffer URL (repeatable); the first is also the view experiences"},
			&cli.StringFlag{Name: "file", Aliases: []string{"f"}, Usage: "read the query from `F.sql`"},
			&cli.StringFlag{Name: "query", Aliases: []string{"q"}, Usage: "run the canned analysis `NAME` (see --list)"},
			&cli.BoolFlag{Name: "list", Usage: "list the canned analyses and their variables"},
			&cli.GenericFlag{Name: "var", Value: &multiFlag{}, Usage: "set the DuckDB variable `NAME=VALUE` (repeatable; numbers, true, false, null or text)"},
			&cli.StringFlag{Name: "format", Usage: "output format: table | csv | json | parquet (default: from --out's extension, else table)"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Usage: "write the result to `FILE` (atomically) instead of stdout"},
			threadsFlag(),
			memoryLimitFlag(),
		}, cacheFlags()...),
		Action: runSQL,
	}
}

func runSQL(c *cli.Context) error {
	if c.Bool("list") {
		return listAnalyses(c.App.Writer)
	}
	query, analysis, err := sqlQuery(c)
	if err != nil {
		return err
	}
	vars, err := parseVars(c.Generic("var").(*multiFlag).values)
	if err != nil {
		return err
	}
	if analysis != nil {
		if err := analysis.CheckVars(vars); err != nil {
			return err
		}
	}
	out := c.String("out")
	format := duckdb.FormatOf(out)
	if f := c.String("format"); f != "" {
		if format, err = duckdb.ParseFormat(f); err != nil {
			return err
		}
	}
	if format == duckdb.Parquet && out == "" {
		return usagef("--format parquet needs --out FILE")
	}
	var stores []duckdb.Store
	for _, a := range c.Generic("store").(*multiFlag).values {
		s, err := duckdb.ParseStore(a)
		if err != nil {
			return err
		}
		s.Cache = cacheOf(c)
		stores = append(stores, s)
	}
	if analysis != nil && len(stores) == 0 {
		return usagef("--query %s needs a --store to run on", analysis.Name)
	}
	if out != "" {
		reads := []string{c.String("file")}
		for _, s := range stores {
			reads = append(reads, s.Path)
		}
		if err := store.CheckOutputs(c.Context, reads, []store.Output{{Flag: "--out", Path: out}}, false); err != nil {
			return err
		}
		if dir := filepath.Dir(out); !objstore.IsURL(out) && !isDir(dir) {
			return schema.Errorf(out, -1, "", "output directory %s does not exist", dir)
		}
	}

	if err := duckdb.CheckWrites(query, stores); err != nil {
		return err
	}
	db, cleanup, err := openSQL(c, stores)
	if err != nil {
		return err
	}
	defer cleanup()
	if analysis != nil {
		err = duckdb.PrepareAnalysis(c.Context, db, *analysis, vars)
	} else {
		literals := map[string]string{}
		for n, v := range vars {
			literals[n] = duckdb.Literal(v)
		}
		err = duckdb.SetVars(c.Context, db, literals)
	}
	if err != nil {
		return sqlFailure(c, err)
	}

	var n int64
	switch {
	case format == duckdb.Parquet:
		n, err = duckdb.CopyParquet(c.Context, db, query, out)
	case out != "":
		err = store.WriteFile(out, func(w io.Writer) error {
			var err error
			n, err = duckdb.Write(c.Context, db, query, format, w)
			return err
		})
	default:
		_, err = duckdb.Write(c.Context, db, query, format, c.App.Writer)
	}
	if err != nil {
		paths := make([]string, len(stores))
		for i, s := range stores {
			paths[i] = s.Path
		}
		return sqlFailure(c, duckdb.Located(c.Context, err, paths...))
	}
	if out != "" {
		fmt.Fprintf(c.App.ErrWriter, "sql: wrote %d rows to %s\n", n, schema.Redact(out))
	}
	return nil
}

// sqlQuery returns the query to run: the QUERY argument (- for stdin),
// --file or --query's analysis (then also returned).
func sqlQuery(c *cli.Context) (string, *rsql.Analysis, error) {
	given := 0
	for _, set := range []bool{c.NArg() > 0, c.IsSet("file"), c.IsSet("query")} {
		if set {
			given++
		}
	}
	if given != 1 {
		return "", nil, usagef("sql takes exactly one of QUERY, --file F.sql and --query NAME (or --list)")
	}
	switch {
	case c.NArg() > 1:
		return "", nil, usagef("sql takes one QUERY; quote it (got %d arguments)", c.NArg())
	case c.NArg() == 1 && c.Args().First() == "-":
		b, err := io.ReadAll(os.Stdin)
		return string(b), nil, err
	case c.NArg() == 1:
		return c.Args().First(), nil, nil
	case c.IsSet("file"):
		b, err := os.ReadFile(c.String("file"))
		if err != nil {
			return "", nil, usagef("--file: %v", err)
		}
		return string(b), nil, nil
	}
	a, err := rsql.LookupAnalysis(c.String("query"))
	if err != nil {
		return "", nil, err
	}
	return a.Query(), &a, nil
}

// openSQL starts DuckDB with the stores attached and prints the warnings of
// their conversion (a Trinity buffer's orphan rows); cleanup closes it and
// removes the converted stores.
func openSQL(c *cli.Context, stores []duckdb.Store) (*sql.DB, func(), error) {
	tmp, err := store.TempDir()
	if err != nil {
		return nil, nil, err
	}
	db, err := duckdb.Open(duckdb.Options{Threads: c.Int("threads"), MemoryLimit: c.String("memory-limit"), TempDir: tmp})
	if err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	cleanup := func() {
		db.Close()
		os.RemoveAll(tmp)
	}
	warnings, err := duckdb.Attach(c.Context, db, stores, tmp)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	printWarnings(c, "sql", warnings)
	return db, cleanup, nil
}

// sqlFailure prints a SQL error as DuckDB renders it — over several lines,
// with a caret under the position — and exits 2; other errors pass through.
func sqlFailure(c *cli.Context, err error) error {
	var qe *duckdb.QueryError
	if !errors.As(err, &qe) {
		return err
	}
	fmt.Fprintln(c.App.ErrWriter, "rftpipe: "+qe.Detail())
	return exitCode(exitBadInput)
}

func listAnalyses(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range rsql.Analyses() {
		fmt.Fprintf(tw, "%s\t%s\n", a.Name, a.Doc)
		for _, v := range a.Vars {
			rng := ""
			if v.Integer {
				rng = " integer"
			}
			if v.Range != "" {
				rng += " in " + v.Range.String()
			}
			fmt.Fprintf(tw, "\t  --var %s=%s%s: %s\n", v.Name, v.Default, rng, v.Doc)
		}
	}
	return tw.Flush()
}

func parseVars(args []string) (map[string]string, error) {
	vars := map[string]string{}
	for _, a := range args {
		n, v, ok := strings.Cut(a, "=")
		if !ok || !rsql.ValidIdent(n) {
			return nil, usagef("--var %s: want NAME=VALUE", a)
		}
		vars[n] = v
	}
	return vars, nil
}

// multiFlag collects the values of a repeatable flag as given (urfave/cli's
// slice flags would also split them at commas, which paths and SQL values
// may hold).
type multiFlag struct{ values []string }

func (m *multiFlag) Set(v string) error {
	m.values = append(m.values, v)
	return nil
}

func (m *multiFlag) String() string { return strings.Join(m.values, " ") }

func threadsFlag() cli.Flag {
	return intFlag(&cli.IntFlag{Name: "threads", Usage: "DuckDB worker threads (0: one per CPU)"}, "[0,4096]")
}

// cacheFlags set the local cache of the objects (s3://) a query reads.
func cacheFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cache-dir", Usage: "keep local copies of the s3:// Parquet objects a query reads in `DIR`, reused while their ETag holds (default: none, read into the temp dir each time)"},
		intFlag(&cli.IntFlag{Name: "cache-limit", Value: 10240, Usage: "remove the least recently used copies beyond `MB` megabytes from --cache-dir"}, "[1,1048576]"),
	}
}

// cacheOf returns the cache the flags set, nil when none.
func cacheOf(c *cli.Context) *objstore.Cache {
	if c.String("cache-dir") == "" {
		return nil
	}
	return &objstore.Cache{Dir: c.String("cache-dir"), Limit: int64(c.Int("cache-limit")) << 20}
}

func memoryLimitFlag() cli.Flag {
	return &cli.StringFlag{Name: "memory-limit", Usage: "DuckDB memory limit, e.g. 4GB (default: DuckDB's, 80% of RAM)"}
}

// isDir reports whether path is an existing directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
