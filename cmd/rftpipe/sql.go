package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
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
	out := c.String("out")
	req := duckdb.Request{Query: query, Analysis: analysis, File: c.String("file"), Vars: vars,
		Stores: c.Generic("store").(*multiFlag).values, Out: out, Format: c.String("format"),
		Threads: c.Int("threads"), MemoryLimit: c.String("memory-limit")}
	req.Cache.Dir, req.Cache.Limit = cacheOf(c)
	n, err := duckdb.Run(c.Context, req, c.App.Writer, func(w string) { printWarnings(c, "sql", []string{w}) })
	if err != nil {
		return sqlFailure(c, err)
	}
	if out != "" {
		fmt.Fprintf(c.App.ErrWriter, "sql: wrote %d rows to %s\n", n, schema.Redact(out))
	}
	return nil
}

// sqlQuery returns the query to run, the QUERY argument (- for stdin) or
// --file's, or --query's analysis (which duckdb.Run builds for the store).
func sqlQuery(c *cli.Context) (string, *rsql.Analysis, error) {
	given := 0
	for _, set := range []bool{c.NArg() > 0, c.IsSet("file"), c.IsSet("query")} {
		if set {
			given++
		}
	}
	if given != 1 {
		return "", nil, schema.Usagef("sql takes exactly one of QUERY, --file F.sql and --query NAME (or --list)")
	}
	switch {
	case c.NArg() > 1:
		return "", nil, schema.Usagef("sql takes one QUERY; quote it (got %d arguments)", c.NArg())
	case c.NArg() == 1 && c.Args().First() == "-":
		b, err := io.ReadAll(os.Stdin)
		return string(b), nil, err
	case c.NArg() == 1:
		return c.Args().First(), nil, nil
	case c.IsSet("file"):
		b, err := os.ReadFile(c.String("file"))
		if err != nil {
			return "", nil, schema.Usagef("--file: %v", err)
		}
		return string(b), nil, nil
	}
	a, err := rsql.LookupAnalysis(c.String("query"))
	if err != nil {
		return "", nil, err
	}
	return "", &a, nil
}

// sqlFailure prints a SQL error as DuckDB renders it — over several lines,
// with a caret under the position — and exits 2; other errors pass through.
func sqlFailure(c *cli.Context, err error) error {
	var qe interface{ Detail() string }
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
			return nil, schema.Usagef("--var %s: want NAME=VALUE", a)
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

func memoryLimitFlag() cli.Flag {
	return &cli.StringFlag{Name: "memory-limit", Usage: "DuckDB memory limit, e.g. 4GB (default: DuckDB's, 80% of RAM)"}
}

func cacheFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "cache-dir", Usage: "keep local copies of the s3:// Parquet objects a query reads in `DIR`, reused while their ETag holds (default: none, read into the temp dir each time)"},
		intFlag(&cli.IntFlag{Name: "cache-limit", Value: 10240, Usage: "remove the least recently used copies beyond `MB` megabytes from --cache-dir"}, "[1,1048576]"),
	}
}

// cacheOf returns the cache directory and its limit in bytes the flags
// set ("": none).
func cacheOf(c *cli.Context) (dir string, limit int64) {
	return c.String("cache-dir"), int64(c.Int("cache-limit")) << 20
}
