package store

import (
	"context"
	"slices"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema"
)

// leafReader reads one field of one row group, record batch by record batch.
type leafReader interface {
	// read returns the next n rows, fewer (or io.EOF) at the end of the chunk.
	read(n int64) (arrow.Array, error)
	release()
}

// pqarrowReader reads a field with pqarrow's column reader.
type pqarrowReader struct{ *pqarrow.ColumnReader }

func (r pqarrowReader) read(n int64) (arrow.Array, error) { return readBatch(r.ColumnReader, n) }
func (r pqarrowReader) release()                          { r.Release() }

// fieldPlan says how one field of a read is decoded: by the leaf codec when
// shape is set, by pqarrow otherwise.
type fieldPlan struct {
	leaves []int
	shape  *leafShape
}

// planFields plans the fields of sc (as pqarrow reads them), whose leaves
// are leaves, in order.
func planFields(pf *file.Reader, sc *arrow.Schema) []fieldPlan {
	psc := pf.MetaData().Schema
	plans := make([]fieldPlan, sc.NumFields())
	for i, f := range sc.Fields() {
		plans[i].leaves = leavesOf(psc, f.Name)
		if len(plans[i].leaves) == 1 {
			if s, ok := shapeOf(psc.Column(plans[i].leaves[0]), f.Type); ok {
				plans[i].shape = &s
			}
		}
	}
	return plans
}

// fieldReaders opens the readers of the planned fields over row group rg.
func fieldReaders(pf *file.Reader, fr *pqarrow.FileReader, plans []fieldPlan, rg int) ([]leafReader, error) {
	out := make([]leafReader, len(plans))
	var slow []int
	fast := make([]bool, len(plans))
	for i, p := range plans {
		if fast[i] = p.shape != nil && leafEncodings(pf, rg, p.leaves[0]); !fast[i] {
			slow = append(slow, p.leaves...)
			continue
		}
		pr, err := pf.RowGroup(rg).GetColumnPageReader(p.leaves[0])
		if err != nil {
			releaseReaders(out)
			return nil, err
		}
		rgm := pf.MetaData().RowGroup(rg)
		cc, err := rgm.ColumnChunk(p.leaves[0])
		if err != nil {
			releaseReaders(out)
			return nil, err
		}
		out[i] = newLeafDecoder(*p.shape, pr, rgm.NumRows(), cc.NumValues())
	}
	if len(slow) > 0 {
		rds, _, err := fr.GetFieldReaders(context.Background(), slow, []int{rg})
		if err != nil {
			releaseReaders(out)
			return nil, err
		}
		k := 0
		for i := range plans {
			if !fast[i] {
				out[i] = pqarrowReader{rds[k]}
				k++
			}
		}
	}
	return out, nil
}

func releaseReaders(rds []leafReader) {
	for _, rd := range rds {
		if rd != nil {
			rd.release()
		}
	}
}

// leafEncodings reports whether the leaf codec decodes every encoding the
// column chunk of leaf in row group rg lists.
func leafEncodings(pf *file.Reader, rg, leaf int) bool {
	cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(leaf)
	if err != nil {
		return false
	}
	for _, e := range cc.Encodings() {
		switch e {
		case parquet.Encodings.Plain, parquet.Encodings.PlainDict, parquet.Encodings.RLE, parquet.Encodings.RLEDict, byteStreamSplit:
		default:
			return false
		}
	}
	return true
}

// checkDecodable refuses, before any row is read, a file with a column
// chunk in BYTE_STREAM_SPLIT that pqarrow would have to decode (the leaf
// codec decodes it for the shapes it takes), naming the column and the row
// group: pqarrow would stop at its first page as if the file were cut.
func checkDecodable(path string, pf *file.Reader, plans []fieldPlan) error {
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		for _, p := range plans {
			if p.shape != nil && leafEncodings(pf, rg, p.leaves[0]) {
				continue
			}
			for _, leaf := range p.leaves {
				cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(leaf)
				if err != nil {
					return fileError(path, err, "not a readable Parquet file")
				}
				if slices.Contains(cc.Encodings(), byteStreamSplit) {
					return schema.Errorf(path, -1, cc.PathInSchema().String(),
						"row group %d: BYTE_STREAM_SPLIT is supported on float, double and integer columns and lists of them only; rewrite the file without it (e.g. with DuckDB: rftpipe sql \"COPY experiences TO 'plain.parquet'\" --store FILE)", rg)
				}
			}
		}
	}
	return nil
}
