package store_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/objstore"
	"github.com/rftpipe/rftpipe/schema/objstore/objtest"
	"github.com/rftpipe/rftpipe/schema/store"
)

// objectBytes returns the whole of the object at url.
func objectBytes(t *testing.T, url string) []byte {
	t.Helper()
	c, err := objstore.Default(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := objstore.Parse(url)
	b, err := c.Get(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestObjectRoundTrip writes every format to object storage and reads it
// back: the same rows, and a Parquet object byte for byte the local file.
func TestObjectRoundTrip(t *testing.T) {
	objtest.New(t)
	want, _ := readAll(t, demo)
	dir := t.TempDir()
	for _, name := range []string{"a.jsonl", "a.arrow", "a.arrows", "a.parquet"} {
		t.Run(name, func(t *testing.T) {
			url := objtest.URL("rt/" + name)
			copyTo(t, demo, url)
			if got, _ := readAll(t, url); got != want {
				t.Errorf("%s: rows differ after a round trip", url)
			}
			local := filepath.Join(dir, name)
			copyTo(t, demo, local)
			lb, _ := os.ReadFile(local)
			if name == "a.parquet" && string(objectBytes(t, url)) != string(lb) {
				t.Errorf("%s differs from the same store written locally", url)
			}
		})
	}
}

// TestObjectPrefixAndGlob reads a prefix as a directory store (partition
// directories too) and a pattern as a glob.
func TestObjectPrefixAndGlob(t *testing.T) {
	objtest.New(t)
	one, _ := readAll(t, demo)
	copyTo(t, demo, objtest.URL("dir/part-0.parquet"))
	copyTo(t, demo, objtest.URL("dir/part-1.parquet"))
	copyTo(t, demo, objtest.URL("dir/_metrics/x.parquet")) // "_" left out
	for _, p := range []string{objtest.URL("dir"), objtest.URL("dir/"), objtest.URL("dir/part-*.parquet")} {
		if got, _ := readAll(t, p); got != one+one {
			t.Errorf("%s: want both parts in order", p)
		}
	}
	copyTo(t, demo, objtest.URL("hive/k=1/a.parquet"))
	copyTo(t, demo, objtest.URL("hive/k=2/a.parquet"))
	_, sc := readAll(t, objtest.URL("hive"))
	if f := sc.FieldIndices("k"); len(f) != 1 || !arrow.TypeEqual(sc.Field(f[0]).Type, arrow.PrimitiveTypes.Int64) {
		t.Errorf("partition column k: %v", sc)
	}
	copyTo(t, demo, objtest.URL("mixed/a.parquet"))
	copyTo(t, demo, objtest.URL("mixed/sub/b.parquet"))
	for p, want := range map[string]string{
		objtest.URL("mixed"):      "not a KEY=VALUE partition",
		objtest.URL("none/"):      "no such object or prefix",
		objtest.URL("dir/*.json"): "no object matches",
	} {
		if _, err := store.Expand(p); !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("Expand(%s) = %v, want %q", p, err, want)
		}
	}
}

// TestObjectDeferredCopy copies column chunks of an object as they are
// (the pass-through of unchanged chunks): the output is the local copy's.
func TestObjectDeferredCopy(t *testing.T) {
	objtest.New(t)
	in := objtest.URL("full.parquet")
	copyTo(t, "../../fixtures/stores/full.parquet", in)
	dir := t.TempDir()
	local, remote := filepath.Join(dir, "local.parquet"), filepath.Join(dir, "remote.parquet")
	deferredCopy(t, "../../fixtures/stores/full.parquet", local, "reward")
	deferredCopy(t, in, remote, "reward")
	if sha(t, local) != sha(t, remote) {
		t.Error("a deferred copy of the object differs from the file's")
	}
}

// TestObjectWriterAborts: an aborted or cancelled write leaves no object
// and no upload behind.
func TestObjectWriterAborts(t *testing.T) {
	srv := objtest.New(t)
	r, err := store.Open(demo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"abort", "abort after prepare", "cancel"} {
		ctx, cancel := context.WithCancel(context.Background())
		url := objtest.URL("aborted.parquet")
		w, err := store.Create(url, r.Schema(), store.WriteContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		switch how {
		case "abort":
			w.Abort()
		case "abort after prepare":
			if err := w.Prepare(); err != nil {
				t.Fatal(err)
			}
			if len(srv.Uploads(t)) != 1 {
				t.Errorf("%s: prepared, want one upload in progress", how)
			}
			w.Abort()
		case "cancel":
			cancel()
			if err := w.Commit(); !errors.Is(err, context.Canceled) {
				t.Errorf("%s: Commit = %v", how, err)
			}
		}
		cancel()
		if _, err := store.Expand(url); err == nil {
			t.Errorf("%s: object left", how)
		}
		if left := srv.Uploads(t); len(left) != 0 {
			t.Errorf("%s: uploads left: %v", how, left)
		}
		if w.TempName() != "" {
			if _, err := os.Stat(w.TempName()); err == nil {
				t.Errorf("%s: temp file left", how)
			}
		}
	}
}

// TestObjectWriterStreams: a store written to object storage goes up in
// parts while it is written, with no local copy, and equals the same
// store written to a file.
func TestObjectWriterStreams(t *testing.T) {
	srv := objtest.New(t)
	r, err := store.Open(demo)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	url, local := objtest.URL("streamed.jsonl"), filepath.Join(t.TempDir(), "streamed.jsonl")
	ws := make([]*store.Writer, 2)
	for i, p := range []string{url, local} {
		if ws[i], err = store.Create(p, r.Schema()); err != nil {
			t.Fatal(err)
		}
		defer ws[i].Abort()
	}
	if ws[0].TempName() != "" {
		t.Errorf("an object output spooled to %s", ws[0].TempName())
	}
	// Written until two parts are full (and the last part of the file's
	// size is left for Commit).
	for n := 0; srv.Requests("PUT") < 2; n++ {
		if n == 100000 {
			t.Fatalf("no part sent after %d batches", n)
		}
		for _, w := range ws {
			if err := w.Write(rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range ws {
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := os.ReadFile(local)
	if got := objectBytes(t, url); string(got) != string(want) || len(want) <= 2*objstore.PartSize {
		t.Errorf("object of %d bytes, the file %d (over two parts)", len(got), len(want))
	}
}

// TestObjectOutputs extends the output-vs-input rules to keys and
// prefixes.
func TestObjectOutputs(t *testing.T) {
	objtest.New(t)
	copyTo(t, demo, objtest.URL("in/part-0.parquet"))
	for _, c := range []struct {
		in, out, want string
	}{
		{objtest.URL("in/part-0.parquet"), objtest.URL("in/part-0.parquet"), "would overwrite the input"},
		{objtest.URL("in"), objtest.URL("in/part-9.parquet"), "lies inside the input store"},
		{objtest.URL("in/*.parquet"), objtest.URL("in/new.parquet"), "matches the input store"},
		{objtest.URL("in"), objtest.URL("out/x.parquet"), ""},
		{objtest.URL("in"), objtest.URL("input.parquet"), ""},
	} {
		err := store.CheckOutputs(context.Background(), []string{c.in}, []store.Output{{Flag: "--out", Path: c.out}}, false)
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("in %s, out %s: %v, want %q", c.in, c.out, err, c.want)
		}
	}
	err := store.CheckOutputs(context.Background(), nil, []store.Output{{Flag: "--out", Path: objtest.URL("o/a.parquet")}, {Flag: "--rejected", Path: objtest.URL("o/a.parquet")}}, false)
	if err == nil || !strings.Contains(err.Error(), "is also the file of --out") {
		t.Errorf("two outputs on one key: %v", err)
	}
}

// TestObjectWriteFile writes a text output to object storage, and
// refuses a prefix.
func TestObjectWriteFile(t *testing.T) {
	objtest.New(t)
	url := objtest.URL("m/metrics.json")
	if err := store.WriteFile(context.Background(), url, func(w io.Writer) error { _, err := w.Write([]byte("{}\n")); return err }); err != nil {
		t.Fatal(err)
	}
	if got := string(objectBytes(t, url)); got != "{}\n" {
		t.Errorf("object holds %q", got)
	}
	if err := store.CheckWritable(objtest.URL("m/")); !errors.Is(err, schema.ErrBadInput) {
		t.Errorf("CheckWritable of a prefix = %v", err)
	}
	if err := store.CheckWritable("s3://no-such-bucket/x.json"); !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), "no such bucket") {
		t.Errorf("CheckWritable in a missing bucket = %v", err)
	}
}
