package leafcodec

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet"
	"github.com/apache/arrow/go/v17/parquet/compress"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/metadata"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"
	pqschema "github.com/apache/arrow/go/v17/parquet/schema"

	"github.com/rftpipe/rftpipe/schema/store/internal/leaftest"
)

// transcodeChunk writes the kept rows of chunk c (rows rows of leaf descr)
// with Transcode, in pages of about pageSize bytes of values.
func transcodeChunk(t *testing.T, props *parquet.WriterProperties, descr *pqschema.Column, typ arrow.DataType, c chunk, keep []bool, pageSize int) ([]byte, Transcoded, error) {
	t.Helper()
	from, s, ok := Transcodes(props, descr, descr, typ)
	if !ok {
		t.Fatalf("%s: not transcoded", descr.Path())
	}
	pr, err := file.NewPageReader(chunkReader(c.data), c.values, props.CompressionFor(descr.Path()), memory.DefaultAllocator, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(from, pr, int64(len(keep)), c.values)
	defer d.Close()
	var out sink
	cc := metadata.NewColumnChunkMetaDataBuilder(props, descr)
	pager, err := file.NewPageWriter(&out, props.CompressionFor(descr.Path()), props.CompressionLevelFor(descr.Path()), cc, 0, 0, memory.DefaultAllocator, false, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEncoder(pager)
	got, err := e.Transcode(s, d, keep, pageSize)
	if err != nil {
		return nil, got, err
	}
	n := e.TotalBytesWritten()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()[:n], got, nil
}

// keptOf reads the kept rows of chunk c back as an array (ReadRows).
func keptOf(t *testing.T, descr *pqschema.Column, typ arrow.DataType, c chunk, codec compress.Compression, keep []bool) arrow.Array {
	t.Helper()
	s, _ := ShapeOf(descr, typ)
	pr, err := file.NewPageReader(chunkReader(c.data), c.values, codec, memory.DefaultAllocator, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(s, pr, int64(len(keep)), c.values)
	defer d.Close()
	a, err := d.ReadRows(int64(len(keep)), keep)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestTranscode: the kept rows of a chunk written straight from its pages
// are byte for byte the chunk Write writes for the same rows read into an
// array, for every value type, codec and page size (input pages of a few
// rows, output pages of several input pages' rows and the reverse), with
// every row kept, none, every other one and a random 78 %; the layout
// given is the kept rows' offsets and nulls; a NaN in a kept row is
// reported and one in a dropped row is not; pages of more levels than the
// room the values leave them are the same bytes too.
func TestTranscode(t *testing.T) {
	const rows = 600
	rng := rand.New(rand.NewPCG(3, 4))
	keeps := map[string][]bool{"all": make([]bool, rows), "none": make([]bool, rows), "alternate": make([]bool, rows), "random": make([]bool, rows)}
	for i := 0; i < rows; i++ {
		keeps["all"][i], keeps["alternate"][i], keeps["random"][i] = true, i%2 == 0, rng.Float64() < 0.78
	}
	rec := leaftest.Record(rows, false, 9)
	// Null and empty lists, no null elements: column 0 with every fifth row
	// null and every seventh empty.
	lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Float32)
	src := rec.Column(0).(*array.List)
	for i := 0; i < rows; i++ {
		switch lo, hi := src.ValueOffsets(i); {
		case i%5 == 0:
			lb.AppendNull()
		case i%7 == 0:
			lb.Append(true)
		default:
			lb.Append(true)
			lb.ValueBuilder().(*array.Float32Builder).AppendValues(src.ListValues().(*array.Float32).Float32Values()[lo:hi], nil)
		}
	}
	holes := lb.NewArray()
	defer holes.Release()
	cols := []struct {
		f   arrow.Field
		col arrow.Array
	}{{arrow.Field{Name: "holes", Type: holes.DataType(), Nullable: true}, holes}}
	for c := 0; c < 4; c++ {
		cols = append(cols, struct {
			f   arrow.Field
			col arrow.Array
		}{rec.Schema().Field(c), rec.Column(c)})
	}
	for _, col := range cols {
		for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Zstd} {
			props := parquet.NewWriterProperties(parquet.WithCompression(codec), parquet.WithCompressionLevel(1),
				parquet.WithDictionaryDefault(false), parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required))
			sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{col.f}, nil), props, pqarrow.DefaultWriterProps())
			if err != nil {
				t.Fatal(err)
			}
			descr := sc.Column(0)
			for _, sizes := range [][2]int{{200, 3000}, {3000, 200}, {1 << 20, 1 << 20}} {
				in := encodeChunk(t, props, descr, col.col, sizes[0], 1)
				for name, keep := range keeps {
					t.Run(fmt.Sprintf("%s %v %v %s", col.f.Name, codec, sizes, name), func(t *testing.T) {
						want := keptOf(t, descr, col.f.Type, in, codec, keep)
						defer want.Release()
						got, tr, err := transcodeChunk(t, props, descr, col.f.Type, in, keep, sizes[1])
						if err != nil {
							t.Fatal(err)
						}
						if wantBytes := encodeChunk(t, props, descr, want, sizes[1], 1).data; !bytes.Equal(got, wantBytes) {
							t.Fatalf("%d bytes, unlike the %d of the rows read and written", len(got), len(wantBytes))
						}
						l := want.(*array.List)
						lay := tr.Layout.(*array.List)
						if lay.Len() != l.Len() || tr.NonFinite {
							t.Fatalf("layout of %d rows (non-finite %v), want %d", lay.Len(), tr.NonFinite, l.Len())
						}
						for i := 0; i < l.Len(); i++ {
							lo, hi := l.ValueOffsets(i)
							glo, ghi := lay.ValueOffsets(i)
							if l.IsNull(i) != lay.IsNull(i) || hi-lo != ghi-glo {
								t.Fatalf("row %d: layout null %v, %d values; want %v, %d", i, lay.IsNull(i), ghi-glo, l.IsNull(i), hi-lo)
							}
						}
					})
				}
			}
		}
	}
	// Pages of more levels than the room left for them before the values:
	// rows of one value between null rows.
	const many = 40000
	lb = array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Int32)
	for i := 0; i < many; i++ {
		if i%2 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			lb.ValueBuilder().(*array.Int32Builder).Append(int32(i))
		}
	}
	dense := lb.NewArray()
	defer dense.Release()
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithStats(false), parquet.WithRootRepetition(parquet.Repetitions.Required))
	f := arrow.Field{Name: "dense", Type: dense.DataType(), Nullable: true}
	sc, err := pqarrow.ToParquet(arrow.NewSchema([]arrow.Field{f}, nil), props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for _, pageSize := range []int{1 << 20, 30000} {
		in := encodeChunk(t, props, sc.Column(0), dense, 1<<20, 1)
		for _, every := range []int{1, 3} {
			keep := make([]bool, many)
			for i := range keep {
				keep[i] = i%every == 0 || i%2 == 1
			}
			want := keptOf(t, sc.Column(0), f.Type, in, compress.Codecs.Uncompressed, keep)
			got, _, err := transcodeChunk(t, props, sc.Column(0), f.Type, in, keep, pageSize)
			if err != nil {
				t.Fatal(err)
			}
			if wantBytes := encodeChunk(t, props, sc.Column(0), want, pageSize, 1).data; !bytes.Equal(got, wantBytes) {
				t.Fatalf("dense levels, pages of %d: %d bytes, unlike the %d of the rows read and written", pageSize, len(got), len(wantBytes))
			}
			want.Release()
		}
	}
	// NaN in row 3: reported when row 3 is kept only.
	nan := array.NewSlice(rec.Column(0), 0, rows).(*array.List)
	defer nan.Release()
	lo, _ := nan.ValueOffsets(3)
	vals := nan.ListValues().(*array.Float32).Float32Values()
	old := vals[lo]
	vals[lo] = float32(math.NaN())
	defer func() { vals[lo] = old }()
	sc, err = pqarrow.ToParquet(rec.Schema(), props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	in := encodeChunk(t, props, sc.Column(0), nan, 1<<20, 1)
	for _, kept := range []bool{true, false} {
		keep := append([]bool(nil), keeps["all"]...)
		keep[3] = kept
		_, tr, err := transcodeChunk(t, props, sc.Column(0), rec.Schema().Field(0).Type, in, keep, 1<<20)
		if err != nil || tr.NonFinite != kept {
			t.Fatalf("NaN in row 3, kept %v: non-finite %v (%v)", kept, tr.NonFinite, err)
		}
	}
}
