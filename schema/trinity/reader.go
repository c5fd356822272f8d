package trinity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	// Context, when set, stops connecting and reading when done (a
	// signal); the read stops at the latest on Close.
	Context context.Context
	// After, when not zero, reads only the rows whose id is greater than
	// its ID or in its holes: the query seeks on the primary key, rows
	// before are not scanned. Reader.Mark is the mark of the next read.
	After Mark
}

// ErrNoRows is the error (wrapped) of opening a buffer table that has no
// rows to read (none at all, or none after ReadOptions.After).
var ErrNoRows = errors.New("no rows")

// noRows is the input error of a table with no rows to read: it is
// ErrNoRows too.
type noRows struct{ error }

func (e noRows) Unwrap() error      { return e.error }
func (noRows) Is(target error) bool { return target == ErrNoRows }

// Reader streams a buffer table as record batches of the experience store,
// in id order, every row once whatever its consumed count: one query whose
// rows are decoded as they arrive, so memory stays bounded by the batch.
// Stepping the query, decoding the payloads and building the batches run on
// three goroutines (scan, decode, Next), handing chunks of rows along. A
// 0.6 buffer is read with one query too: the metadata table LEFT JOIN the
// blob table on id. A metadata row without its blob stops the read (exit 2,
// naming the ids), or with on_missing_blob=skip is left out and reported
// (MissingBlobs); blob rows without a metadata row are reported
// (OrphanBlobs) once the table has been read. A PostgreSQL table is read in
// one REPEATABLE READ read-only transaction: its rows, blobs and orphan
// check are one snapshot (Mark).
type Reader struct {
	loc     Location
	kind    Kind
	layout  Layout
	db      *sql.DB
	tx      *sql.Tx            // PostgreSQL's snapshot
	q       querier            // tx, or db
	ctx     context.Context    // the read's: a signal stops its queries
	cancel  context.CancelFunc // stops the query
	ch      <-chan chunk       // rows scanned and decoded ahead
	free    chan chunk         // chunks Next is done with, for the scanner to reuse
	done    chan struct{}      // closed by Close: the scanner and decoder stop
	wg      sync.WaitGroup
	chunk   chunk
	ci      int // next row of chunk
	schema  *arrow.Schema
	bld     *array.RecordBuilder
	app     []appender
	batch   int
	cur     arrow.Record
	rec     *record // the current row's, in chunk
	pending bool    // rec holds the first row, not yet appended
	row     int64   // index of the row being decoded
	id      int64
	buf     []byte
	missing idList // metadata ids without a blob, skipped
	orphans idList // blob ids without a metadata row
	ended   bool   // the table was read to its end
	span    idSpan // the metadata ids above After.ID read, for the orphan-blob check
	prevID  int64  // the id read last (any)
	after   Mark   // ReadOptions.After
	kept    []Holes
	open    []string  // PostgreSQL: the transactions in flight at the snapshot
	holes   []IDRange // PostgreSQL: the ids above After.ID not seen
	budget  int       // the hole ranges holes may have
	inHoles []int64   // the ids read in After's holes
	cut     bool      // the read stopped early: holes had their budget
	seqWarn string    // sequenceWarning's
}

// idSpan follows the metadata ids a read yields (in increasing order): the
// first and last, and the gaps between them, so that the blob rows no
// metadata row names are found by seeks on the blob table's key, not by a
// second scan of its payloads. Past maxGaps gaps it gives up (many).
type idSpan struct {
	// after: the read's After.ID (when positive, the ids up to it were
	// checked by the reads before it); cut: the read stopped at last, the
	// ids above are the next read's to check
	after       int64
	cut         bool
	seen        bool
	first, last int64
	gaps        [][2]int64 // open intervals (a, b) holding no metadata id
	many        bool
}

const maxGaps = 64

func (s *idSpan) add(id int64) {
	switch {
	case !s.seen:
		s.seen, s.first = true, id
	case id > s.last+1 && !s.many:
		if len(s.gaps) == maxGaps {
			s.many, s.gaps = true, nil
		} else {
			s.gaps = append(s.gaps, [2]int64{s.last, id})
		}
	}
	s.last = id
}

