package view

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// handlerFunc is a page: it renders or returns an error (an *httpError for
// the requester's mistakes, anything else a 500).
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// routes maps the pages; anything else is a 404. The pages that read the
// index rows are served once the index's second pass has filled them.
func (v *Viewer) routes() http.Handler {
	mux := http.NewServeMux()
	for p, rt := range map[string]struct {
		h    handlerFunc
		rows bool
	}{
		"/{$}":     {v.overview, false},
		"/step":    {v.step, false},
		"/group":   {v.group, true},
		"/rollout": {v.rollout, true},
		"/search":  {v.search, true},
		"/sql":     {v.sqlBox, true},
		"/assets/": {v.asset, false},
		"/":        {func(http.ResponseWriter, *http.Request) error { return notFound("no such page") }, false},
	} {
		mux.Handle(p, v.wrap(rt.h, rt.rows))
	}
	return mux
}

// wrap serves a page: GET and HEAD only, strict headers (no script or style
// from elsewhere, no sniffing, no framing), errors rendered as a page with
// their status and message, a panic as a 500 without its trace. A page
// reading the index rows (rows) waits for them first.
func (v *Viewer) wrap(h handlerFunc, rows bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		hdr.Set("X-Content-Type-Options", "nosniff")
		hdr.Set("Referrer-Policy", "no-referrer")
		defer func() {
			if p := recover(); p != nil {
				v.fail(w, r, fmt.Errorf("panic: %v", p))
			}
		}()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			hdr.Set("Allow", "GET, HEAD")
			v.fail(w, r, &httpError{http.StatusMethodNotAllowed, "the viewer is read-only: GET only"})
			return
		}
		if rows {
			if err := v.Wait(r.Context()); err != nil {
				v.fail(w, r, err)
				return
			}
		}
		if err := h(w, r); err != nil {
			v.fail(w, r, err)
		}
	})
}

// fail renders err as an error page.
func (v *Viewer) fail(w http.ResponseWriter, r *http.Request, err error) {
	he := &httpError{}
	if !errors.As(err, &he) {
		if errors.Is(err, schema.ErrBadInput) {
			he = &httpError{http.StatusBadRequest, err.Error()}
		} else {
			if v.o.Log != nil {
				v.o.Log.Printf("view: %s %s: %v", r.Method, r.URL.Path, duckdb.FirstLine(err.Error()))
			}
			he = &httpError{http.StatusInternalServerError, "internal error: " + duckdb.FirstLine(err.Error())}
			if r.Context().Err() != nil {
				he.msg = "the request was cancelled"
			}
		}
	}
	var b bytes.Buffer
	if terr := v.tmpl.ExecuteTemplate(&b, "error", v.page(http.StatusText(he.code), he)); terr != nil {
		http.Error(w, he.msg, he.code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(he.code)
	w.Write(b.Bytes())
}

// render writes the template name with data, as a whole (an error while
// rendering becomes an error page, not half a page).
func (v *Viewer) render(w http.ResponseWriter, name string, data any) error {
	var b bytes.Buffer
	if err := v.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := w.Write(b.Bytes())
	return err
}

// page is what every page's header and footer show.
type page struct {
	Title    string
	Store    string
	Rejected string
	AllowSQL bool
	Indexing string // what the pages lack while the index's second pass runs, or why they lack it
	// Experiments are the store's experiments when it has several: the
	// pages then show each row's and filter by one.
	Experiments []string
	Data        any
}

func (v *Viewer) page(title string, data any) page {
	p := page{Title: title, Store: v.sources[0].name, AllowSQL: v.o.AllowSQL, Indexing: v.indexing(), Data: data}
	if len(v.sources) > 1 {
		p.Rejected = v.sources[1].name
	}
	if len(v.experiments) > 1 {
		p.Experiments = v.experiments
	}
	return p
}

// asset serves an embedded asset by its exact name; nothing else.
func (v *Viewer) asset(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseParams(r); err != nil {
		return err
	}
	name := strings.TrimPrefix(r.URL.Path, "/assets/")
	if name == "" || strings.Contains(name, "/") || strings.Contains(name, `\`) || strings.HasPrefix(name, ".") {
		return notFound("no such asset")
	}
	b, err := fs.ReadFile(assets(), name)
	if err != nil {
		return notFound("no such asset")
	}
	switch path.Ext(name) {
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case ".svg":
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("Cache-Control", "no-cache")
	_, err = w.Write(b)
	return err
}

// record is one result row: column name -> value as the driver scans it.
type record map[string]any

// table is a query result in column order.
type table struct {
	Columns []string
	Rows    [][]any
}

// records runs q with args and returns its rows.
func (v *Viewer) records(ctx context.Context, q string, args ...any) ([]record, error) {
	t, err := v.table(ctx, q, -1, args...)
	if err != nil {
		return nil, err
	}
	out := make([]record, len(t.Rows))
	for i, row := range t.Rows {
		m := make(record, len(t.Columns))
		for j, c := range t.Columns {
			m[c] = row[j]
		}
		out[i] = m
	}
	return out, nil
}

// table runs q with args and returns at most limit rows (all: limit < 0).
func (v *Viewer) table(ctx context.Context, q string, limit int, args ...any) (table, error) {
	var t table
	rows, err := v.db.QueryContext(ctx, q, args...)
	if err != nil {
		return t, err
	}
	defer rows.Close()
	if t.Columns, err = rows.Columns(); err != nil {
		return t, err
	}
	for rows.Next() && (limit < 0 || len(t.Rows) < limit) {
		vals := make([]any, len(t.Columns))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return t, err
		}
		t.Rows = append(t.Rows, vals)
	}
	return t, rows.Err()
}
