package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema/store"
)

// TestParquetEncodings: the base store written by arrow-go with data page
// v2 and the DELTA encodings reads as the base rows. (arrow-go v17 writes
// no BYTE_STREAM_SPLIT: pipeline's TestForeignWriters reads arrow-rs's.)
func TestParquetEncodings(t *testing.T) {
	base := "../../fixtures/foreign/base.parquet"
	want, _ := readAll(t, base)
	for _, tc := range []struct {
		name  string
		props []parquet.WriterProperty
	}{
		{"page v2", []parquet.WriterProperty{parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{"delta", []parquet.WriterProperty{
			parquet.WithEncodingFor("batch", parquet.Encodings.DeltaBinaryPacked),
			parquet.WithEncodingFor("tokens.list.element", parquet.Encodings.DeltaBinaryPacked),
			parquet.WithEncodingFor("suffix", parquet.Encodings.DeltaLengthByteArray),
			parquet.WithEncodingFor("truncate_status", parquet.Encodings.DeltaByteArray)}},
		{"v2 and delta, small pages", []parquet.WriterProperty{
			parquet.WithDataPageVersion(parquet.DataPageV2), parquet.WithDataPageSize(64),
			parquet.WithEncodingFor("tokens.list.element", parquet.Encodings.DeltaBinaryPacked)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := append([]parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithCompression(compress.Codecs.Snappy)}, tc.props...)
			path := filepath.Join(t.TempDir(), "enc.parquet")
			r, err := store.Open(base)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := pqarrow.NewFileWriter(r.Schema(), f, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
			if err != nil {
				t.Fatal(err)
			}
			for {
				rec, err := r.Next()
				if err != nil {
					break
				}
				if err := w.Write(rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := readAll(t, path); got != want {
				t.Fatal("rows differ from base.parquet's")
			}
		})
	}
}