// outside returns the query of the ids of table (quoted) outside the
// span's metadata ids, in order, "" when the span cannot tell (nothing
// read, or too many gaps). Each range is a SELECT of its own, joined by
// UNION ALL: a range on the key is a seek, where SQLite answers one WHERE
// of ranges joined by OR with a scan of the whole table.
func (s *idSpan) outside(table string) string {
	if !s.seen || s.many {
		return ""
	}
	below := fmt.Sprintf("id < %d", s.first)
	if s.after > 0 {
		below = fmt.Sprintf("id > %d AND id < %d", s.after, s.first)
	}
	ranges := []string{below}
	if !s.cut {
		ranges = append(ranges, fmt.Sprintf("id > %d", s.last))
	}
	for _, g := range s.gaps {
		ranges = append(ranges, fmt.Sprintf("id > %d AND id < %d", g[0], g[1]))
	}
	for i, r := range ranges {
		ranges[i] = "SELECT id FROM " + table + " WHERE " + r
	}
	return strings.Join(ranges, " UNION ALL ") + " ORDER BY id"
}

// idList counts ids and keeps the first few, for messages.
type idList struct {
	n     int64
	first []int64
}

const idsShown = 10

func (l *idList) add(id int64) {
	l.n++
	if len(l.first) < idsShown {
		l.first = append(l.first, id)
	}
}

// String lists the ids: "7", "7, 9 and 3 more".
func (l idList) String() string {
	parts := make([]string, len(l.first))
	for i, id := range l.first {
		parts[i] = strconv.FormatInt(id, 10)
	}
	s := strings.Join(parts, ", ")
	if more := l.n - int64(len(l.first)); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// Open opens a buffer table for reading.
func Open(rawURL string, opt ReadOptions) (*Reader, error) {
	loc, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	db, err := open(ctx, loc, false)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &Reader{loc: loc, db: db, q: db, ctx: ctx, cancel: cancel, batch: opt.BatchRows, span: idSpan{after: opt.After.ID},
		prevID: -1, after: opt.After}
	if r.batch <= 0 {
		r.batch = 8192
	}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	if loc.Driver == "pgx" {
		if err := r.snapshot(); err != nil {
			return nil, err
		}
	}
	kind, lay, exists, err := tableKind(ctx, r.q, loc)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, badTable(loc, "no such table")
	}
	if r.tx != nil {
		if r.seqWarn, err = sequenceWarning(ctx, r.q, loc); err != nil {
			return nil, err
		}
	}
	if loc.Kind != "" && loc.Kind != kind {
		return nil, badTable(loc, "schema_type=%s, but the table is a %s table", loc.Kind, kind)
	}
	if loc.Layout != "" && loc.Layout != lay {
		return nil, badTable(loc, "layout=%s, but the table has the %s layout", loc.Layout, lay)
	}
	r.kind, r.layout = kind, lay
	rows, err := r.q.QueryContext(ctx, selectSQL(loc, kind, lay, opt.After))
	if err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return nil, locErr(loc, "cannot read table %s: %v", loc.Table, err)
	}
	scanned, decoded := make(chan chunk, 1), make(chan chunk, 1)
	r.ch, r.done, r.free = decoded, make(chan struct{}), make(chan chunk, chunksInFlight)
	r.wg.Add(2)
	go r.scan(rows, scanned, r.done)
	go r.decode(scanned, decoded, r.done)
	// The first row fixes the types of batch and task, as in a JSONL store.
	more, err := r.decodeNext()
	if err != nil {
		return nil, err
	}
	if !more {
		if r.missing.n > 0 {
			return nil, badTable(loc, "no experiences: every one of its %d metadata row(s) lacks its blob row (on_missing_blob=skip skipped them all): id %s", r.missing.n, r.missing)
		}
		if opt.After.ID > 0 || len(opt.After.Holes) > 0 {
			return nil, noRows{badTable(loc, "no rows after id %d", opt.After.ID)}
		}
		return nil, noRows{badTable(loc, "empty table: no experiences")}
	}
	r.pending = true
	_, strBatch := r.rec.batch.(string)
	_, strTask := r.rec.task.(string)
	r.schema = kind.storeSchema(lay, strBatch, strTask || kind == KindExperience, opt.Columns)
	mem := opt.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	r.bld = array.NewRecordBuilder(mem, r.schema)
	r.app = appenders(r.schema)
	ok = true
	return r, nil
}

