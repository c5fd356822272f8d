package feed

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/schema/table"
)

// TestNewColumnJoinsTheTable ingests rows with a column the table lacks
// (routed_experts, then a new field): each becomes a column of the table,
// recorded by the commit, and the older rows read it as null; rows whose
// column has another type are refused naming it, with nothing committed.
func TestNewColumnJoinsTheTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tbl := filepath.Join(dir, "table")
	row := `{"batch":0,"task":0,"run":%d,"reward":1.0,"model_version":0%s}` + "\n"
	sources := []struct{ name, extra, want string }{
		{"old.jsonl", "", ""},
		{"routed.jsonl", `,"routed_experts":[[[1,2]]]`, ""},
		{"judge.jsonl", `,"judge_score":0.5`, ""},
		{"bad.jsonl", `,"judge_score":"high"`, "judge_score"},
	}
	for i, s := range sources {
		p := filepath.Join(dir, s.name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(strings.Replace(row, "%d", string(rune('0'+i)), 1), "%s", s.extra)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Ingest(ctx, p, tbl, Options{Experiment: "e"})
		var ie *schema.InputError
		switch {
		case s.want == "" && err != nil:
			t.Fatalf("%s: %v", s.name, err)
		case s.want != "" && (!errors.As(err, &ie) || ie.Column != s.want || !strings.Contains(err.Error(), "cannot change")):
			t.Fatalf("%s: %v, want a refusal naming column %s", s.name, err, s.want)
		}
	}
	tb, err := table.Open(tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	base, err := tb.Base()
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.CheckColumns(base, "judge.jsonl", []table.Column{{Name: "judge_score", Type: "float64"}}); err != nil {
		t.Fatalf("the table's columns lack judge_score float64: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(tbl, "data", "experiment=e", "*.parquet"))
	if len(files) != 3 {
		t.Fatalf("%d data files, want 3 (the refused rows written none)", len(files))
	}
	r, err := store.Open(tbl)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var routed, judge []string
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := rec.Schema()
		for i := 0; i < int(rec.NumRows()); i++ {
			routed = append(routed, rec.Column(sc.FieldIndices(schema.RoutedExperts)[0]).ValueStr(i))
			judge = append(judge, rec.Column(sc.FieldIndices("judge_score")[0]).ValueStr(i))
		}
	}
	if got := strings.Join(routed, " ") + " | " + strings.Join(judge, " "); got != "(null) [[[1,2]]] (null) | (null) (null) 0.5" {
		t.Fatalf("routed_experts | judge_score per row: %s", got)
	}
}
