package job

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// FuzzParse feeds job files to Parse, seeded with fixtures/configs/*.yaml:
// no panic, and every error is a located bad-input *Error naming the file.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "fixtures/configs/*.yaml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed configs: %v", err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "{", "algorithm: [", "algorithm:\n  algorithm_type: grpo\n  bogus: 1\n",
		"seed: -1\n", "input: [1, 2]\n", "&a [*a]\n", "algorithm: &x {a: *x}\n", "\t- x\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Parse("job.yaml", data)
		if err != nil {
			var je *Error
			if !errors.Is(err, schema.ErrBadInput) || !errors.As(err, &je) || je.File != "job.yaml" {
				t.Fatalf("Parse: error %v (%T) is not a bad-input *Error naming the file", err, err)
			}
			return
		}
		if j == nil || j.File != "job.yaml" {
			t.Fatalf("Parse: job %+v without error", j)
		}
	})
}
