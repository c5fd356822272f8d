package trinity

import (
	"database/sql"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"

	"github.com/rftpipe/rftpipe/schema"
)

// ReadOptions configures Open.
type ReadOptions struct {
	Columns   []string // store columns to yield (all when empty)
	BatchRows int      // rows per record batch (8192 when 0)
	Mem       memory.Allocator
}

// Reader streams a buffer table as record batches of the experience store,
// in id order, every row once whatever its consumed count: one query whose
// rows are decoded as they arrive, so memory stays bounded by the batch.
type Reader struct {
	loc     Location
	kind    Kind
	db      *sql.DB
	ch      <-chan chunk  // rows scanned ahead
	free    chan chunk    // decoded chunks, for the scanner to reuse
	done    chan struct{} // closed by Close: the scanner stops
	wg      sync.WaitGroup
	chunk   chunk
	ci      int // next row of chunk
	schema  *arrow.Schema
	bld     *array.RecordBuilder
	app     []appender
	batch   int
	cur     arrow.Record
	rec     record
	pending bool  // rec holds the first row, not yet appended
	row     int64 // index of the row being decoded
	id      int64
	buf     []byte
}

// Open opens a buffer table for reading.
func Open(rawURL string, opt ReadOptions) (*Reader, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	db, err := open(loc, false)
	if err != nil {
		return nil, err
	}
	r := &Reader{loc: loc, db: db, batch: opt.BatchRows}
	if r.batch <= 0 {
		r.batch = 8192
	}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	kind, exists, err := tableKind(db, loc)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, badTable(loc, "no such table")
	}
	if loc.Kind != "" && loc.Kind != kind {
		return nil, badTable(loc, "schema_type=%s, but the table is a %s table", loc.Kind, kind)
	}
	r.kind = kind
	q := "SELECT id, experience_bytes FROM " + quoteIdent(loc.Table) + " ORDER BY id"
	if kind == KindExperience {
		q = "SELECT id, experience_bytes, task_id, run_id, msg_id, model_version, reward FROM " + quoteIdent(loc.Table) + " ORDER BY id"
	}
	rows, err := db.Query(q)
	if err != nil {
		return nil, locErr(loc, "cannot read table %s: %v", loc.Table, err)
	}
	ch := make(chan chunk, 1)
	r.ch, r.done, r.free = ch, make(chan struct{}), make(chan chunk, 2)
	r.wg.Add(1)
	go r.scan(rows, ch, r.done)
	// The first row fixes the types of batch and task, as in a JSONL store.
	more, err := r.decodeNext()
	if err != nil {
		return nil, err
	}
	if !more {
		return nil, badTable(loc, "empty table: no experiences")
	}
	r.pending = true
	_, strBatch := r.rec.batch.(string)
	_, strTask := r.rec.task.(string)
	r.schema = kind.storeSchema(strBatch, strTask || kind == KindExperience, opt.Columns)
	mem := opt.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	r.bld = array.NewRecordBuilder(mem, r.schema)
	r.app = appenders(r.schema)
	ok = true
	return r, nil
}

// Kind returns the table's layout.
func (r *Reader) Kind() Kind { return r.kind }

// Schema returns the store schema the batches have.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// rawRow is a table row as scanned, before decoding.
type rawRow struct {
	id   int64
	blob []byte // nil when NULL
	cols tableCols
	vals struct {
		task, msg string
		run, mv   int64
		reward    float64
	}
}

// chunk is a run of rows the scanning goroutine read ahead; err ends the
// table after them.
type chunk struct {
	rows  []rawRow
	arena []byte // holds the blobs
	err   error
}

const chunkRows = 256

