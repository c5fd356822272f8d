package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// fuzzStore writes data as a store file named name and reads it through:
// any outcome is fine but a panic or an error that is not a located bad-input
// error.
func fuzzStore(t *testing.T, name string, data []byte) {
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := drain(path); err != nil && !errors.Is(err, schema.ErrBadInput) {
		t.Fatalf("error is not bad input: %v", err)
	}
}

func seedFiles(f *testing.F, paths ...string) {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzJSONL feeds arbitrary bytes to the JSONL reader.
//
//	go test -run '^$' -fuzz FuzzJSONL -fuzztime 60s ./schema/store/
func FuzzJSONL(f *testing.F) {
	bad, _ := filepath.Glob("../../fixtures/bad/*.jsonl")
	seedFiles(f, bad...)
	f.Add([]byte(`{"eid":{"batch":"b","task":"t"},"reward":1,"logprobs":[-1],"action_mask":[1]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzStore(t, "f.jsonl", data) })
}

// FuzzParquet feeds arbitrary bytes to the Parquet reader.
//
//	go test -run '^$' -fuzz FuzzParquet -fuzztime 60s ./schema/store/
func FuzzParquet(f *testing.F) {
	seedFiles(f, "../../fixtures/stores/dpo.parquet", "../../fixtures/bad/truncated.parquet", "../../fixtures/bad/flipped_footer.parquet")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzStore(t, "f.parquet", data) })
}

// FuzzArrow feeds arbitrary bytes to the Arrow IPC readers, as a file and as
// a stream.
//
//	go test -run '^$' -fuzz FuzzArrow -fuzztime 60s ./schema/store/
func FuzzArrow(f *testing.F) {
	seedFiles(f, "testdata/dpo.arrow", "testdata/dpo.arrows")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzStore(t, "f.arrow", data)
		fuzzStore(t, "f.arrows", data)
	})
}
