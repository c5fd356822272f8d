package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/pipeline/job"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/operator"
)

// storeShape returns a store's column names and row count.
func storeShape(t *testing.T, path string) ([]string, int64) {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var cols []string
	for _, f := range r.Schema().Fields() {
		cols = append(cols, f.Name)
	}
	var n int64
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return cols, n
		}
		if err != nil {
			t.Fatal(err)
		}
		n += rec.NumRows()
	}
}

// promLine is one sample of the Prometheus text format.

// needsColumns are the trainer-side inputs the demo store lacks, per
// algorithm: a run over it must fail naming them (the job files name
// full.parquet, which has them).
var needsColumns = map[string]string{
	"ppo":               "values",
	"on_policy_distill": "teacher_logprobs",
	"jsd":               "teacher_logprobs",
}

// TestFixtureConfigsRun runs every fixtures/configs job through `rftpipe
// run --config` over its bundled store, reruns it with GOMAXPROCS 1 and 2
// for the same bytes, checks the output store, the
// metrics and the Prometheus file, then evaluates `rftpipe loss
// --algorithm` on the output where the algorithm's loss can run on it.
func TestFixtureConfigsRun(t *testing.T) {
	t.Chdir("../..") // job files name stores relative to the repository root
	files, err := filepath.Glob("fixtures/configs/*.yaml")
	if err != nil || len(files) != len(algorithm.Default().Names()) {
		t.Fatalf("fixtures/configs: %d files (%v), want one per algorithm type", len(files), err)
	}
	for _, cfg := range files {
		name := strings.TrimSuffix(filepath.Base(cfg), ".yaml")
		t.Run(name, func(t *testing.T) {
			spec, err := algorithm.Default().Get(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			out, metrics, prom := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "m.json"), filepath.Join(dir, "m.prom")
			run := []string{"run", "--config", cfg, "--out", out, "--metrics", metrics, "--prom", prom, "--progress", "never"}
			if col, ok := needsColumns[name]; ok {
				bare := append(append([]string{}, run...), "--in", "fixtures/stores/demo.parquet")
				_, stderr, code := runCLI(t, bare...)
				if code != 2 || !strings.Contains(stderr, "missing column "+col) {
					t.Fatalf("without %s: exit %d, %s; want exit 2 naming the column", col, code, stderr)
				}
			}
			_, stderr, code := runCLI(t, run...)
			if code != 0 {
				t.Fatalf("run: exit %d: %s", code, stderr)
			}
			// Determinism: the same job again, in a process with one thread
			// and in one with two, writes the same bytes.
			for _, procs := range []string{"1", "2"} {
				again := filepath.Join(dir, "again"+procs+".parquet")
				args := append(append([]string{}, run...), "--out", again, "--metrics", again+".json", "--prom", again+".prom")
				if b, err := cliCmd([]string{"GOMAXPROCS=" + procs}, args...).CombinedOutput(); err != nil {
					t.Fatalf("rerun with GOMAXPROCS=%s: %v\n%s", procs, err, b)
				}
				if fileSum(t, again) != fileSum(t, out) {
					t.Errorf("rerun with GOMAXPROCS=%s wrote different bytes", procs)
				}
			}

			cols, rows := storeShape(t, out)
			j, err := job.Load(cfg)
			if err != nil {
				t.Fatal(err)
			}
			inCols, inRows := storeShape(t, j.Input)
			res, err := algorithm.Resolve(algorithm.Config{AlgorithmType: name}, nil, algorithm.Options{})
			if err != nil {
				t.Fatal(err)
			}
			computes := res.Config.Fn(algorithm.AdvantageFn) != algorithm.NoAdvantage
			for _, c := range inCols {
				if !strings.Contains(strings.Join(cols, ","), c) {
					t.Errorf("output lost input column %s", c)
				}
			}
			for _, c := range []string{"advantages", "returns"} {
				if has := strings.Contains(strings.Join(cols, ","), c); has != computes {
					t.Errorf("output has %s: %v, want %v (columns %v)", c, has, computes, cols)
				}
			}
			if rows > inRows || rows == 0 || (!computes || spec.New.Flags().ComputeAdvantageInTrainer) && rows != inRows {
				t.Errorf("%d rows written from %d", rows, inRows)
			}

			var m map[string]any
			raw, err := os.ReadFile(metrics)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			if got := m["experience_pipeline/experience_count"]; got != float64(rows) {
				t.Errorf("experience_count %v, %d rows written", got, rows)
			}
			adv := res.Config.Fn(algorithm.AdvantageFn)
			groupMetrics := m["experience_pipeline/group_advantages/reward_mean/mean"] != nil
			if adv == "gigpo" { // its own episode and anchor-group metrics
				groupMetrics = m["experience_pipeline/gigpo/episode_reward_mean/mean"] != nil
			}
			if computes && !spec.New.Flags().ComputeAdvantageInTrainer && !groupMetrics {
				t.Errorf("pipeline-side run lacks group metrics: %v", m)
			}
			fams := parseProm(t, prom)
			if len(fams) != len(m) {
				t.Errorf("%d Prometheus families for %d metrics", len(fams), len(m))
			}
			for name, f := range fams {
				for _, mt := range f.GetMetric() {
					if l := mt.GetLabel(); len(l) != 1 || l[0].GetName() != "job" || l[0].GetValue() != filepath.Base(name) && l[0].GetValue() != strings.TrimSuffix(filepath.Base(cfg), ".yaml") {
						t.Errorf("%s: labels %v, want job=%s only", name, l, name)
					}
				}
			}
			if v := fams["rftpipe_success"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
				t.Errorf("rftpipe_success %v, want 1", v)
			}

			// The loss needs per-token log-probs (dpo's store has none) and,
			// for mix/mix_chord, the expert_mask the mix sample strategy adds.
			pl := res.Config.Fn(algorithm.PolicyLossFn)
			if pl == "dpo" || pl == "mix" || pl == "mix_chord" {
				return
			}
			stdout, stderr, code := runCLI(t, "loss", "--algorithm", name, "--in", out, "--col", "ref_logprob=logprobs", "--format", "json")
			if code != 0 {
				t.Fatalf("loss --algorithm: exit %d: %s", code, stderr)
			}
			var lo struct {
				Fn      string             `json:"fn"`
				Metrics map[string]float64 `json:"metrics"`
			}
			if err := json.Unmarshal([]byte(stdout), &lo); err != nil {
				t.Fatal(err)
			}
			if lo.Fn != pl {
				t.Errorf("loss fn %s, want %s", lo.Fn, pl)
			}
			if _, ok := lo.Metrics["actor/final_loss"]; !ok {
				t.Errorf("no actor/final_loss: %v", lo.Metrics)
			}
			if _, ok := lo.Metrics["actor/kl_loss"]; ok != (res.Config.Fn(algorithm.KLLossFn) != "none") {
				t.Errorf("actor/kl_loss present %v with kl_loss_fn %s", ok, res.Config.Fn(algorithm.KLLossFn))
			}
		})
	}
}

