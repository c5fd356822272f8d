package pipeline

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
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
	// arrow-go v17 has no BYTE_STREAM_SPLIT decoder.
	{"npm/arrowrs_byte_stream_split.parquet", `arrowrs_byte_stream_split.parquet: column "reward": row group 0: the BYTE_STREAM_SPLIT encoding is not supported`},
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
