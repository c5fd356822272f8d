package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/sql/duckdb"
)

const foreign = "../fixtures/foreign/"

// foreignMatrix is every store in fixtures/foreign: the 320-row base store
// as other writers wrote it (make.sh: DuckDB; make_npm.mjs: polars, Apache
// Arrow JS and arrow-rs, versions in npm/VERSIONS), and what GRPO makes of
// it: the base store's advantages exactly (fails ""), or a one-line
// bad-input error holding fails.
var foreignMatrix = []struct{ file, fails string }{
	{"duckdb_lz4_raw.parquet", ""},
	{"duckdb_snappy.parquet", ""},
	{"duckdb_gzip.parquet", ""},
	{"duckdb_brotli.parquet", ""},
	{"npm/polars.parquet", ""},
	{"npm/polars_lz4.parquet", ""},
	{"npm/polars_brotli.parquet", ""},
	{"npm/polars_categorical.parquet", ""},
	{"npm/polars.arrow", ""},
	{"npm/polars_lz4.arrow", ""},
	{"npm/polars_categorical.arrow", ""},
	{"npm/polars.arrows", ""},
	{"npm/polars_zstd.arrows", ""},
	{"npm/arrowjs.arrow", ""},
	{"npm/arrowjs.arrows", ""},
	{"npm/arrowjs_large.arrow", ""},
	{"npm/arrowrs.parquet", ""},
	{"npm/arrowrs_lz4.parquet", ""},
	{"npm/arrowrs_lz4_raw.parquet", ""},
	{"npm/arrowrs_brotli.parquet", ""},
	{"npm/arrowrs_zstd_v2.parquet", ""},
	{"npm/arrowrs_rowgroup1.parquet", ""},
	{"npm/arrowrs_smallpages.parquet", ""},
	{"npm/arrowrs_delta.parquet", ""},
	{"npm/arrowrs_delta_length.parquet", ""},
	// BYTE_STREAM_SPLIT on reward (arrow-go v17 has no decoder for it; the
	// store's leaf codec has).
	{"npm/arrowrs_byte_stream_split.parquet", ""},
}

// TestForeignWriters runs GRPO through the engine on every foreign store:
// the same rows (ids, order) with the same advantages and returns, bit for
// bit, as on base.parquet, or the documented one-line error.
func TestForeignWriters(t *testing.T) {
	baseOut := filepath.Join(t.TempDir(), "base.parquet")
	run(t, withFn(t, Job{In: foreign + "base.parquet", Out: baseOut}, "grpo", ""))
	base := readTable(t, baseOut)
	if len(base.adv) != 320 {
		t.Fatalf("base.parquet gave %d rows of advantages", len(base.adv))
	}
	listed := map[string]bool{"base.parquet": true}
	for _, tc := range foreignMatrix {
		listed[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			job := withFn(t, Job{In: foreign + tc.file, Out: filepath.Join(t.TempDir(), "out.parquet")}, "grpo", "")
			_, err := Run(t.Context(), job)
			if tc.fails != "" {
				if err == nil || !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.fails) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("err = %v, want one bad-input line holding %q", err, tc.fails)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := readTable(t, job.Out)
			for name, pair := range map[string][2]any{
				"groups": {got.tid, base.tid}, "suffixes": {got.suffix, base.suffix},
				"advantages": {got.adv, base.adv}, "returns": {got.ret, base.ret},
			} {
				if !reflect.DeepEqual(pair[0], pair[1]) {
					t.Errorf("%s differ from base.parquet's", name)
				}
			}
		})
	}
	for _, pat := range []string{"*.*", "npm/*.*"} {
		files, _ := filepath.Glob(foreign + pat)
		for _, f := range files {
			rel, _ := filepath.Rel(foreign, f)
			if ext := filepath.Ext(f); !listed[filepath.ToSlash(rel)] && (ext == ".parquet" || ext == ".arrow" || ext == ".arrows") {
				t.Errorf("%s is not in the matrix", rel)
			}
		}
	}
}

// partitioned writes the base store as a Hive-partitioned directory,
// batch=B/part-0.parquet, without the batch column (as DuckDB's and
// pyarrow's partitioned writers leave it out), rows in the base order.
func partitioned(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	db, err := duckdb.Open(duckdb.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, b := range []string{"0", "1"} {
		sub := filepath.Join(dir, "batch="+b)
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		q := "COPY (SELECT * EXCLUDE (batch, file_row_number) FROM read_parquet(" + duckdb.QuoteString(foreign+"base.parquet") +
			", file_row_number = true) WHERE batch = " + b + " ORDER BY file_row_number) TO " + duckdb.QuoteString(filepath.Join(sub, "part-0.parquet"))
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHivePartitioned: GRPO over a partitioned copy of the base store (the
// directory, or a glob across its partition directories) gives the base
// store's rows and advantages; the group pass sees the partition column.
func TestHivePartitioned(t *testing.T) {
	dir := partitioned(t)
	baseOut := filepath.Join(t.TempDir(), "base.parquet")
	run(t, withFn(t, Job{In: foreign + "base.parquet", Out: baseOut}, "grpo", ""))
	want := readTable(t, baseOut)
	for _, in := range []string{dir, filepath.Join(dir, "batch=*", "*.parquet")} {
		out := filepath.Join(t.TempDir(), "out.parquet")
		run(t, withFn(t, Job{In: in, Out: out}, "grpo", ""))
		got := readTable(t, out)
		if len(got.tid) != 320 || !reflect.DeepEqual(got.tid, want.tid) || !reflect.DeepEqual(got.adv, want.adv) || !reflect.DeepEqual(got.ret, want.ret) {
			t.Errorf("%s: GRPO differs from the unpartitioned store's", in)
		}
	}
}