// TestTrinityConfigUnchanged runs a Trinity-RFT style algorithm section as
// is, with the stores given on the command line.
func TestTrinityConfigUnchanged(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "job.yaml")
	src := "algorithm: {algorithm_type: grpo, repeat_times: 8, advantage_fn_args: {std_threshold: 0.0}}\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	_, stderr, code := runCLI(t, "run", "--config", cfg, "--in", "../../fixtures/stores/demo.parquet", "--out", out, "--progress", "never")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "algorithm grpo (pipeline-side advantage fn grpo)") {
		t.Errorf("summary: %s", stderr)
	}
	// std_threshold 0 drops the groups whose rewards are all equal.
	if _, rows := storeShape(t, out); rows == 0 || rows >= 384 {
		t.Errorf("%d rows written from 384", rows)
	}
}

func TestJobErrors(t *testing.T) {
	dir := t.TempDir()
	files := 0
	write := func(src string) string {
		files++
		p := filepath.Join(dir, fmt.Sprintf("job%d.yaml", files))
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	demo := "../../fixtures/stores/demo.parquet"
	out := filepath.Join(dir, "out.parquet")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"misspelled key", []string{"run", "--config", write("algorithm:\n  algorithm_type: grpo\n  advantage_fn_arg: {std_threshold: 0.0}\n"), "--in", demo, "--out", out},
			[]string{"line 3", "algorithm.advantage_fn_arg", `did you mean "advantage_fn_args"?`}},
		{"misspelled argument", []string{"run", "--config", write("algorithm:\n  algorithm_type: grpo\n  advantage_fn_args: {std_treshold: 0.0}\n"), "--in", demo, "--out", out},
			[]string{"line 3", "algorithm.advantage_fn_args.std_treshold", `did you mean "std_threshold"?`}},
		{"unknown algorithm flag", []string{"run", "--algorithm", "gpro", "--in", demo, "--out", out}, []string{`unknown algorithm type "gpro"`, `did you mean "grpo"?`}},
		{"no input", []string{"run", "--algorithm", "grpo", "--out", out}, []string{"needs an input and an output store"}},
		{"dpo on an experience store", []string{"run", "--algorithm", "dpo", "--in", demo, "--out", out}, []string{"chosen", "the store needs the columns"}},
		{"mixing flag styles", []string{"run", "--algorithm", "grpo", "--advantage-fn", "grpo", "--in", demo, "--out", out}, []string{"do not mix"}},
		{"loss flags mixed", []string{"loss", "--algorithm", "grpo", "--fn", "ppo", "--in", demo}, []string{"--fn does not mix"}},
		{"loss without fn", []string{"loss", "--in", demo}, []string{"give --fn, --algorithm or --config"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, stderr)
				}
			}
		})
	}
}

