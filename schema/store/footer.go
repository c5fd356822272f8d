package store

import (
	"fmt"
	"os"

	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"

	"github.com/rftpipe/rftpipe/schema"
)

// byteStreamSplit is Parquet's BYTE_STREAM_SPLIT encoding, which arrow-go
// v17 names no constant for and cannot decode.
const byteStreamSplit = parquet.Encoding(9)

// footerOf reads the footer of a Parquet file. A footer that makes the
// decoder panic is bad input too.
func footerOf(path string) (md *metadata.FileMetaData, err error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fileError(path, err, "cannot open")
	}
	defer fh.Close()
	defer func() {
		if p := recover(); p != nil {
			md, err = nil, fileError(path, fmt.Errorf("%v", p), "not a readable Parquet file")
		}
	}()
	pf, err := file.NewParquetReader(fh)
	if err != nil {
		return nil, fileError(path, err, "not a readable Parquet file")
	}
	return pf.MetaData(), nil
}

// checkEncodings refuses, before any row is read, a Parquet file holding a
// page encoding the reader cannot decode (BYTE_STREAM_SPLIT, which pyarrow
// and arrow-rs write on request for float columns), naming the column and
// the row group: the decoder would otherwise stop at the first such page
// as if the file were cut.
func checkEncodings(path string) error {
	md, err := footerOf(path)
	if err != nil {
		return err
	}
	for rg := 0; rg < len(md.RowGroups); rg++ {
		g := md.RowGroup(rg)
		for c := 0; c < g.NumColumns(); c++ {
			cc, err := g.ColumnChunk(c)
			if err != nil {
				return fileError(path, err, "not a readable Parquet file")
			}
			for _, e := range cc.Encodings() {
				if e == byteStreamSplit {
					return schema.Errorf(path, -1, cc.PathInSchema().String(),
						"row group %d: the BYTE_STREAM_SPLIT encoding is not supported; rewrite the file without it (e.g. with DuckDB: rftpipe sql \"COPY experiences TO 'plain.parquet'\" --store FILE)", rg)
				}
			}
		}
	}
	return nil
}

// ReadInPlace reports whether other Parquet readers (DuckDB) read the store
// at path, whose files are files, as they lie and see what Open gives: every
// file is Parquet, no column comes from the directory names (see
// Partitions), and no page is compressed with the legacy (Hadoop) LZ4 codec,
// which arrow-rs writes and DuckDB does not read. When false, such a reader
// must read the store through Open (e.g. a temporary copy).
func ReadInPlace(path string, files []string) (bool, error) {
	parts, err := Partitions(path, files)
	if err != nil {
		return false, err
	}
	if len(parts) > 0 {
		return false, nil
	}
	for _, f := range files {
		if ft, err := FormatOf(f); err != nil || ft != Parquet {
			return false, nil
		}
		md, err := footerOf(f)
		if err != nil {
			return false, err
		}
		for rg := 0; rg < len(md.RowGroups); rg++ {
			g := md.RowGroup(rg)
			for c := 0; c < g.NumColumns(); c++ {
				if cc, err := g.ColumnChunk(c); err == nil && cc.Compression() == compress.Codecs.Lz4 {
					return false, nil
				}
			}
		}
	}
	return true, nil
}
