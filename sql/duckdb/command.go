package duckdb

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/store"
	rsql "github.com/rftpipe/rftpipe/sql"
)

// Request is one run of `rftpipe sql`: a query (or a canned analysis)
// over stores, its result written to Out or to the command's output.
type Request struct {
	// Query is the SQL to run; Analysis, when set, the canned analysis to
	// run instead (its variables checked and defaulted, its query built for
	// the store's columns).
	Query    string
	Analysis *rsql.Analysis
	// File is the file the query was read from (a read, which Out may not
	// replace); "" when none.
	File string
	// Vars are the DuckDB variables NAME → VALUE as given.
	Vars map[string]string
	// Stores are the --store arguments ([NAME=]PATH); the first is also
	// the view experiences.
	Stores []string
	// Out is the file the result is written to, atomically ("" the
	// command's output); Format the output format ("": from Out's
	// extension, else table).
	Out, Format string
	// Threads and MemoryLimit configure DuckDB (Options).
	Threads     int
	MemoryLimit string
	// Cache, when its Dir is set, keeps local copies of the stores in
	// object storage (Store.Cache).
	Cache objstore.Cache
}

// Run runs the request: its output checked against every store it reads,
// the stores attached as views (warnings about them passed to warn), the
// variables set, the result written. It returns the rows written to Out.
// A query DuckDB refuses is a *QueryError.
func Run(ctx context.Context, req Request, stdout io.Writer, warn func(string)) (int64, error) {
	if req.Analysis != nil {
		if err := req.Analysis.CheckVars(req.Vars); err != nil {
			return 0, err
		}
	}
	format := FormatOf(req.Out)
	if req.Format != "" {
		var err error
		if format, err = ParseFormat(req.Format); err != nil {
			return 0, err
		}
	}
	if format == Parquet && req.Out == "" {
		return 0, schema.Usagef("--format parquet needs --out FILE")
	}
	stores, err := parseStores(&req)
	if err != nil {
		return 0, err
	}
	if err := checkOut(ctx, req, stores); err != nil {
		return 0, err
	}
	if err := CheckWrites(req.Query, stores); err != nil {
		return 0, err
	}
	db, cleanup, err := open(ctx, req, stores, warn)
	if err != nil {
		return 0, err
	}
	defer cleanup()
	if req.Query, err = setVars(ctx, db, req); err != nil {
		return 0, err
	}
	n, err := write(ctx, db, req, format, stdout)
	if err != nil {
		paths := make([]string, len(stores))
		for i, s := range stores {
			paths[i] = s.Path
		}
		return 0, Located(ctx, err, paths...)
	}
	return n, nil
}

// parseStores parses the request's --store arguments.
func parseStores(req *Request) ([]Store, error) {
	var stores []Store
	for _, a := range req.Stores {
		s, err := ParseStore(a)
		if err != nil {
			return nil, err
		}
		s.Cache = req.Cache.OrNil()
		stores = append(stores, s)
	}
	if req.Analysis != nil && len(stores) == 0 {
		return nil, schema.Usagef("--query %s needs a --store to run on", req.Analysis.Name)
	}
	return stores, nil
}

// checkOut checks the output file against the query file and every store
// (store.CheckOutputs) and that its directory exists.
func checkOut(ctx context.Context, req Request, stores []Store) error {
	if req.Out == "" {
		return nil
	}
	reads := []string{req.File}
	for _, s := range stores {
		reads = append(reads, s.Path)
	}
	if err := store.CheckOutputs(ctx, reads, []store.Output{{Flag: "--out", Path: req.Out}}, false); err != nil {
		return err
	}
	if dir := filepath.Dir(req.Out); !objstore.IsURL(req.Out) && !isDir(dir) {
		return schema.Errorf(req.Out, -1, "", "output directory %s does not exist", dir)
	}
	return nil
}

// isDir reports whether path is an existing directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// open starts DuckDB with the stores attached (their conversion's
// warnings, a Trinity buffer's orphan rows, passed to warn); cleanup
// closes it and removes the converted stores.
func open(ctx context.Context, req Request, stores []Store, warn func(string)) (*sql.DB, func(), error) {
	tmp, err := store.TempDir()
	if err != nil {
		return nil, nil, err
	}
	db, err := Open(Options{Threads: req.Threads, MemoryLimit: req.MemoryLimit, TempDir: tmp})
	if err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	cleanup := func() {
		db.Close()
		os.RemoveAll(tmp)
	}
	warnings, err := Attach(ctx, db, stores, tmp)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	for _, w := range warnings {
		warn(w)
	}
	return db, cleanup, nil
}

// setVars sets the request's variables, an analysis's with its defaults,
// else each value as a literal, and returns the query to run: the
// analysis' over the attached stores, else req.Query.
func setVars(ctx context.Context, db *sql.DB, req Request) (string, error) {
	if req.Analysis != nil {
		return PrepareAnalysis(ctx, db, *req.Analysis, req.Vars)
	}
	literals := map[string]string{}
	for n, v := range req.Vars {
		literals[n] = Literal(v)
	}
	return req.Query, SetVars(ctx, db, literals)
}

// write runs the query and writes its result in format: to Out (Parquet by
// DuckDB's COPY, the others through a temp file and a rename) or to
// stdout.
func write(ctx context.Context, db *sql.DB, req Request, format Format, stdout io.Writer) (int64, error) {
	switch {
	case format == Parquet:
		return CopyParquet(ctx, db, req.Query, req.Out)
	case req.Out != "":
		var n int64
		err := store.WriteFile(ctx, req.Out, func(w io.Writer) error {
			var err error
			n, err = Write(ctx, db, req.Query, format, w)
			return err
		})
		return n, err
	}
	_, err := Write(ctx, db, req.Query, format, stdout)
	return 0, err
}