// TestRunAlgorithmFlags checks that flags override the job file.
func TestRunAlgorithmFlags(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.parquet")
	_, stderr, code := runCLI(t, "run", "--config", "../../fixtures/configs/rec.yaml", "--algorithm", "opmd",
		"--in", "../../fixtures/stores/demo.parquet", "--out", out, "--metrics", filepath.Join(dir, "m.json"),
		"--prom", filepath.Join(dir, "m.prom"), "--progress", "never")
	if code != 0 || !strings.Contains(stderr, "algorithm opmd (pipeline-side advantage fn opmd)") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, rows := storeShape(t, out); rows != 384 {
		t.Errorf("%d rows, want 384", rows)
	}
	for _, f := range []string{"m.json", "m.prom"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// parseProm parses a Prometheus textfile with the Prometheus text parser.
func parseProm(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.LegacyValidation) // Prometheus's classic names: what node_exporter accepts
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return fams
}

// TestMonitoredFailure: a job that fails still leaves its metrics and
// Prometheus files, with the success gauge at 0 and the exit code; an
// unwritable metrics path is refused before any work.
func TestMonitoredFailure(t *testing.T) {
	dir := t.TempDir()
	out, metrics, prom := filepath.Join(dir, "out.parquet"), filepath.Join(dir, "m.json"), filepath.Join(dir, "m.prom")
	_, stderr, code := runCLI(t, "run", "--advantage-fn", "grpo", "--in", "../../fixtures/bad/ragged.jsonl", "--out", out,
		"--metrics", metrics, "--prom", prom, "--job-label", "nightly", "--progress", "never")
	if code != 2 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	fams := parseProm(t, prom)
	gauge := func(name string) float64 { return fams[name].GetMetric()[0].GetGauge().GetValue() }
	if gauge("rftpipe_success") != 0 || gauge("rftpipe_exit_code") != 2 || gauge("rftpipe_last_run_timestamp_seconds") == 0 {
		t.Errorf("status gauges %v", fams)
	}
	if l := fams["rftpipe_success"].GetMetric()[0].GetLabel(); len(l) != 1 || l[0].GetValue() != "nightly" {
		t.Errorf("labels %v, want job=nightly", l)
	}
	raw, err := os.ReadFile(metrics)
	if err != nil || !strings.Contains(string(raw), `"rftpipe/success": 0`) {
		t.Errorf("metrics file: %v %s", err, raw)
	}
	// A missing directory is made; one under a plain file cannot be.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"run", "--advantage-fn", "grpo", "--in", "../../fixtures/stores/demo.parquet", "--out", out, "--metrics", filepath.Join(file, "no", "m.json")},
		{"loss", "--fn", "ppo", "--in", "../../fixtures/stores/full.parquet", "--prom", filepath.Join(file, "no", "m.prom")},
	} {
		_, stderr, code = runCLI(t, cmd...)
		if code != 2 || !strings.Contains(stderr, "cannot make the output's directory") {
			t.Errorf("%s with an unwritable path: exit %d, %s", cmd[0], code, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the job ran although its metrics path was unwritable")
	}
}

// TestFailuresWriteMetrics: run and loss go through one sequence, so a
// failure anywhere after flag parsing (options, job file, components,
// columns, the input) leaves the metrics file with the exit code; only a
// refused output (a refused job touches no file) leaves none.
func TestFailuresWriteMetrics(t *testing.T) {
	demo, full := "../../fixtures/stores/demo.parquet", "../../fixtures/stores/full.parquet"
	for _, c := range []struct {
		name    string
		args    []string
		written bool
	}{
		{"loss unknown fn", []string{"loss", "--fn", "nosuch", "--in", full}, true},
		{"loss bad col", []string{"loss", "--fn", "ppo", "--in", full, "--col", "nosuch=x"}, true},
		{"loss missing job file", []string{"loss", "--config", "missing.yaml", "--in", full}, true},
		{"loss fn with config", []string{"loss", "--config", "missing.yaml", "--fn", "ppo", "--in", full}, true},
		{"loss missing input", []string{"loss", "--fn", "ppo", "--in", "missing.parquet"}, true},
		{"run unknown fn", []string{"run", "--advantage-fn", "nosuch", "--in", demo, "--out", "OUT"}, true},
		{"run unknown add strategy", []string{"run", "--add-strategy", "nosuch", "--in", demo, "--out", "OUT"}, true},
		{"run unknown algorithm", []string{"run", "--algorithm", "nosuch", "--in", demo, "--out", "OUT"}, true},
		{"run no fn", []string{"run", "--in", demo, "--out", "OUT"}, true},
		{"run output over input", []string{"run", "--advantage-fn", "grpo", "--in", demo, "--out", demo}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			metrics := filepath.Join(dir, "m.json")
			args := append([]string(nil), c.args...)
			for i, a := range args {
				if a == "OUT" {
					args[i] = filepath.Join(dir, "out.parquet")
				}
			}
			_, stderr, code := runCLI(t, append(args, "--metrics", metrics)...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			raw, err := os.ReadFile(metrics)
			switch {
			case !c.written && err == nil:
				t.Errorf("a refused job wrote its metrics file: %s", raw)
			case c.written && (err != nil || !strings.Contains(string(raw), `"rftpipe/exit_code": 2`)):
				t.Errorf("metrics file: %v %s (stderr %s)", err, raw, stderr)
			}
		})
	}
}

// TestTrinityConfigReadsItsBuffer: a whole Trinity-RFT config whose
// experience buffer is a SQLite table runs with no --in.
func TestTrinityConfigReadsItsBuffer(t *testing.T) {
	dir := t.TempDir()
	db, err := filepath.Abs("../../fixtures/trinity/experience.db")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "trinity.yaml")
	src := `project: rft
name: nightly
mode: train
algorithm:
  algorithm_type: grpo
  repeat_times: 8
model:
  model_path: /models/qwen
buffer:
  batch_size: 8
  trainer_input:
    experience_buffer:
      name: experience_buffer
      storage_type: sql
      path: sqlite:///` + db + `
trainer:
  save_interval: 10
`
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.parquet")
	_, stderr, code := runCLI(t, "run", "--config", cfg, "--out", out, "--on-invalid-reward", "drop", "--progress", "never")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, rows := storeShape(t, out); rows != 60 { // 64 rows, 4 with a NULL reward
		t.Errorf("%d rows written, want 60", rows)
	}
}

// TestWholeTrinityConfigsRun runs every whole Trinity-RFT config of
// fixtures/configs/trinity, as its header says, on the bundled store with
// the inputs its algorithm reads; --verbose lists the ignored sections.
func TestWholeTrinityConfigsRun(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/configs/trinity/*.yaml")
	if err != nil || len(files) != len(algorithm.Default().Names()) {
		t.Fatalf("%d whole configs (%v), want one per algorithm type", len(files), err)
	}
	for _, cfg := range files {
		name := strings.TrimSuffix(filepath.Base(cfg), ".yaml")
		t.Run(name, func(t *testing.T) {
			in := "../../fixtures/stores/full.parquet"
			switch name {
			case "dpo":
				in = "../../fixtures/stores/dpo_pairs.parquet"
			case "multi_step_grpo":
				in = "../../fixtures/stores/multi.parquet"
			case "gigpo":
				in = "../../fixtures/stores/gigpo.parquet"
			}
			out := filepath.Join(t.TempDir(), "out.parquet")
			args := []string{"run", "--config", cfg, "--in", in, "--out", out, "--verbose", "--progress", "never"}
			f, err := job.Load(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range f.Operators { // Trinity's reward mapper is rftpipe's only on request
				if !slices.Contains(operator.Default().Names(), op.Name) {
					args = append(args, "--skip-operator", op.Name)
				}
			}
			_, stderr, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, "note: ") {
				t.Errorf("--verbose listed no ignored key: %s", stderr)
			}
			if _, rows := storeShape(t, out); rows == 0 {
				t.Error("no rows written")
			}
		})
	}
}

// TestTrinityConfigWithoutExplorerEnv: a whole Trinity-RFT config whose
// explorer taskset path needs an unset variable runs (the key is never
// read; --verbose lists it), while one whose read key cannot resolve fails
// naming that key.
func TestTrinityConfigWithoutExplorerEnv(t *testing.T) {
	os.Unsetenv("TRINITY_TASKSET_PATH")
	src, err := os.ReadFile("../../fixtures/configs/trinity/grpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	taskset := "${oc.env:TRINITY_TASKSET_PATH,openai/gsm8k}"
	if !strings.Contains(string(src), taskset) {
		t.Fatalf("grpo.yaml has no %s", taskset)
	}
	dir := t.TempDir()
	in := "../../fixtures/stores/full.parquet"
	for _, c := range []struct {
		name, from, to string
		code           int
		want           string
	}{
		{"taskset path unset", taskset, "${oc.env:TRINITY_TASKSET_PATH}", 0,
			"buffer.explorer_input.taskset.path (line 34): environment variable TRINITY_TASKSET_PATH is not set"},
		{"taskset path refers to a missing key", taskset, "${model.taskset_dir}/gsm8k", 0,
			"buffer.explorer_input.taskset.path (line 34): ${model.taskset_dir}: the file has no key model.taskset_dir"},
		{"algorithm key unresolvable", "algorithm_type: grpo", "algorithm_type: ${oc.env:TRINITY_TASKSET_PATH}", 2,
			"algorithm.algorithm_type: environment variable TRINITY_TASKSET_PATH is not set"},
		{"algorithm key refers to a missing key", "algorithm_type: grpo", "algorithm_type: ${model.algo}", 2,
			"algorithm.algorithm_type: ${model.algo}: the file has no key model.algo"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
			if err := os.WriteFile(cfg, []byte(strings.Replace(string(src), c.from, c.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, c.name+".parquet")
			_, stderr, code := runCLI(t, "run", "--config", cfg, "--in", in, "--out", out, "--verbose", "--progress", "never", "--skip-operator", "reward_shaping_mapper")
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and %q: %s", code, c.code, c.want, stderr)
			}
			if c.code == 0 {
				if _, stderr, _ := runCLI(t, "run", "--config", cfg, "--in", in, "--out", out, "--progress", "never", "--skip-operator", "reward_shaping_mapper"); strings.Contains(stderr, c.want) {
					t.Errorf("listed without --verbose: %s", stderr)
				}
			}
		})
	}
}

// TestUnusedValuesNeedNoEnvironment: a value the command line leaves
// unused — the experience buffer with --in, output with --out, metrics with
// --metrics — is not resolved, so an unset ${oc.env:…} there does not stop
// the run (Trinity's dpo_humanlike example reads its dataset path so); a
// used one fails naming its key.
func TestUnusedValuesNeedNoEnvironment(t *testing.T) {
	os.Unsetenv("RFTPIPE_TEST_UNSET")
	const unset = "${oc.env:RFTPIPE_TEST_UNSET}"
	src, err := os.ReadFile("../../fixtures/configs/trinity/dpo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const bufferPath = "${oc.env:TRINITY_DATASET_DIR,../../stores}/dpo.parquet"
	if !strings.Contains(string(src), bufferPath) {
		t.Fatalf("dpo.yaml has no %s", bufferPath)
	}
	dir := t.TempDir()
	in := "../../fixtures/stores/dpo_pairs.parquet"
	out := filepath.Join(dir, "out.parquet")
	for _, c := range []struct {
		name, from, to string
		flags          []string
		code           int
		want           string // in stderr
	}{
		{"buffer path, --in", bufferPath, unset + "/dpo.parquet", []string{"--in", in, "--out", out}, 0, ""},
		{"buffer path", bufferPath, unset + "/dpo.parquet", []string{"--out", out}, 2,
			"buffer.trainer_input.experience_buffer.path: environment variable RFTPIPE_TEST_UNSET is not set"},
		{"buffer name, --in", "name: dpo_dataset", "name: " + unset, []string{"--in", in, "--out", out}, 0, ""},
		{"output, --out", "mode: train", "mode: train\noutput: " + unset + "/o.parquet", []string{"--in", in, "--out", out}, 0, ""},
		{"output", "mode: train", "mode: train\noutput: " + unset + "/o.parquet", []string{"--in", in}, 2,
			"line 10: output: environment variable RFTPIPE_TEST_UNSET is not set"},
		{"metrics, --metrics", "mode: train", "mode: train\nmetrics: " + unset, []string{"--in", in, "--out", out, "--metrics", filepath.Join(dir, "m.json")}, 0, ""},
		{"metrics", "mode: train", "mode: train\nmetrics: " + unset, []string{"--in", in, "--out", out}, 2,
			"metrics: environment variable RFTPIPE_TEST_UNSET is not set"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "dpo.yaml")
			if err := os.WriteFile(cfg, []byte(strings.Replace(string(src), c.from, c.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := runCLI(t, append([]string{"run", "--config", cfg, "--progress", "never"}, c.flags...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and %q: %s", code, c.code, c.want, stderr)
			}
			if c.code != 0 {
				checkOneLine(t, stderr, cfg)
			}
		})
	}
}

// TestExperienceOperators: an experience operator of a job file rftpipe
// does not know stops the run (exit 2) naming it, its line and the
// operators rftpipe knows; --skip-operator runs the job without it (or
// without a known one), saying so; a skip naming no operator of the file
// is refused.
func TestExperienceOperators(t *testing.T) {
	dir := t.TempDir()
	demo := "../../fixtures/stores/demo.parquet"
	cfg := filepath.Join(dir, "job.yaml")
	src := "algorithm: {algorithm_type: grpo, repeat_times: 8}\n" +
		"data_processor:\n  experience_pipeline:\n    operators:\n" +
		"      - name: reward_shaping_mapper\n        args: {reward_shaping_configs: []}\n" +
		"      - name: reward_std_filter\n"
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--config", cfg, "--in", demo, "--progress", "never"}
	for _, c := range []struct {
		name  string
		flags []string
		code  int
		want  []string // in stderr
		rows  int64    // written, when it runs
	}{
		{"unknown operator", nil, 2, []string{cfg + ": line 5: data_processor.experience_pipeline.operators[0].name: unknown experience operator \"reward_shaping_mapper\"",
			"rftpipe runs: " + strings.Join(operator.Default().Names(), ", "), "--skip-operator reward_shaping_mapper"}, 0},
		{"unknown operator skipped", []string{"--skip-operator", "reward_shaping_mapper"}, 0,
			[]string{"warning: " + cfg + ": line 5: data_processor.experience_pipeline.operators[0].name: skipped the experience operator \"reward_shaping_mapper\" (--skip-operator)"}, 312}, // the rows of the 39 groups whose reward std is not 0
		{"both skipped", []string{"--skip-operator", "reward_shaping_mapper", "--skip-operator", "reward_std_filter"}, 0,
			[]string{`skipped the experience operator "reward_shaping_mapper"`, `line 7: data_processor.experience_pipeline.operators[1].name: skipped the experience operator "reward_std_filter"`}, 384},
		{"skip of no operator of the file", []string{"--skip-operator", "reward_shaping_mapper", "--skip-operator", "reward_std_filtr"}, 2,
			[]string{"--skip-operator reward_std_filtr: the file runs no such operator (its operators: reward_shaping_mapper, reward_std_filter)", `did you mean "reward_std_filter"?`}, 0},
		{"skip without a job file", []string{"--skip-operator", "x"}, 2, []string{"--skip-operator skips an operator of a job file"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.parquet")
			args := append(append(slices.Clone(base), "--out", out), c.flags...)
			if c.name == "skip without a job file" {
				args = []string{"run", "--advantage-fn", "grpo", "--in", demo, "--out", out, "--skip-operator", "x"}
			}
			_, stderr, code := runCLI(t, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d: %s", code, c.code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q: %s", w, stderr)
				}
			}
			if c.code != 0 {
				checkOneLine(t, stderr)
				if _, err := os.Stat(out); err == nil {
					t.Error("wrote an output")
				}
			} else if _, rows := storeShape(t, out); rows != c.rows {
				t.Errorf("%d rows written, want %d", rows, c.rows)
			}
		})
	}
}

// TestOnInvalidRewardInJobFile: a job file's on_invalid_reward applies,
// --on-invalid-reward overrides it, and a value other than error or drop
// is refused naming its line.
func TestOnInvalidRewardInJobFile(t *testing.T) {
	dir := t.TempDir()
	in := "../../fixtures/bad/nan_reward.jsonl"
	for _, c := range []struct {
		name, value string
		flags       []string
		code        int
		want        string // in stderr
	}{
		{"drop", "drop", nil, 0, "1 invalid dropped"},
		{"error", "error", nil, 2, `row 1: column "reward": reward is NaN`},
		{"flag overrides the file", "drop", []string{"--on-invalid-reward", "error"}, 2, `row 1: column "reward": reward is NaN`},
		{"flag overrides the default", "", []string{"--on-invalid-reward", "drop"}, 0, "1 invalid dropped"},
		{"unknown value", "keep", nil, 2, `line 2: on_invalid_reward: unknown value "keep" (valid: error, drop)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".yaml")
			src := "algorithm: {algorithm_type: grpo}\n"
			if c.value != "" {
				src += "on_invalid_reward: " + c.value + "\n"
			}
			if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, c.name+".parquet")
			_, stderr, code := runCLI(t, append([]string{"run", "--config", cfg, "--in", in, "--out", out, "--progress", "never"}, c.flags...)...)
			if code != c.code || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and %q: %s", code, c.code, c.want, stderr)
			}
		})
	}
}

// TestColumnsMapAnyInput: a job file's columns section maps any canonical
// input to the store's column — the group pass's reward, task and batch as
// well as the per-token lists — and the run computes what it computes over
// the store with rftpipe's names; a bad value is named by the store's
// column.
func TestColumnsMapAnyInput(t *testing.T) {
	dir := t.TempDir()
	const full = "../../fixtures/stores/full.parquet"
	want := filepath.Join(dir, "want.parquet")
	if _, stderr, code := runCLI(t, "run", "--algorithm", "grpo", "--in", full, "--out", want, "--progress", "never"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	wantAdv, _ := readLists(t, want, "advantages")
	for _, c := range []struct {
		name    string
		renamed map[string]string // canonical → the store's column
	}{
		{"reward", map[string]string{"reward": "score"}},
		{"task", map[string]string{"task": "prompt_id"}},
		{"batch", map[string]string{"batch": "step_id"}},
		{"reward and task", map[string]string{"reward": "score", "task": "prompt_id"}},
		{"action_mask", map[string]string{"action_mask": "loss_mask"}},
		{"every input at once", map[string]string{"reward": "r", "task": "t", "batch": "b", "run": "rn", "action_mask": "m", "logprobs": "lp"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".parquet")
			var excl, sel []string
			cfg := "algorithm: {algorithm_type: grpo}\ncolumns:\n"
			for canon, col := range c.renamed {
				excl = append(excl, canon)
				sel = append(sel, canon+" AS "+col)
				cfg += "  " + canon + ": " + col + "\n"
			}
			q := "SELECT * EXCLUDE (" + strings.Join(excl, ", ") + "), " + strings.Join(sel, ", ") + " FROM experiences"
			if _, stderr, code := runCLI(t, "sql", q, "--store", full, "--out", in); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			cfgPath := filepath.Join(dir, "job.yaml")
			if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out.parquet")
			if _, stderr, code := runCLI(t, "run", "--config", cfgPath, "--in", in, "--out", out, "--progress", "never"); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if got, _ := readLists(t, out, "advantages"); !slices.Equal(got["advantages"], wantAdv["advantages"]) || len(got["advantages"]) == 0 {
				t.Errorf("advantages differ from those over the store with rftpipe's names")
			}
		})
	}
	// The loss of a job file reads its inputs through the mapping too.
	lossIn := filepath.Join(dir, "loss_in.parquet")
	if _, stderr, code := runCLI(t, "sql", "SELECT * EXCLUDE (action_mask, old_logprob), action_mask AS m, old_logprob AS olp FROM experiences", "--store", full, "--out", lossIn); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lossCfg := filepath.Join(dir, "loss.yaml")
	if err := os.WriteFile(lossCfg, []byte("algorithm: {algorithm_type: grpo}\ncolumns: {action_mask: m, old_logprob: olp}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantLoss, stderr, code := runCLI(t, "loss", "--algorithm", "grpo", "--in", full)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, stderr, code := runCLI(t, "loss", "--config", lossCfg, "--in", lossIn); code != 0 || got != wantLoss {
		t.Errorf("loss over the mapped store: exit %d: %s%s, want\n%s", code, got, stderr, wantLoss)
	}

	// An invalid reward is named by its column in the store.
	src, err := os.ReadFile("../../fixtures/bad/nan_reward.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(dir, "nan_score.jsonl")
	cfg := filepath.Join(dir, "score.yaml")
	if err := os.WriteFile(in, []byte(strings.ReplaceAll(string(src), `"reward"`, `"score"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("algorithm: {algorithm_type: grpo}\ncolumns: {reward: score}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runCLI(t, "run", "--config", cfg, "--in", in, "--out", filepath.Join(dir, "o.parquet"), "--progress", "never")
	if code != 2 || !strings.Contains(stderr, in+`: row 1: column "score": invalid reward`) {
		t.Errorf("exit %d, want 2 naming row 1 of column score: %s", code, stderr)
	}
}