// scan reads the query's rows on its own goroutine, so that SQLite's (or
// the network's) work overlaps decoding; at most two chunks wait.
func (r *Reader) scan(rows *sql.Rows, out chan<- chunk, done <-chan struct{}) {
	defer r.wg.Done()
	defer close(out)
	defer rows.Close()
	var n int64
	for {
		var c chunk
		var arena []byte
		select {
		case old := <-r.free: // a chunk the decoder is done with
			c.rows, arena = old.rows[:0], old.arena[:0]
		default:
			c.rows, arena = make([]rawRow, 0, chunkRows), make([]byte, 0, 1<<20)
		}
		for len(c.rows) < chunkRows && rows.Next() {
			var (
				blob sql.RawBytes
				task sql.NullString
				msg  sql.NullString
				run  sql.NullInt64
				mv   sql.NullInt64
				rw   sql.NullFloat64
				err  error
			)
			c.rows = append(c.rows, rawRow{})
			raw := &c.rows[len(c.rows)-1]
			if r.kind == KindExperience {
				err = rows.Scan(&raw.id, &blob, &task, &run, &msg, &mv, &rw)
			} else {
				err = rows.Scan(&raw.id, &blob)
			}
			if err != nil {
				c.rows = c.rows[:len(c.rows)-1]
				c.err = schema.Errorf(r.loc.String(), n, "", "table %s: cannot read the row: %v", r.loc.Table, err)
				break
			}
			n++
			if blob != nil {
				if len(arena)+len(blob) > cap(arena) {
					arena = make([]byte, 0, max(2*cap(arena), len(blob)))
				}
				arena = append(arena, blob...)
				raw.blob = arena[len(arena)-len(blob) : len(arena) : len(arena)]
			}
			v := &raw.vals
			v.task, v.msg, v.run, v.mv, v.reward = task.String, msg.String, run.Int64, mv.Int64, rw.Float64
			raw.cols = tableCols{
				taskID: ptrTo(task.Valid, &v.task), msgID: ptrTo(msg.Valid, &v.msg),
				runID: ptrTo(run.Valid, &v.run), modelVersion: ptrTo(mv.Valid, &v.mv), reward: ptrTo(rw.Valid, &v.reward),
			}
		}
		if c.err == nil {
			if err := rows.Err(); err != nil {
				c.err = locErr(r.loc, "reading table %s near row %d: %v", r.loc.Table, n, err)
			}
		}
		c.arena = arena
		if len(c.rows) == 0 && c.err == nil {
			return
		}
		select {
		case out <- c:
		case <-done:
			return
		}
		if c.err != nil || len(c.rows) < chunkRows {
			return
		}
	}
}

func ptrTo[T any](ok bool, p *T) *T {
	if !ok {
		return nil
	}
	return p
}

// decodeNext decodes the next row into r.rec.
func (r *Reader) decodeNext() (bool, error) {
	for r.ci >= len(r.chunk.rows) {
		if r.chunk.err != nil {
			return false, r.chunk.err
		}
		if r.chunk.rows != nil {
			select { // hand the buffers back for reuse
			case r.free <- r.chunk:
			default:
			}
		}
		c, ok := <-r.ch
		if !ok {
			r.chunk = chunk{}
			return false, nil
		}
		r.chunk, r.ci = c, 0
	}
	raw := &r.chunk.rows[r.ci]
	r.ci++
	r.id = raw.id
	blob := raw.blob
	var cols *tableCols
	if r.kind == KindExperience {
		cols = &raw.cols
	}
	p, fe := decodePayload(blob)
	if fe == nil {
		fe = r.rec.fromPayload(p, cols)
	}
	if fe == nil {
		fe = r.kind.check(&r.rec)
	}
	if fe != nil {
		return false, r.rowErr(fe)
	}
	return true, nil
}

func (r *Reader) rowErr(fe *fieldError) error {
	return schema.Errorf(r.loc.String(), r.row, fe.field, "table %s, id %d: %s", r.loc.Table, r.id, fe.msg)
}

// Next returns the next batch, valid until the following call, or io.EOF.
func (r *Reader) Next() (arrow.Record, error) {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	n := 0
	for n < r.batch {
		if !r.pending {
			more, err := r.decodeNext()
			if err != nil {
				return nil, err
			}
			if !more {
				break
			}
		}
		r.pending = false
		for i, app := range r.app {
			if fe := app(r.bld.Field(i), &r.rec, &r.buf); fe != nil {
				return nil, r.rowErr(fe)
			}
		}
		r.row++
		n++
	}
	if n == 0 {
		return nil, io.EOF
	}
	r.cur = r.bld.NewRecord()
	return r.cur, nil
}

// Close releases the query and the connection.
func (r *Reader) Close() error {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.bld != nil {
		r.bld.Release()
		r.bld = nil
	}
	if r.done != nil {
		close(r.done)
		r.wg.Wait()
		r.done = nil
	}
	var err error
	if r.db != nil {
		if cerr := r.db.Close(); err == nil {
			err = cerr
		}
		r.db = nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.loc, err)
	}
	return nil
}
