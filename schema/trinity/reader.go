package trinity

import (
	"database/sql"
	"fmt"
	"io"

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
	rows    *sql.Rows
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
	if r.rows, err = db.Query(q); err != nil {
		return nil, locErr(loc, "cannot read table %s: %v", loc.Table, err)
	}
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

// decodeNext scans and decodes the next row into r.rec.
func (r *Reader) decodeNext() (bool, error) {
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return false, locErr(r.loc, "reading table %s near row %d: %v", r.loc.Table, r.row, err)
		}
		return false, nil
	}
	var (
		blob sql.RawBytes
		task sql.NullString
		msg  sql.NullString
		run  sql.NullInt64
		mv   sql.NullInt64
		rw   sql.NullFloat64
		err  error
	)
	if r.kind == KindExperience {
		err = r.rows.Scan(&r.id, &blob, &task, &run, &msg, &mv, &rw)
	} else {
		err = r.rows.Scan(&r.id, &blob)
	}
	if err != nil {
		return false, schema.Errorf(r.loc.String(), r.row, "", "table %s: cannot read the row: %v", r.loc.Table, err)
	}
	var cols *tableCols
	if r.kind == KindExperience {
		cols = &tableCols{}
		if task.Valid {
			cols.taskID = &task.String
		}
		if msg.Valid {
			cols.msgID = &msg.String
		}
		if run.Valid {
			cols.runID = &run.Int64
		}
		if mv.Valid {
			cols.modelVersion = &mv.Int64
		}
		if rw.Valid {
			cols.reward = &rw.Float64
		}
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
	var err error
	if r.rows != nil {
		err = r.rows.Close()
		r.rows = nil
	}
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
