package view

import (
	"database/sql"
	"math"
	"testing"

	"github.com/rftpipe/rftpipe/sql/duckdb"
)

// TestMaskedMean checks masked_mean.sql, the index's mean of a per-token
// list over the action-mask tokens, against hand-computed means (NULL
// mask elements, lists longer or shorter than the mask, NULL lists and
// elements, NaN and infinities), then, value for value, against its
// definition list_avg(list_filter(list, (a, k) -> action_mask[k])) over
// generated lists taking both of its branches.
func TestMaskedMean(t *testing.T) {
	db, err := duckdb.Open(duckdb.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mean := query("masked_mean", map[string]string{"list": "entropy"})
	null, nan := math.Inf(-1), math.NaN() // null: the mean is NULL
	for _, c := range []struct {
		name, list, mask string
		want             float64
	}{
		{"all true", "[1, 2, 4]", "[true, true, true]", 7.0 / 3},
		{"a false", "[1, 2, 4]", "[true, false, true]", 2.5},
		{"a NULL mask element", "[1, 2, 4]", "[true, NULL, true]", 2.5},
		{"a NULL element", "[1, NULL, 4]", "[true, true, true]", 2.5},
		{"mask shorter", "[1, 2, 4]", "[true, true]", 1.5},
		{"mask longer", "[1, 2]", "[true, true, true]", 1.5},
		{"mask longer, a false past the list", "[1, 2]", "[true, true, false]", 1.5},
		{"mask NULL", "[1, 2]", "NULL", null},
		{"list NULL", "NULL", "[true, true]", null},
		{"both empty", "[]", "[]", null},
		{"all false", "[1]", "[false]", null},
		{"all NULL mask elements", "[1, 2]", "[NULL, NULL]", null},
		{"only a NULL element", "[NULL]", "[true]", null},
		{"NaN kept", "['nan'::FLOAT, 1]", "[true, true]", nan},
		{"NaN masked", "['nan'::FLOAT, 1]", "[false, true]", 1},
		{"infinity kept, NULL mask element", "['inf'::FLOAT, 1]", "[true, NULL]", math.Inf(1)},
	} {
		var got sql.NullFloat64
		q := "SELECT " + mean + " FROM (SELECT " + c.list + "::FLOAT[] AS entropy, " + c.mask + "::BOOLEAN[] AS action_mask)"
		if err := db.QueryRow(q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.want == null:
			if got.Valid {
				t.Errorf("%s: mean of %s over %s = %v, want NULL", c.name, c.list, c.mask, got.Float64)
			}
		case !got.Valid || got.Float64 != c.want && !(math.IsNaN(c.want) && math.IsNaN(got.Float64)):
			t.Errorf("%s: mean of %s over %s = %v, want %v", c.name, c.list, c.mask, got, c.want)
		}
	}

	// Lists of 0-6 elements, some NULL, some lists NULL; masks of 0-5
	// elements, all true for even i (whole when long enough), else some
	// false and some NULL, some masks NULL.
	generated := `SELECT
		CASE WHEN i % 17 = 0 THEN NULL ELSE list_transform(range(i % 7), k -> CASE WHEN (i + k) % 11 = 0 THEN NULL ELSE ((i * 31 + k * 17) % 97) / 7.0 END) END::FLOAT[] AS entropy,
		CASE WHEN i % 13 = 0 THEN NULL ELSE list_transform(range((i * 3) % 6), k -> CASE WHEN i % 2 = 0 THEN true WHEN (i * k) % 7 = 3 THEN NULL ELSE (i + k) % 4 <> 0 END) END::BOOLEAN[] AS action_mask
		FROM range(5000) t(i)`
	var rows, whole, differ int
	q := `SELECT count(*),
		count(*) FILTER (WHERE len(action_mask) >= len(entropy) AND list_count(action_mask) = len(action_mask) AND NOT list_contains(action_mask, false)),
		count(*) FILTER (WHERE (` + mean + `) IS DISTINCT FROM list_avg(list_filter(entropy, (a, k) -> action_mask[k])))
		FROM (` + generated + `)`
	if err := db.QueryRow(q).Scan(&rows, &whole, &differ); err != nil {
		t.Fatal(err)
	}
	if whole == 0 || whole == rows || differ != 0 {
		t.Errorf("%d generated lists, %d with a whole mask: %d means differ from the definition, want 0 (and both kinds of mask)", rows, whole, differ)
	}
}
