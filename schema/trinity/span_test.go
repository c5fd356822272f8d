package trinity

import (
	"database/sql"
	"strings"
	"testing"
)

// TestIDSpanOutside: the query selects exactly the ids no metadata row
// read has, or gives up.
func TestIDSpanOutside(t *testing.T) {
	var s idSpan
	if s.outside("b") != "" {
		t.Fatal("an empty span must defer to the anti-join")
	}
	for _, id := range []int64{3, 4, 5, 8, 9, 12} {
		s.add(id)
	}
	want := "SELECT id FROM b WHERE id < 3 UNION ALL SELECT id FROM b WHERE id > 12 UNION ALL " +
		"SELECT id FROM b WHERE id > 5 AND id < 8 UNION ALL SELECT id FROM b WHERE id > 9 AND id < 12 ORDER BY id"
	if got := s.outside("b"); got != want {
		t.Errorf("outside = %q, want %q", got, want)
	}
	// An incremental read (after mark 2) looks above its watermark only.
	inc := idSpan{after: 2}
	for _, id := range []int64{4, 5} {
		inc.add(id)
	}
	want = "SELECT id FROM b WHERE id > 2 AND id < 4 UNION ALL SELECT id FROM b WHERE id > 5 ORDER BY id"
	if got := inc.outside("b"); got != want {
		t.Errorf("after 2: outside = %q, want %q", got, want)
	}
	var many idSpan
	for id := int64(0); id < 2*(maxGaps+2); id += 2 {
		many.add(id)
	}
	if many.outside("b") != "" {
		t.Error("past maxGaps gaps the span must defer to the anti-join")
	}
}

// TestIDSpanOutsideSeeks: on SQLite the orphan-blob query of a span with
// gaps seeks the blob table's key, range by range, and reads no other
// rows: a scan of the whole table would read every payload's first page
// once more after the import.
func TestIDSpanOutsideSeeks(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+fixtures+"/v0.6/edge/orphans.db?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s idSpan
	for _, id := range []int64{1, 2, 4, 7, 8} {
		s.add(id)
	}
	rows, err := db.Query("EXPLAIN QUERY PLAN " + s.outside(quoteIdent("experience_buffer_blob")))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var seeks []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(detail, "SCAN") {
			t.Errorf("plan step %q: a scan of the table", detail)
		}
		if strings.HasPrefix(detail, "SEARCH") {
			seeks = append(seeks, detail)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seeks) != 4 { // below the first, above the last, two gaps
		t.Errorf("plan has %d key searches, want 4: %q", len(seeks), seeks)
	}
}
