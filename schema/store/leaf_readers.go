package store

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store/leafcodec"
)

// leafReader reads one field of one row group, record batch by record batch.
type leafReader interface {
	// read returns the next n rows, fewer (or io.EOF) at the end of the
	// chunk; of those, only the rows i where keep[i] is true when keep is
	// not nil.
	read(n int64, keep []bool) (arrow.Array, error)
	release()
}

// pqarrowReader reads a field with pqarrow's column reader.
type pqarrowReader struct{ *pqarrow.ColumnReader }

func (r pqarrowReader) read(n int64, keep []bool) (arrow.Array, error) {
	a, err := readBatch(r.ColumnReader, n)
	if err != nil || keep == nil {
		return a, err
	}
	defer a.Release()
	return keptRows(a, keep)
}

func (r pqarrowReader) release() { r.Release() }

// decoderReader reads a field with the leaf codec, which skips the values
// of the rows not kept, from the pages of pr.
type decoderReader struct {
	*leafcodec.Decoder
	pr file.PageReader
}

func (r decoderReader) read(n int64, keep []bool) (arrow.Array, error) { return r.ReadRows(n, keep) }

// release closes the decoder, which reads no more pages, and hands its page
// reader on to the next column chunk's.
func (r decoderReader) release() {
	r.Close()
	pageReaders.Put(r.pr)
}

// readProperties returns the properties of a Parquet store's readers:
// pages are read as they are decoded, through a buffer per column (rather
// than each column chunk read whole, and copied, up front). The page
// buffers come from Go's heap whatever the reader's allocator is: the leaf
// codec reads pages ahead, and keeps them after the reader has moved on,
// which only a garbage-collected buffer outlives.
func readProperties() *parquet.ReaderProperties {
	props := parquet.NewReaderProperties(memory.NewGoAllocator())
	props.BufferedStreamEnabled = true
	return props
}

// pageReaders holds the page readers of the column chunks decoded: arrow's
// page reader reads each page's compressed bytes into a buffer of its own,
// which a new reader grows from nothing for every column chunk (clearing
// and copying it); one reset over the next chunk keeps it.
var pageReaders sync.Pool // file.PageReader

// chunkPages returns a page reader of the column chunk leaf of row group rg
// of pf, whose bytes src reads, as the row group's reader gives it
// (GetColumnPageReader): one from pageReaders when there is one.
func chunkPages(pf *file.Reader, src io.ReaderAt, rg, leaf int) (file.PageReader, error) {
	md := pf.MetaData()
	cc, err := md.RowGroup(rg).ColumnChunk(leaf)
	if err != nil {
		return nil, err
	}
	// The row group's reader pads the chunks of old writers, and decrypts.
	if md.WriterVersion().LessThan(metadata.Parquet816FixedVersion) || cc.CryptoMetadata() != nil {
		return pf.RowGroup(rg).GetColumnPageReader(leaf)
	}
	return pagesAt(src, cc)
}

// pagesAt returns a page reader of column chunk cc, whose bytes src reads:
// one from pageReaders when there is one.
func pagesAt(src io.ReaderAt, cc *metadata.ColumnChunkMetaData) (file.PageReader, error) {
	start := cc.DataPageOffset()
	if cc.HasDictionaryPage() && cc.DictionaryPageOffset() > 0 && start > cc.DictionaryPageOffset() {
		start = cc.DictionaryPageOffset()
	}
	props := readProperties()
	stream, err := props.GetStream(src, start, cc.TotalCompressedSize())
	if err != nil {
		return nil, err
	}
	pr, ok := pageReaders.Get().(file.PageReader)
	if !ok {
		return file.NewPageReader(stream, cc.NumValues(), cc.Compression(), props.Allocator(), nil)
	}
	pr.Reset(stream, cc.NumValues(), cc.Compression(), nil)
	return pr, pr.Err()
}

// keptRows returns the rows i of a where keep[i] is true (a has at most
// len(keep) rows): each run of kept rows a slice, the slices concatenated.
func keptRows(a arrow.Array, keep []bool) (arrow.Array, error) {
	var runs []arrow.Array
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	for i := 0; i < a.Len(); {
		j := i + 1
		for j < a.Len() && keep[j] == keep[i] {
			j++
		}
		if keep[i] {
			runs = append(runs, array.NewSlice(a, int64(i), int64(j)))
		}
		i = j
	}
	if len(runs) == 0 {
		return array.NewSlice(a, 0, 0), nil
	}
	return array.Concatenate(runs, memory.DefaultAllocator)
}

