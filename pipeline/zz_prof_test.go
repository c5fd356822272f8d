package pipeline

import (
	"context"
	"os"
	"testing"
)

func TestZZProf(t *testing.T) {
	in := os.Getenv("ZZIN")
	if in == "" {
		t.Skip()
	}
	kv := []string{}
	if os.Getenv("ZZDUP") != "" {
		kv = []string{"std_threshold=0", "duplicate_experiences=true"}
	}
	if _, err := Run(context.Background(), withFn(t, Job{In: in, Out: "/tmp/zzout.parquet", Seed: 1}, "grpo", "", kv...)); err != nil {
		t.Fatal(err)
	}
}
