package trinity_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
)

// TestIDGaps: ids missing from a buffer (Trinity 0.6 skips an experience
// over TRINITY_MAX_EXP_SIZE; rows deleted by hand) are no damage: both
// layouts read the other rows in id order, with no error and no warning,
// whether the gaps are few (the orphan-blob check seeks around them) or
// many (past what it tracks: an anti-join); a blob row in a gap, without
// its metadata row, is still reported.
func TestIDGaps(t *testing.T) {
	src := readStore(t, filepath.Join(fixtures06, "experience.jsonl")) // 64 rows
	for _, tc := range []struct {
		name   string
		copies int
		drop   string // the ids deleted from both tables
		orphan int    // a kept id whose metadata row is deleted (0.6), or 0
	}{
		{"few", 1, "id % 10 = 0 OR id = 33", 5},
		{"many", 3, "id % 2 = 1", 0},
	} {
		for _, layout := range []string{"0.5", "0.6"} {
			t.Run(tc.name+"/"+layout, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "b.db")
				url := sqliteURL(path, "T")
				want := table{schema: src.schema}
				for c := 0; c < tc.copies; c++ {
					mode := "&if_exists=append"
					if c == 0 {
						mode = ""
					}
					copyStore(t, filepath.Join(fixtures06, "experience.jsonl"), url+"&layout="+layout+mode)
					want.rows = append(want.rows, src.rows...)
				}
				db, err := sql.Open("sqlite", path)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var ids []int64
				rows, err := db.Query("SELECT id FROM T WHERE NOT (" + tc.drop + ") ORDER BY id")
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var id int64
					if err := rows.Scan(&id); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, id)
				}
				rows.Close()
				kept := table{schema: want.schema}
				for _, id := range ids {
					if layout == "0.5" || int(id) != tc.orphan {
						kept.rows = append(kept.rows, want.rows[id-1])
					}
				}
				stmts := []string{"DELETE FROM T WHERE " + tc.drop}
				if layout == "0.6" {
					stmts = append(stmts, "DELETE FROM T_blob WHERE "+tc.drop)
					if tc.orphan > 0 {
						stmts = append(stmts, fmt.Sprintf("DELETE FROM T WHERE id = %d", tc.orphan))
					}
				}
				for _, s := range stmts {
					if _, err := db.Exec(s); err != nil {
						t.Fatal(err)
					}
				}
				sameRows(t, readStore(t, url, storeBatch(7)), kept)
				r := openStore(t, url)
				defer r.Close()
				if err := r.ForEach(context.Background(), func(arrow.Record) error { return nil }); err != nil {
					t.Fatal(err)
				}
				wantWarn := ""
				if layout == "0.6" && tc.orphan > 0 {
					wantWarn = fmt.Sprintf("without a metadata row in T, not read: id %d", tc.orphan)
				}
				if w := strings.Join(r.Warnings(), "\n"); (wantWarn == "") != (w == "") || !strings.Contains(w, wantWarn) {
					t.Errorf("warnings %q, want %q", w, wantWarn)
				}
			})
		}
	}
}