// snapshot begins PostgreSQL's read: it asks which transactions of the
// holes of r.after are still in flight, then takes the snapshot of the read
// in a REPEATABLE READ read-only transaction and lists the transactions in
// flight right after it (Mark).
func (r *Reader) snapshot() error {
	if len(r.after.Holes) > 0 {
		open, err := inFlight(r.ctx, r.db, r.loc)
		if err != nil {
			return err
		}
		r.kept = stillOpen(r.after.Holes, open)
	}
	r.budget = maxHoleRanges - holeRanges(r.after.Holes)
	tx, err := r.db.BeginTx(r.ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return locErr(r.loc, "cannot begin the read: %v", err)
	}
	r.tx, r.q = tx, tx
	r.open, err = inFlight(r.ctx, tx, r.loc) // its first statement: the snapshot
	return err
}

// selectSQL returns the query that reads a buffer in id order from the
// first id after after.ID, and the ids in its holes: id, the inline payload (0.5, mixed), the blob's id
// and payload (0.6, mixed), then an experience table's columns.
func selectSQL(loc Location, k Kind, lay Layout, after Mark) string {
	cols := []string{"m.id"}
	if lay != Layout06 {
		cols = append(cols, "m.experience_bytes")
	}
	if lay != Layout05 {
		cols = append(cols, "b.id", "b.experience_bytes")
	}
	if k == KindExperience {
		cols = append(cols, "m.task_id", "m.run_id", "m.msg_id", "m.model_version", "m.reward")
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + quoteIdent(loc.Table) + " m"
	if lay != Layout05 {
		q += " LEFT JOIN " + quoteIdent(blobTable(loc)) + " b ON b.id = m.id"
	}
	if after.ID > 0 {
		q += " WHERE m.id > " + strconv.FormatInt(after.ID, 10)
		if h := holeWhere("m.id", after.Holes); h != "" {
			q += " OR " + h
		}
	}
	return q + " ORDER BY m.id"
}

// Mark returns where the next read resumes (ReadOptions.After), once the
// table has been read to its end: the greatest id read (After's when none
// was), and on PostgreSQL the ids below it not seen that may still be
// committed: the holes of After not read whose transactions were still in
// flight, and the ids skipped by this read while a transaction was in
// flight (Mark).
func (r *Reader) Mark() Mark {
	m := Mark{ID: r.after.ID}
	if r.span.seen {
		m.ID = r.span.last
	}
	for _, h := range r.kept {
		if ids := without(h.IDs, r.inHoles); len(ids) > 0 {
			m.Holes = append(m.Holes, Holes{IDs: ids, Open: h.Open})
		}
	}
	if len(r.holes) > 0 && len(r.open) > 0 {
		m.Holes = append(m.Holes, Holes{IDs: r.holes, Open: r.open})
	}
	return m
}

// without returns the ranges rs less the ids (in increasing order).
func without(rs []IDRange, ids []int64) []IDRange {
	var out []IDRange
	for _, rg := range rs {
		lo := rg[0]
		for _, id := range ids {
			if id < lo || id > rg[1] {
				continue
			}
			if id > lo {
				out = append(out, IDRange{lo, id - 1})
			}
			lo = id + 1
		}
		if lo <= rg[1] {
			out = append(out, IDRange{lo, rg[1]})
		}
	}
	return out
}

// Kind returns the table's schema type.
func (r *Reader) Kind() Kind { return r.kind }

// Layout returns the buffer's layout, as its tables show it.
func (r *Reader) Layout() Layout { return r.layout }

// MissingBlobs returns the number of metadata rows read without a blob row
// (skipped; on_missing_blob=skip) and a one-line list of their ids.
func (r *Reader) MissingBlobs() (int64, string) { return r.missing.n, r.missing.String() }

// OrphanBlobs returns the number of blob rows without a metadata row and a
// one-line list of their ids, known once the table has been read to its
// end (0 before, and for a 0.5 table).
func (r *Reader) OrphanBlobs() (int64, string) { return r.orphans.n, r.orphans.String() }

// Counts returns the missing and orphan blob counts under their metric
// names (0.6 and mixed buffers).
func (r *Reader) Counts() map[string]int64 {
	if r.layout == Layout05 {
		return nil
	}
	return map[string]int64{"trinity/missing_blob_skipped": r.missing.n, "trinity/orphan_blobs": r.orphans.n}
}

// Warnings returns what a reader of the whole table should be told: the
// metadata rows skipped for a missing blob and the blob rows no metadata row
// names. Complete once the table has been read to its end.
func (r *Reader) Warnings() []string {
	var out []string
	if r.seqWarn != "" {
		out = append(out, r.seqWarn)
	}
	if r.cut {
		out = append(out, fmt.Sprintf("%s: table %s: read up to id %d: %d ranges of ids not yet committed are kept, the most; the next read reads on",
			r.loc, r.loc.Table, r.span.last, maxHoleRanges))
	}
	if r.missing.n > 0 {
		out = append(out, fmt.Sprintf("%s: table %s: skipped %d metadata row(s) without a blob row in %s (on_missing_blob=skip): id %s",
			r.loc, r.loc.Table, r.missing.n, blobTable(r.loc), r.missing))
	}
	if r.orphans.n > 0 {
		out = append(out, fmt.Sprintf("%s: table %s: %d blob row(s) without a metadata row in %s, not read: id %s",
			r.loc, blobTable(r.loc), r.orphans.n, r.loc.Table, r.orphans))
	}
	return out
}

// Schema returns the store schema the batches have.
func (r *Reader) Schema() *arrow.Schema { return r.schema }

// rawRow is a table row as scanned, and its record as decoded ahead.
type rawRow struct {
	id      int64
	blob    []byte // nil when NULL
	missing bool   // 0.6: no blob row
	cols    tableCols
	vals    struct {
		task, msg string
		run, mv   int64
		reward    float64
	}
	rec record      // decode's
	bad *fieldError // why the row does not decode (decode's)
}

// chunk is a run of rows the scanning goroutine read ahead; err ends the
// table after them.
type chunk struct {
	rows  []rawRow
	arena []byte // holds the blobs
	err   error
}

const (
	chunkRows = 256
	// chunksInFlight is how many chunks the three goroutines hold at most
	// besides the one being scanned: one in each channel, one decoding,
	// one being built into batches.
	chunksInFlight = 4
)

// scan reads the query's rows on its own goroutine, so that SQLite's (or
// the network's) work overlaps decoding; at most one chunk waits for the
// decoder. A chunk's rows and their records' buffers are reused.
func (r *Reader) scan(rows *sql.Rows, out chan<- chunk, done <-chan struct{}) {
	defer r.wg.Done()
	defer close(out)
	defer rows.Close()
	var n int64
	var dest []any
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
				inline sql.RawBytes
				blobID sql.NullInt64
				blob   sql.RawBytes
				task   sql.NullString
				msg    sql.NullString
				run    sql.NullInt64
				mv     sql.NullInt64
				rw     sql.NullFloat64
			)
			if len(c.rows) < cap(c.rows) {
				c.rows = c.rows[:len(c.rows)+1]
			} else {
				c.rows = append(c.rows, rawRow{})
			}
			raw := &c.rows[len(c.rows)-1]
			raw.blob, raw.missing = nil, false
			dest := append(dest[:0], &raw.id)
			if r.layout != Layout06 {
				dest = append(dest, &inline)
			}
			if r.layout != Layout05 {
				dest = append(dest, &blobID, &blob)
			}
			if r.kind == KindExperience {
				dest = append(dest, &task, &run, &msg, &mv, &rw)
			}
			err := rows.Scan(dest...)
			if err == nil {
				switch {
				case r.layout == Layout05:
					blob = inline
				case inline != nil && blobID.Valid:
					err = fmt.Errorf("id %d has a payload in both %s.experience_bytes and %s: a mixed 0.5/0.6 table whose row is ambiguous", raw.id, r.loc.Table, blobTable(r.loc))
				case inline != nil:
					blob = inline
				case !blobID.Valid:
					raw.missing = true
				}
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

// decode decodes the payloads of the chunks scan reads, on a goroutine of
// its own, into their rows' records; Next only checks the rows in order and
// builds the batches. At most one chunk waits for Next.
func (r *Reader) decode(in <-chan chunk, out chan<- chunk, done <-chan struct{}) {
	defer r.wg.Done()
	defer close(out)
	for c := range in {
		for i := range c.rows {
			raw := &c.rows[i]
			if raw.bad = nil; raw.missing {
				continue
			}
			var cols *tableCols
			if r.kind == KindExperience {
				cols = &raw.cols
			}
			p, fe := decodePayload(raw.blob)
			if fe == nil {
				fe = raw.rec.fromPayload(p, cols)
			}
			if fe == nil {
				fe = r.kind.check(&raw.rec)
			}
			raw.bad = fe
		}
		select {
		case out <- c:
		case <-done:
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

// errMissingBlob is decodeRow's word for a metadata row without a blob.
var errMissingBlob = errors.New("missing blob")

// decodeNext moves r.rec to the next row, skipping (on_missing_blob=
// skip) or refusing metadata rows without a blob; at the end of a 0.6 table
// it looks for blob rows without metadata.
func (r *Reader) decodeNext() (bool, error) {
	for {
		more, err := r.decodeRow()
		switch {
		case err == errMissingBlob && r.loc.SkipMissingBlobs:
			r.missing.add(r.id)
		case err == errMissingBlob:
			return false, r.missingBlobErr()
		case err == nil && !more:
			return false, r.atEnd()
		default:
			return more, err
		}
	}
}

// missingBlobErr stops the read and names every metadata id without a blob.
func (r *Reader) missingBlobErr() error {
	id := r.id
	r.stopScan()
	q := "SELECT m.id FROM " + quoteIdent(r.loc.Table) + " m LEFT JOIN " + quoteIdent(blobTable(r.loc)) + " b ON b.id = m.id WHERE b.id IS NULL"
	if r.layout == LayoutMixed {
		q += " AND m.experience_bytes IS NULL"
	}
	var ids idList
	if err := r.ids(q+" ORDER BY m.id", &ids); err != nil || ids.n == 0 {
		ids = idList{}
		ids.add(id)
	}
	return schema.Errorf(r.loc.String(), -1, "", "table %s: %d metadata row(s) without a blob row in %s: id %s (Trinity's reader skips them with a log line only; add &on_missing_blob=skip to the URL to read the rest)",
		r.loc.Table, ids.n, blobTable(r.loc), ids)
}

// duplicateErr stops the read at an id the join gave twice: a blob table
// (or a metadata table) whose ids are not unique, which would otherwise
// read as extra rows. It names the table and how many rows hold the id.
func (r *Reader) duplicateErr(id int64) error {
	r.stopScan()
	q := fmt.Sprintf("SELECT (SELECT count(*) FROM %s WHERE id = %d), (SELECT count(*) FROM %s WHERE id = %d)",
		quoteIdent(r.loc.Table), id, quoteIdent(blobTable(r.loc)), id)
	var nMeta, nBlob int64
	if err := r.q.QueryRowContext(r.ctx, q).Scan(&nMeta, &nBlob); err != nil {
		return locErr(r.loc, "cannot read table %s: %v", blobTable(r.loc), err)
	}
	table, n := blobTable(r.loc), nBlob
	if nBlob < 2 {
		table, n = r.loc.Table, nMeta
	}
	return schema.Errorf(r.loc.String(), r.row, "id", "table %s, id %d: %d rows hold this id; a buffer table's ids are unique (upstream's tables are keyed on id), so the rows cannot be told apart",
		table, id, n)
}

// atEnd runs once the query is exhausted: blob rows no metadata row names.
func (r *Reader) atEnd() error {
	if r.ended || r.layout == Layout05 {
		return nil
	}
	r.ended = true
	r.stopScan()
	// Every blob row whose id a metadata row has was met by the join: the
	// orphans are the blob ids outside the metadata ids read (above an
	// incremental read's After.ID: the reads before it checked the ids up
	// to it), found by range seeks. Without a span (nothing read, many
	// gaps), an anti-join; in After's holes, an anti-join too.
	r.span.cut = r.cut
	antiJoin := "SELECT b.id FROM " + quoteIdent(blobTable(r.loc)) + " b LEFT JOIN " + quoteIdent(r.loc.Table) + " m ON m.id = b.id WHERE m.id IS NULL"
	q := r.span.outside(quoteIdent(blobTable(r.loc)))
	if q == "" {
		q = antiJoin
		if r.span.after > 0 {
			q += " AND b.id > " + strconv.FormatInt(r.span.after, 10)
		}
		if r.cut {
			q += " AND b.id <= " + strconv.FormatInt(r.span.last, 10)
		}
		q += " ORDER BY b.id"
	}
	if h := holeWhere("b.id", r.after.Holes); h != "" {
		if err := r.ids(antiJoin+" AND ("+h+") ORDER BY b.id", &r.orphans); err != nil {
			return err
		}
	}
	return r.ids(q, &r.orphans)
}

// ids adds the ids a query returns to l.
func (r *Reader) ids(q string, l *idList) error {
	rows, err := r.q.QueryContext(r.ctx, q)
	if err != nil {
		if r.ctx.Err() != nil {
			return context.Cause(r.ctx)
		}
		return locErr(r.loc, "cannot read table %s: %v", blobTable(r.loc), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return locErr(r.loc, "cannot read table %s: %v", blobTable(r.loc), err)
		}
		l.add(id)
	}
	if err := rows.Err(); err != nil {
		return locErr(r.loc, "cannot read table %s: %v", blobTable(r.loc), err)
	}
	return nil
}

// stopScan stops the scanning and decoding goroutines, which frees the
// connection.
func (r *Reader) stopScan() {
	if r.done != nil {
		close(r.done)
		r.wg.Wait()
		r.done = nil
	}
}

// decodeRow moves r.rec to the next row, decoded ahead by decode.
func (r *Reader) decodeRow() (bool, error) {
	if r.cut {
		return false, nil
	}
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
	if r.layout != Layout05 && raw.id == r.prevID {
		return false, r.duplicateErr(raw.id)
	}
	if raw.id <= r.after.ID {
		r.inHoles = append(r.inHoles, raw.id)
	} else if !r.newID(raw.id) {
		r.cut = true
		return false, nil
	}
	r.id, r.prevID = raw.id, raw.id
	if raw.missing {
		return false, errMissingBlob
	}
	if raw.bad != nil {
		return false, r.rowErr(raw.bad)
	}
	r.rec = &raw.rec
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
			if fe := app(r.bld.Field(i), r.rec, &r.buf); fe != nil {
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
	r.cancel()
	r.stopScan()
	var err error
	if r.tx != nil {
		r.tx.Rollback() // read only; the cancel may have ended it already
		r.tx = nil
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

// newID adds an id above After.ID to the span and, on PostgreSQL with
// transactions in flight (none: every id skipped was rolled back), the ids
// it skips to the holes; false when that would pass the holes' budget (the
// read stops before it).
func (r *Reader) newID(id int64) bool {
	if len(r.open) > 0 {
		prev := r.after.ID
		if r.span.seen {
			prev = r.span.last
		}
		if id > prev+1 {
			if len(r.holes) == r.budget {
				return false
			}
			r.holes = append(r.holes, IDRange{prev + 1, id - 1})
		}
	}
	r.span.add(id)
	return true
}
