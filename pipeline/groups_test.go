package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// TestRunGroupingNullID: a row with a null run or step id, which the run
// grouping cannot place, is bad input naming the file, the row and the
// column (the group pass finds it; the reader locates it), whatever the id.
func TestRunGroupingNullID(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "multi.jsonl")
	r, err := store.Open(stores + "multi.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Copy(context.Background(), r, src, nil); err != nil {
		t.Fatal(err)
	}
	r.Close()
	for _, id := range []string{"run", "step"} {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for i := 0; sc.Scan(); i++ {
			var row map[string]any
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatal(err)
			}
			if i == 5 {
				row["eid"].(map[string]any)[id] = nil
			}
			b, err := json.Marshal(row)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		f.Close()
		in := filepath.Join(dir, "null_"+id+".jsonl")
		if err := os.WriteFile(in, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), withFn(t, Job{In: in, Out: filepath.Join(dir, "o.parquet")}, "step_wise_grpo", ""))
		want := `null_` + id + `.jsonl: row 5: column "` + id + `": null id`
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("null %s: error %v, want bad input naming %q", id, err, want)
		}
	}
}
