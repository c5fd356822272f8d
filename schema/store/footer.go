package store

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema/objstore"

	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"

	"github.com/rftpipe/rftpipe/schema/table"
)

// footerOf reads the footer of a Parquet file and checks its row counts
// (checkRowGroups). A footer that makes the decoder panic is bad input too.
func footerOf(path string) (md *metadata.FileMetaData, err error) {
	fh, _, err := openHandle(objectContext, path)
	if err != nil {
		return nil, err
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
	if err := checkRowGroups(path, pf.MetaData()); err != nil {
		return nil, err
	}
	return pf.MetaData(), nil
}

// ReadInPlace reports whether other Parquet readers (DuckDB) read the store
// at path, whose files are files, as they lie and see what Open gives: every
// file is a local Parquet file (DuckDB reads no s3:// object without its
// httpfs extension), no column comes from the directory names (see
// Partitions), and no page is compressed with the legacy (Hadoop) LZ4 codec,
// which arrow-rs writes and DuckDB does not read, and the store is not the
// increment of a table (whose files' rows Open selects) nor a table whose
// files differ in columns (which Open widens). When false, such a reader
// must read the store through Open (e.g. a temporary copy). A footer whose
// row counts do not add up is bad input, as Open finds it.
func ReadInPlace(path string, files []string) (bool, error) {
	for _, f := range files {
		if objstore.IsURL(f) {
			return false, nil
		}
	}
	if _, spec, ok, err := table.ParseStore(path); ok && spec.Since > 0 || err != nil {
		return false, err
	}
	if wide, err := tableSchema(path, files, defaultReadConfig()); wide != nil || err != nil {
		return false, err
	}
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
