package store

import (
	"encoding/binary"
	"io"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/ipc"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// ipcFileSource reads the Arrow IPC file format batch by batch.
type ipcFileSource struct {
	path  string
	stamp fileStamp
	f     handle
	r     *ipc.FileReader
	i     int
	cols  []int
	sc    *arrow.Schema
	cur   arrow.Record
}

// ipcStreamSource reads the Arrow IPC stream format.
type ipcStreamSource struct {
	path  string
	stamp fileStamp
	f     handle
	pos   *offsetReader // what arrow has read of f
	size  int64
	r     *ipc.Reader
	cols  []int
	sc    *arrow.Schema
	cur   arrow.Record
}

func openIPC(path string, f Format, cfg readConfig) (source, error) {
	fh, stamp, err := openHandle(cfg.ctx, path)
	if err != nil {
		return nil, err
	}
	kept := false
	defer closeUnless(&kept, fh)
	if err := checkIPC(fh, f, stamp.size); err != nil {
		return nil, fileError(path, err, "not a readable Arrow IPC store")
	}
	mem := ipcAllocator(cfg.mem, stamp.size)
	if f == ArrowFile {
		r, err := ipc.NewFileReader(fh, ipc.WithAllocator(mem))
		if err != nil {
			return nil, fileError(path, err, "not a readable Arrow IPC file")
		}
		cols := project(r.Schema(), cfg.columns)
		kept = true
		return &ipcFileSource{path: path, stamp: stamp, f: fh, r: r, cols: cols, sc: projectSchema(r.Schema(), cols)}, nil
	}
	pos := &offsetReader{r: fh}
	r, err := ipc.NewReader(pos, ipc.WithAllocator(mem))
	if err != nil {
		return nil, fileError(path, err, "not a readable Arrow IPC stream")
	}
	cols := project(r.Schema(), cfg.columns)
	kept = true
	return &ipcStreamSource{path: path, stamp: stamp, f: fh, pos: pos, size: stamp.size, r: r, cols: cols, sc: projectSchema(r.Schema(), cols)}, nil
}

func projectSchema(s *arrow.Schema, cols []int) *arrow.Schema {
	fs := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fs[i] = s.Field(c)
	}
	return arrow.NewSchema(fs, trinity.StoreMeta(s.Metadata()))
}

// projectRecord returns a record of the chosen columns (retained; the caller releases it).
func projectRecord(rec arrow.Record, sc *arrow.Schema, cols []int) arrow.Record {
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		arrs[i] = rec.Column(c)
	}
	return arrayRecord(sc, arrs, rec.NumRows())
}

func (s *ipcFileSource) Schema() *arrow.Schema { return s.sc }

func (s *ipcFileSource) Next() (arrow.Record, error) {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.i >= s.r.NumRecords() {
		if err := s.stamp.check(s.path); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	rec, err := s.r.Record(s.i)
	if err != nil {
		return nil, err
	}
	s.i++
	s.cur = projectRecord(rec, s.sc, s.cols)
	return s.cur, nil
}

func (s *ipcFileSource) Close() error {
	if s.cur != nil {
		s.cur.Release()
	}
	s.r.Close()
	return s.f.Close()
}

func (s *ipcStreamSource) Schema() *arrow.Schema { return s.sc }

func (s *ipcStreamSource) Next() (arrow.Record, error) {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	at := s.pos.n
	if _, _, err := messageAt(s.f, at, s.size); err != nil {
		return nil, err
	}
	if !s.r.Next() {
		if err := s.r.Err(); err != nil && err != io.EOF {
			return nil, err
		}
		return nil, s.end(at)
	}
	s.cur = projectRecord(s.r.Record(), s.sc, s.cols)
	return s.cur, nil
}

// end checks, where arrow's reader saw the stream end (at), that it ended with
// the end-of-stream marker (a stream cut at a message boundary otherwise
// reads as a shorter valid one) and that the file did not change meanwhile;
// io.EOF if so.
func (s *ipcStreamSource) end(at int64) error {
	var m [8]byte
	n, _ := s.f.ReadAt(m[:], at)
	eos := (n == 8 && binary.LittleEndian.Uint64(m[:]) == 0xFFFFFFFF) || // continuation, length 0
		(n >= 4 && binary.LittleEndian.Uint32(m[:4]) == 0) // the pre-1.0 marker: length 0
	if !eos {
		return schema.Errorf(s.path, -1, "", "Arrow IPC stream ends at byte %d without its end-of-stream marker (file cut?)", at)
	}
	if err := s.stamp.check(s.path); err != nil {
		return err
	}
	return io.EOF
}

func (s *ipcStreamSource) Close() error {
	if s.cur != nil {
		s.cur.Release()
	}
	s.r.Release()
	return s.f.Close()
}

type ipcSink struct {
	fw *ipc.FileWriter
	sw *ipc.Writer
}

func newIPCSink(w io.WriteSeeker, s *arrow.Schema, f Format) (sink, error) {
	if f == ArrowFile {
		fw, err := ipc.NewFileWriter(w, ipc.WithSchema(s))
		if err != nil {
			return nil, err
		}
		return &ipcSink{fw: fw}, nil
	}
	return &ipcSink{sw: ipc.NewWriter(w, ipc.WithSchema(s))}, nil
}

func (s *ipcSink) Write(rec arrow.Record) error {
	if s.fw != nil {
		return s.fw.Write(rec)
	}
	return s.sw.Write(rec)
}

func (s *ipcSink) Close() error {
	if s.fw != nil {
		return s.fw.Close()
	}
	return s.sw.Close()
}
