package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/objective"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// lateCPU is a tokens.Starter on the CPU that leaves every evaluation to
// Wait, as a device leaves it in flight: a batch whose gradient or sums
// were used before its Wait, or whose inputs were touched in between,
// shows in the output. The fail-th evaluation started (from 1; 0: none)
// fails at its Wait, as a kernel fault surfaces on a device.
type lateCPU struct {
	fail                         int
	started, waiting, maxWaiting int
}

func (e *lateCPU) Eval(b *tokens.Batch, grad []float64, terms ...tokens.Term) ([]tokens.TermResult, error) {
	p, err := e.Start(b, grad, terms...)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

func (e *lateCPU) Start(b *tokens.Batch, grad []float64, terms ...tokens.Term) (tokens.Pending, error) {
	e.started++
	e.waiting++
	e.maxWaiting = max(e.maxWaiting, e.waiting)
	return &latePending{e: e, n: e.started, b: b, grad: grad, terms: terms}, nil
}

type latePending struct {
	e     *lateCPU
	n     int
	b     *tokens.Batch
	grad  []float64
	terms []tokens.Term
}

func (p *latePending) Wait() ([]tokens.TermResult, error) {
	p.e.waiting--
	if p.n == p.e.fail {
		return nil, fmt.Errorf("kernel of evaluation %d: CUDA_ERROR_LAUNCH_FAILED", p.n)
	}
	return tokens.CPU.Eval(p.b, p.grad, p.terms...)
}

// TestLossOverlapped: the loss step on an evaluator that leaves each
// batch's evaluation in flight (a tokens.Starter) — the engine starting
// batch i+1 before it completes batch i, then writing batch i while i+1
// computes — writes the bytes and gives the metrics, bit for bit, of the
// synchronous CPU path, for a loss of each shape (KL and entropy terms on,
// mixed row sets; dpo, whose gradient follows the sums, and bypass_mode,
// whose kernel is each window's, are evaluated synchronously), over record
// batches of 7 rows.
func TestLossOverlapped(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		fn, store string
		args      args.Values
	}{
		{"ppo", "full.parquet", nil}, {"mix", "full.parquet", nil}, {"gspo", "full.parquet", nil},
		{"dpo", "dpo_pairs.parquet", nil},
		{"bypass_mode", "full.parquet", args.Values{"rollout_is": "token", "rollout_rs": "token_k1", "rollout_rs_threshold": "0.97_1.03"}},
	} {
		t.Run(c.fn, func(t *testing.T) {
			run := func(ev tokens.Evaluator, out string) (objective.Result, []byte) {
				o, err := objective.New(objective.Config{PolicyLoss: c.fn, Args: c.args, KLLoss: "k3", KLCoef: 0.01, Entropy: "default", EntropyCoef: 0.001})
				if err != nil {
					t.Fatal(err)
				}
				st := NewLoss(o, ev, nil, 1)
				_, err = Run(context.Background(), Job{In: stores + c.store, Out: out, Objective: o, BatchRows: 7,
					Keep: []string{schema.Batch, schema.Task, schema.Run, schema.Step}, Stages: []Stage{st}})
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				return st.Result(), b
			}
			late := &lateCPU{}
			want, wantBytes := run(tokens.CPU, filepath.Join(dir, c.fn+"_cpu.arrow"))
			got, gotBytes := run(late, filepath.Join(dir, c.fn+"_late.arrow"))
			if string(gotBytes) != string(wantBytes) || len(wantBytes) < 1000 {
				t.Errorf("overlapped: %d bytes written, differing from the synchronous path's %d", len(gotBytes), len(wantBytes))
			}
			if math.Float64bits(got.Loss) != math.Float64bits(want.Loss) || len(got.Metrics) != len(want.Metrics) {
				t.Errorf("overlapped: loss %v (%d metrics), synchronous %v (%d)", got.Loss, len(got.Metrics), want.Loss, len(want.Metrics))
			}
			for k, v := range want.Metrics {
				if math.Float64bits(got.Metrics[k]) != math.Float64bits(v) {
					t.Errorf("overlapped: %s %v, synchronous %v", k, got.Metrics[k], v)
				}
			}
			// Three terms a batch (policy, KL, entropy): more in flight at
			// once means the next batch was started before this one was
			// completed.
			if overlapped := late.maxWaiting > 3; overlapped != (c.fn != "dpo" && c.fn != "bypass_mode") || late.started < 9 {
				t.Errorf("%d evaluations started, at most %d in flight", late.started, late.maxWaiting)
			}
		})
	}
}

// TestLossOverlappedFails: an evaluation that fails in flight — at the
// first batch, in the middle of the store, at the last batch — fails the
// job with its error, leaves no output file and no goroutine behind.
func TestLossOverlappedFails(t *testing.T) {
	dir := t.TempDir()
	o, err := objective.New(objective.Config{PolicyLoss: "ppo", KLLoss: "k3", KLCoef: 0.01, Entropy: "default"})
	if err != nil {
		t.Fatal(err)
	}
	count := &lateCPU{}
	if _, err := Run(context.Background(), Job{In: stores + "full.parquet", Objective: o, BatchRows: 7, Stages: []Stage{NewLoss(o, count, nil, 1)}}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for _, k := range []int{1, 2, count.started / 2, count.started - 1, count.started} {
		out := filepath.Join(dir, fmt.Sprintf("grad%d.arrow", k))
		_, err := Run(context.Background(), Job{In: stores + "full.parquet", Out: out, Objective: o, BatchRows: 7,
			Stages: []Stage{NewLoss(o, &lateCPU{fail: k}, nil, 1)}})
		want := fmt.Sprintf("kernel of evaluation %d: CUDA_ERROR_LAUNCH_FAILED", k)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("evaluation %d of %d failing: err %v", k, count.started, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("evaluation %d failing: %s left behind (%v)", k, out, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("left in the output directory: %v (%v)", entries, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after the failed jobs, %d before", n, before)
	}
}
