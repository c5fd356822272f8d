package trinity

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mark is where an incremental read of a buffer resumes: past ID, the
// greatest id read, and at the Holes below it.
//
// PostgreSQL hands out ids (the table's sequence, nextval) before commit,
// so a transaction that drew id 4 may commit after the one that drew id 5.
// A PostgreSQL read is one REPEATABLE READ snapshot; every id up to the
// greatest it saw that it did not see is a hole: drawn before that id
// (sequences are monotonic), by a transaction that rolled back or was in
// flight at the snapshot. A hole is kept with the transactions in flight
// right after the snapshot; a later read first asks which of them are still
// in flight, then takes its snapshot, and reads the holes with the new ids:
// a hole seen is read, one whose transactions have all ended is dropped
// (its row will never appear), the others are kept.
//
// This assumes the ids come from the table's own sequence, drawn by the
// transaction that inserts the row (SERIAL or identity, as Trinity-RFT's
// tables have) with cache 1: a sequence that caches ids per session hands
// them out of order across sessions, and the read warns. SQLite serialises
// its writers, so its ids commit in order and a read leaves no holes.
type Mark struct {
	ID    int64
	Holes []Holes
}

// Holes are ids below a Mark's ID that its read did not see, and the
// transactions that may still commit them.
type Holes struct {
	IDs []IDRange `json:"ids"`
	// Open are the transactions in flight right after the snapshot (a
	// virtual transaction id, or "xid N" for a prepared transaction).
	Open []string `json:"open"`
}

// IDRange is the ids from the first to the last, both included.
type IDRange [2]int64

// maxHoleRanges bounds the hole ranges a Mark keeps: a read whose new holes
// would pass it stops before the row that opens one more (the rest is read
// by the next read).
const maxHoleRanges = 1024

// markJSON is a Mark with holes as written.
type markJSON struct {
	ID    int64   `json:"id"`
	Holes []Holes `json:"holes"`
}

// String writes the mark: the id alone when there are no holes (as every
// mark was before holes), else JSON, ranges and transactions in order.
func (m Mark) String() string {
	if len(m.Holes) == 0 {
		return strconv.FormatInt(m.ID, 10)
	}
	b, _ := json.Marshal(markJSON(m))
	return string(b)
}

// ParseMark reads a mark String wrote ("" is the mark of nothing read).
func ParseMark(s string) (Mark, error) {
	if s == "" {
		return Mark{}, nil
	}
	if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		return Mark{ID: id}, nil
	}
	var m markJSON
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Mark{}, fmt.Errorf("not an id or a JSON mark: %v", err)
	}
	for _, h := range m.Holes {
		for _, r := range h.IDs {
			if r[0] > r[1] || r[1] >= m.ID {
				return Mark{}, fmt.Errorf("hole range %d-%d outside the ids below %d", r[0], r[1], m.ID)
			}
		}
	}
	return Mark(m), nil
}

// holeRanges returns the number of ranges of hs.
func holeRanges(hs []Holes) int {
	n := 0
	for _, h := range hs {
		n += len(h.IDs)
	}
	return n
}

// holeWhere returns the condition "col BETWEEN a AND b OR …" of the ids of
// hs, "" when none.
func holeWhere(col string, hs []Holes) string {
	var or []string
	for _, h := range hs {
		for _, r := range h.IDs {
			or = append(or, fmt.Sprintf("%s BETWEEN %d AND %d", col, r[0], r[1]))
		}
	}
	return strings.Join(or, " OR ")
}

// inFlightSQL lists the transactions in flight but the asking one: each
// holds the lock on its virtual transaction id from its start to its end; a
// prepared transaction has given it up and is listed by its xid.
const inFlightSQL = `SELECT virtualxid FROM pg_locks WHERE locktype = 'virtualxid' AND granted AND pid <> pg_backend_pid()
	UNION SELECT 'xid ' || transaction::text FROM pg_prepared_xacts ORDER BY 1`

// inFlight returns the transactions in flight (inFlightSQL), sorted.
func inFlight(ctx context.Context, db querier, loc Location) ([]string, error) {
	var out []string
	err := setup(ctx, loc, "cannot list the transactions in flight", func(ctx context.Context) error {
		rows, err := db.QueryContext(ctx, inFlightSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, locErr(loc, "cannot list the transactions in flight: %v", err)
	}
	return out, nil
}

// stillOpen returns the holes of hs whose transactions may still be in
// flight (one of them is in open), each with those transactions only.
func stillOpen(hs []Holes, open []string) []Holes {
	var out []Holes
	for _, h := range hs {
		var o []string
		for _, t := range h.Open {
			if _, found := slices.BinarySearch(open, t); found {
				o = append(o, t)
			}
		}
		if len(o) > 0 {
			out = append(out, Holes{IDs: h.IDs, Open: o})
		}
	}
	return out
}

// sequenceWarning checks the assumption of Mark: the table's ids come from
// a sequence of its own with cache 1. It returns what is wrong, "" when
// nothing is.
func sequenceWarning(ctx context.Context, db querier, loc Location) (string, error) {
	var cache []int64
	err := setup(ctx, loc, "cannot read the id sequence", func(ctx context.Context) error {
		rows, err := db.QueryContext(ctx, "SELECT seqcache FROM pg_sequence WHERE seqrelid = pg_get_serial_sequence($1, 'id')::regclass", quoteIdent(loc.Table))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c int64
			if err := rows.Scan(&c); err != nil {
				return err
			}
			cache = append(cache, c)
		}
		return rows.Err()
	})
	if err != nil {
		return "", locErr(loc, "cannot read the id sequence of table %s: %v", loc.Table, err)
	}
	switch {
	case len(cache) == 0:
		return fmt.Sprintf("%s: table %s: its ids come from no sequence of its own (SERIAL or identity): a row committed after a later id was read may be missed", loc, loc.Table), nil
	case cache[0] != 1:
		return fmt.Sprintf("%s: table %s: its id sequence caches %d ids per session, so ids are not drawn in order: a row committed after a later id was read may be missed (ALTER SEQUENCE … CACHE 1)", loc, loc.Table, cache[0]), nil
	}
	return "", nil
}
