package store_test

import (
	"path/filepath"
	"testing"

	"github.com/rftpipe/rftpipe/schema/store"
)

// TestForeignFixtures: every store in fixtures/foreign (the base store as
// other writers rewrote it; see make.sh there) reads as exactly the rows of
// base.parquet, with the canonical types, so every stage computes the same
// results from it.
func TestForeignFixtures(t *testing.T) {
	base := "../../fixtures/foreign/base.parquet"
	want, wantSchema := readAll(t, base)
	files, err := filepath.Glob("../../fixtures/foreign/*.parquet")
	if err != nil || len(files) < 2 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	// One-row row groups, as arrow-rs and pyarrow can be told to write.
	small := filepath.Join(t.TempDir(), "rowgroup1.parquet")
	r, err := store.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Copy(t.Context(), r, small, nil, store.WithParquet(store.ParquetOptions{RowGroupRows: 1})); err != nil {
		t.Fatal(err)
	}
	r.Close()
	for _, f := range append(files, small) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			got, gotSchema := readAll(t, f)
			if !store.SameColumns(gotSchema, wantSchema) {
				t.Fatalf("schema\n%v\nwant\n%v", gotSchema, wantSchema)
			}
			if got != want {
				t.Fatal("rows differ from base.parquet's")
			}
		})
	}
}
