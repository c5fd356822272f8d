// Package view serves a read-only web page over an experience store: the
// overview's key numbers and curves per explore step, each step's groups
// (kept or dropped, and why), a group's rollouts side by side, a rollout's
// text and tokens coloured by a per-token column, a search over responses
// and, when allowed, an SQL box.
//
// The store (and its --rejected store) is indexed once in DuckDB: the
// table rows holds every experience's scalars, groups, steps, summary and
// reasons their summaries (rows_create.sql and the other *_create.sql), so
// that later pages query small tables. A first pass builds the summaries
// from the stores' scalar columns, reading no list and storing no row; the
// viewer serves once it is done. A second pass, in the background, fills
// rows, with each row's advantage and response length from its per-token
// lists, and builds the summaries again with them; meanwhile the pages say
// so, and those reading rows wait for it. A rollout's text and lists are
// read from its Parquet file by row number when its page is shown. Every query is
// an embedded .sql file; values reach DuckDB as parameters, and the few
// {{placeholders}} are filled from fixed lists (sort columns, column names
// of the store, its file names).
package view

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

//go:embed *.sql
var queryFiles embed.FS

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed assets
var assetFiles embed.FS

// Options configures a viewer.
type Options struct {
	Store       string // the experience store: file, directory, glob or Trinity buffer URL
	Rejected    string // optional: the rejected-rows store of the run that wrote Store (run --rejected)
	AllowSQL    bool   // serve the SQL box (read-only queries over the views)
	Threads     int    // DuckDB threads (0: one per CPU)
	MemoryLimit string // DuckDB memory limit (default: DuckDB's)
	// Log, if set, receives one line per failed request (a 5xx) and the
	// failure of the index's second pass.
	Log *log.Logger

	hold       <-chan struct{} // tests: the index's second pass starts once it is closed
	searchRows int64           // tests: rollouts a search page reads at most (0: searchRows)
}

// Viewer is an indexed store and the HTTP handler serving it.
type Viewer struct {
	o           Options
	db          *sql.DB
	tmp         string
	sources     []source
	n           int64 // experiences in the index (both sources)
	searchRows  int64 // rollouts a search page reads at most
	pass        *secondPass
	tableStore  bool     // the store is an experience table: the view experiments is its experiments'
	experiments []string // the experiments in the index, sorted ("" for rows without one)
	expTable    table    // the overview's table of the experiments, when there are several
	warns       []string
	tmpl        *template.Template
	handler     http.Handler
}

// source is one store the viewer reads: the store (0) or its rejected rows (1).
type source struct {
	name  string            // as shown: the path, redacted
	path  string            // as given
	files []string          // its Parquet files (converted, when it was not Parquet)
	first []int64           // per file, the id of its row 0 (its rows' ids are consecutive)
	rows  []int64           // per file, its rows
	cols  map[string]string // column name -> DuckDB type
	order []string          // column names in store order
}

// has reports whether the source has every named column.
func (s source) has(cols ...string) bool {
	for _, c := range cols {
		if _, ok := s.cols[c]; !ok {
			return false
		}
	}
	return true
}

// Open indexes the store (and the rejected store) and returns the viewer,
// the index's second pass running in the background (Wait waits for it);
// Close releases it. Bad stores are bad input naming the store.
func Open(ctx context.Context, o Options) (*Viewer, error) {
	tmp, err := store.TempDir()
	if err != nil {
		return nil, err
	}
	db, err := duckdb.Open(duckdb.Options{Threads: o.Threads, MemoryLimit: o.MemoryLimit, TempDir: tmp})
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	// Two connections: the index's second pass holds one, the pages use
	// the other. Both see the index's tables and the views, which are in
	// the in-memory database (not TEMP, which is a connection's own).
	db.SetMaxOpenConns(2)
	v := &Viewer{o: o, db: db, tmp: tmp, searchRows: o.searchRows}
	if v.searchRows <= 0 {
		v.searchRows = searchRows
	}
	if err := v.index(ctx); err != nil {
		v.Close()
		return nil, err
	}
	if v.tmpl, err = template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/*.html"); err != nil {
		v.Close()
		return nil, err
	}
	v.handler = v.routes()
	v.startRows()
	return v, nil
}

// Close stops the index's second pass, closes the database and removes the
// converted stores.
func (v *Viewer) Close() error {
	if v.pass != nil {
		v.pass.cancel()
		<-v.pass.done
	}
	err := v.db.Close()
	os.RemoveAll(v.tmp)
	return err
}

// Warnings returns the warnings of the stores' readers (a Trinity buffer's
// orphan rows), one line each.
func (v *Viewer) Warnings() []string { return v.warns }

// ServeHTTP serves the viewer's pages.
func (v *Viewer) ServeHTTP(w http.ResponseWriter, r *http.Request) { v.handler.ServeHTTP(w, r) }

// Serve serves the viewer on ln until ctx is done, then shuts down
// gracefully: requests in flight get up to grace to finish.
func (v *Viewer) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	var h http.Handler = v
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		h = loopbackOnly(v)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          v.o.Log,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// loopbackOnly refuses a request whose Host is not a loopback name: a page
// of another site that a DNS rebinding points at this address gets nothing.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if name, _, err := net.SplitHostPort(host); err == nil {
			host = name
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			http.Error(w, "the viewer answers on localhost and loopback addresses only, not "+strconv.Quote(r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// query returns the embedded query NAME.sql with its placeholders filled.
func query(name string, vars map[string]string) string {
	b, err := queryFiles.ReadFile(name + ".sql")
	if err != nil {
		panic("view: no query " + name) // the files are part of the binary
	}
	return rsql.Substitute("view/"+name+".sql", string(b), vars)
}

// assets is the embedded assets folder, served under /assets/.
func assets() fs.FS {
	sub, err := fs.Sub(assetFiles, "assets")
	if err != nil {
		panic(err) // the folder is embedded
	}
	return sub
}

// badStore wraps an index failure as bad input naming the store.
func badStore(path string, err error) error {
	if errors.Is(err, schema.ErrBadInput) || errors.Is(err, context.Canceled) {
		return err
	}
	return schema.Errorf(path, -1, "", "cannot index the store: %v", err)
}