// fieldPlan says how one field of a read is decoded: by the leaf codec when
// shape is set, by pqarrow otherwise.
type fieldPlan struct {
	leaves []int
	shape  *leafcodec.Shape
}

// planFields plans the fields of sc (as pqarrow reads them), whose leaves
// are leaves, in order.
func planFields(pf *file.Reader, sc *arrow.Schema) []fieldPlan {
	psc := pf.MetaData().Schema
	plans := make([]fieldPlan, sc.NumFields())
	for i, f := range sc.Fields() {
		plans[i].leaves = leavesOf(psc, f.Name)
		if len(plans[i].leaves) == 1 {
			if s, ok := leafcodec.ShapeOf(psc.Column(plans[i].leaves[0]), f.Type); ok {
				plans[i].shape = &s
			}
		}
	}
	return plans
}

// fieldReaders opens the readers of the planned fields over row group rg.
// It opens pqarrow's readers one field at a time on the caller's goroutine
// (pqarrow's GetFieldReaders opens them on goroutines of its own, where a
// panic over a corrupt footer would kill the process), and turns a panic
// into an error.
func fieldReaders(pf *file.Reader, src io.ReaderAt, fr *pqarrow.FileReader, plans []fieldPlan, rg int) (out []leafReader, err error) {
	out = make([]leafReader, len(plans))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
		if err != nil {
			releaseReaders(out)
			out = nil
		}
	}()
	rgm := pf.MetaData().RowGroup(rg)
	for i, p := range plans {
		if p.codec(pf, rg) {
			pr, err := chunkPages(pf, src, rg, p.leaves[0])
			if err != nil {
				return out, err
			}
			cc, err := rgm.ColumnChunk(p.leaves[0])
			if err != nil {
				return out, err
			}
			out[i] = decoderReader{leafcodec.NewDecoder(*p.shape, pr, rgm.NumRows(), cc.NumValues()), pr}
			continue
		}
		fields, err := fr.Manifest.GetFieldIndices(p.leaves)
		if err != nil || len(fields) != 1 {
			return nil, fmt.Errorf("column %v: not one field (%v)", p.leaves, err)
		}
		leaves := map[int]bool{}
		for _, l := range p.leaves {
			leaves[l] = true
		}
		rd, err := fr.GetFieldReader(context.Background(), fields[0], leaves, []int{rg})
		if err != nil {
			return out, err
		}
		out[i] = pqarrowReader{rd}
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

// codec reports whether the leaf codec reads the field's chunk of row group
// rg: it takes the field's shape and every encoding the chunk lists.
func (p fieldPlan) codec(pf *file.Reader, rg int) bool {
	if p.shape == nil {
		return false
	}
	cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(p.leaves[0])
	return err == nil && leafcodec.Decodes(cc.Encodings())
}

// checkDecodable refuses, before any row is read, a file with a column
// chunk in BYTE_STREAM_SPLIT that pqarrow would have to decode (the leaf
// codec decodes it for the shapes it takes), naming the column and the row
// group: pqarrow would stop at its first page as if the file were cut.
func checkDecodable(path string, pf *file.Reader, plans []fieldPlan) error {
	for rg := 0; rg < pf.NumRowGroups(); rg++ {
		for _, p := range plans {
			if p.codec(pf, rg) {
				continue
			}
			for _, leaf := range p.leaves {
				cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(leaf)
				if err != nil {
					return fileError(path, err, "not a readable Parquet file")
				}
				if slices.Contains(cc.Encodings(), leafcodec.ByteStreamSplit) {
					return schema.Errorf(path, -1, cc.PathInSchema().String(),
						"row group %d: BYTE_STREAM_SPLIT is supported on float, double and integer columns and lists of them only; rewrite the file without it (e.g. with DuckDB: rftpipe sql \"COPY experiences TO 'plain.parquet'\" --store FILE)", rg)
				}
			}
		}
	}
	return nil
}
