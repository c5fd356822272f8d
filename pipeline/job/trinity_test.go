package job

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
)

// TestTrinityConfigs checks fixtures/configs/trinity: one whole Trinity-RFT
// config file per algorithm type, each accepted as is, its algorithm
// resolving, Trinity's other sections noted as ignored, the buffer's batch
// size and experience buffer read, and the store its header names present.
func TestTrinityConfigs(t *testing.T) {
	dir := filepath.Join(repoRoot, "fixtures/configs/trinity")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			j, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if j.Algorithm.AlgorithmType != name {
				t.Errorf("algorithm_type %q", j.Algorithm.AlgorithmType)
			}
			if j.Input != "" || j.Output != "" {
				t.Errorf("a Trinity config names no rftpipe input/output, got %q, %q", j.Input, j.Output)
			}
			if j.BatchSize == 0 && j.TrainBatchSize == 0 {
				t.Error("buffer.batch_size / train_batch_size not read")
			}
			eb := j.ExperienceBuffer
			if eb.Name == "" || !slices.Contains(StorageTypes, eb.StorageType) || eb.Path == "" {
				t.Errorf("experience buffer %+v", eb)
			}
			if eb.StorageType == "file" {
				// Train-only configs read a dataset: the bundled store,
				// relative to the config file.
				if _, err := os.Stat(eb.Path); err != nil {
					t.Errorf("experience buffer path: %v", err)
				}
			}
			notes := strings.Join(j.Warnings, "\n")
			for _, section := range []string{"project (line", "model (line", "cluster (line", "explorer", "monitor (line", "buffer.explorer_input"} {
				if eb.StorageType == "file" && (section == "buffer.explorer_input" || section == "explorer") {
					continue
				}
				if !strings.Contains(notes, section) {
					t.Errorf("notes lack %q: %s", section, notes)
				}
			}
			if !strings.Contains(notes, "algorithm.optimizer configures the trainer") {
				t.Errorf("notes lack the optimizer: %s", notes)
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, store, ok := strings.Cut(string(src), "--in ")
			store, _, _ = strings.Cut(store, " ")
			if !ok || !strings.HasPrefix(store, "fixtures/stores/") {
				t.Errorf("header names no bundled store to run on")
			} else if _, err := os.Stat(filepath.Join(repoRoot, store)); err != nil {
				t.Error(err)
			}
			if _, err := j.Resolve(); err != nil {
				t.Error(err)
			}
		})
	}
	if want := algorithm.Default().Names(); !slices.Equal(names, want) {
		t.Errorf("fixtures/configs/trinity has %v, want one file per type %v", names, want)
	}
}

// TestWholeConfig checks the reading of a whole Trinity config: which keys
// are read, which are ignored, and where errors point.
func TestWholeConfig(t *testing.T) {
	const whole = `project: p
name: n
checkpoint_root_dir: /ckpt
mode: both
algorithm:
  algorithm_type: grpo
  repeat_times: 8
  optimizer: {lr: 1e-6}
model: {model_path: m}
cluster: {node_num: 1}
explorer: {runner_per_model: 8}
synchronizer: {sync_interval: 1}
trainer: {save_interval: 10}
monitor: {monitor_type: wandb}
data_processor: {}
service: {}
log: {level: INFO}
stages: []
buffer:
  batch_size: 96
  total_epochs: 1
  some_future_key: 3
  trainer_input:
    experience_buffer:
      name: buf
      storage_type: file
      path: data/exp
      format: {prompt_key: q}
`
	j, err := Parse("cfg/job.yaml", []byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	want := ExperienceBuffer{Name: "buf", StorageType: "file", Path: filepath.Join("cfg", "data/exp")}
	if j.BatchSize != 96 || j.Algorithm.RepeatTimes != 8 || j.Mode != "both" || j.ExperienceBuffer != want {
		t.Errorf("job %+v", j)
	}
	notes := strings.Join(j.Warnings, "\n")
	for _, k := range []string{"project (line 1)", "stages (line 18)", "buffer.total_epochs (line 21)",
		"buffer.some_future_key (line 22)", "buffer.trainer_input.experience_buffer.format (line 28)"} {
		if !strings.Contains(notes, k) {
			t.Errorf("notes lack %q: %s", k, notes)
		}
	}
	if len(j.Warnings) != 2 {
		t.Errorf("want the optimizer note and one note on ignored settings, got %q", j.Warnings)
	}

	for _, c := range []struct{ name, src, want string }{
		{"typo at top level", "projct: p\n", `line 1: projct: unknown key (did you mean "project"?)`},
		{"typo in algorithm", "algorithm: {algorithm_type: grpo, repeat_time: 8}\n", `repeat_time: unknown key (did you mean "repeat_times"?)`},
		{"typo in buffer", "buffer:\n  batch_sise: 8\n", `line 2: buffer.batch_sise: unknown key (did you mean "batch_size"?)`},
		{"typo in experience buffer", "buffer: {trainer_input: {experience_buffer: {storage_typ: file}}}\n", `did you mean "storage_type"?`},
		{"bad storage type", "buffer: {trainer_input: {experience_buffer: {storage_type: fiel}}}\n", `unknown value "fiel" (valid: file, sql, queue, task_dir) (did you mean "file"?)`},
		{"bad batch size", "buffer: {batch_size: 0}\n", "buffer.batch_size: 0 is not a positive integer"},
		{"wrong type in a read section", "buffer: {batch_size: many}\n", `want a positive integer, got a string "many"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := Parse("job.yaml", []byte(c.src))
			if err == nil { // the input's value is resolved where it is used
				_, err = j.InputStore()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestTaskDirBuffer: a buffer of storage_type task_dir (Trinity after 0.6)
// is accepted; it holds no experiences, so the job's input names the store,
// and without one the error says so.
func TestTaskDirBuffer(t *testing.T) {
	src := "buffer: {trainer_input: {experience_buffer: {name: tasks, storage_type: task_dir, path: data/tasks}}}\n"
	for _, c := range []struct{ src, input, err string }{
		{src, "", "storage_type task_dir is a directory of task files, not experiences"},
		{"input: in.parquet\n" + src, "in.parquet", ""},
	} {
		j, err := Parse("job.yaml", []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		if j.ExperienceBuffer.StorageType != "task_dir" {
			t.Errorf("storage type %q", j.ExperienceBuffer.StorageType)
		}
		in, err := j.InputStore()
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, schema.ErrBadInput)) {
			t.Errorf("input %q, %v; want an error with %q", in, err, c.err)
		}
		if c.err == "" && (err != nil || in != c.input) {
			t.Errorf("input %q, %v; want %q", in, err, c.input)
		}
	}
}

// TestRelativePaths checks that a job file's paths start at its directory,
// the file of an SQLite URL too, and other database URLs and absolute paths
// are kept.
func TestRelativePaths(t *testing.T) {
	src := "input: in.parquet\noutput: ../out/o.parquet\nmetrics: /abs/m.json\n" +
		"buffer: {trainer_input: {experience_buffer: {storage_type: sql, path: 'sqlite:///buf.db'}}}\n"
	j, err := Parse(filepath.Join("jobs", "nightly", "job.yaml"), []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if j.Input != filepath.Join("jobs", "nightly", "in.parquet") || j.Output != filepath.Join("jobs", "out", "o.parquet") ||
		j.Metrics != "/abs/m.json" || j.ExperienceBuffer.Path != "sqlite:///"+filepath.Join("jobs", "nightly", "buf.db") {
		t.Errorf("paths %q %q %q %q", j.Input, j.Output, j.Metrics, j.ExperienceBuffer.Path)
	}
	for _, c := range []struct{ in, want string }{
		{"sqlite:///b.db?table=t", "sqlite:///jobs/nightly/b.db?table=t"},
		{"sqlite:///../b.db?table=t", "sqlite:///jobs/b.db?table=t"},
		{"SQLITE:///b.db?table=t", "SQLITE:///jobs/nightly/b.db?table=t"},
		{"sqlite:////abs/b.db?table=t", "sqlite:////abs/b.db?table=t"},
		{"postgresql://u@h/db?table=t", "postgresql://u@h/db?table=t"},
		{"/abs/o.parquet", "/abs/o.parquet"},
	} {
		j, err := Parse(filepath.Join("jobs", "nightly", "job.yaml"), []byte("output: '"+c.in+"'\n"))
		if err != nil {
			t.Fatal(err)
		}
		if j.Output != c.want {
			t.Errorf("output %q resolves to %q, want %q", c.in, j.Output, c.want)
		}
	}
}

// TestInterpolation checks ${oc.env:VAR,default} as OmegaConf resolves it.
func TestInterpolation(t *testing.T) {
	t.Setenv("RFT_TEST_REPEAT", "4")
	t.Setenv("RFT_TEST_DIR", "/data")
	t.Setenv("RFT_TEST_EMPTY", "")
	os.Unsetenv("RFT_TEST_UNSET")
	for _, c := range []struct {
		name, src string
		check     func(j *File) bool
	}{
		{"set variable typed as int", "algorithm: {repeat_times: '${oc.env:RFT_TEST_REPEAT}'}\n",
			func(j *File) bool { return j.Algorithm.RepeatTimes == 4 }},
		{"default when unset", "algorithm: {repeat_times: '${oc.env:RFT_TEST_UNSET,6}'}\n",
			func(j *File) bool { return j.Algorithm.RepeatTimes == 6 }},
		{"plain scalar", "buffer:\n  batch_size: ${oc.env:RFT_TEST_UNSET,32}\n",
			func(j *File) bool { return j.BatchSize == 32 }},
		{"inside a string", "input: ${oc.env:RFT_TEST_DIR,/tmp}/runs/${oc.env:RFT_TEST_UNSET,'night'}.parquet\n",
			func(j *File) bool { return j.Input == "/data/runs/night.parquet" }},
		{"null default", "metrics: ${oc.env:RFT_TEST_UNSET,null}\n",
			func(j *File) bool { return j.Metrics == "" }},
		{"empty variable", "algorithm: {algorithm_type: grpo, advantage_fn_args: {std_cal_level: '${oc.env:RFT_TEST_EMPTY,batch}'}}\n",
			func(j *File) bool { return j.Algorithm.Args(algorithm.AdvantageFn)["std_cal_level"] == "" }},
		{"argument typed as float", "algorithm: {algorithm_type: grpo, advantage_fn_args: {std_threshold: '${oc.env:RFT_TEST_UNSET,1.0e-3}'}}\n",
			func(j *File) bool { return j.Algorithm.Args(algorithm.AdvantageFn)["std_threshold"] == 1e-3 }},
		{"ignored section not resolved", "model: {model_path: '${oc.env:RFT_TEST_UNSET}'}\n",
			func(j *File) bool {
				return strings.Contains(strings.Join(j.Warnings, "\n"), "model.model_path (line 1): environment variable RFT_TEST_UNSET is not set")
			}},
		{"absolute reference", "model: {dir: /data}\ninput: ${model.dir}/in.parquet\n",
			func(j *File) bool { return j.Input == "/data/in.parquet" }},
		{"reference typed as its key", "model: {n: 3}\nalgorithm: {repeat_times: '${model.n}'}\n",
			func(j *File) bool { return j.Algorithm.RepeatTimes == 3 }},
		{"relative reference", "buffer:\n  batch_size: 8\n  trainer_input:\n    experience_buffer:\n      name: b\n      path: /x/${..experience_buffer.name}.jsonl\n",
			func(j *File) bool { return j.ExperienceBuffer.Path == "/x/b.jsonl" }},
		{"reference through an env default", "model: {p: '${oc.env:RFT_TEST_UNSET,/m}'}\ninput: ${model.p}\n",
			func(j *File) bool { return j.Input == "/m" }},
		{"unset taskset path in an ignored buffer key", "buffer:\n  explorer_input:\n    taskset:\n      path: ${oc.env:RFT_TEST_UNSET}\n  trainer_input:\n    experience_buffer: {name: e, storage_type: file, path: /e.jsonl}\n",
			func(j *File) bool {
				return j.ExperienceBuffer.Path == "/e.jsonl" &&
					strings.Contains(strings.Join(j.Warnings, "\n"), "buffer.explorer_input.taskset.path (line 4): environment variable RFT_TEST_UNSET is not set")
			}},
		{"unresolved input overridden", "input: ${oc.env:RFT_TEST_UNSET}\n",
			func(j *File) bool {
				j.Override("input", "/in")
				in, err := j.InputStore()
				return in == "/in" && err == nil
			}},
		{"unresolved buffer unused beside an input", "input: /in\nbuffer:\n  trainer_input:\n    experience_buffer: {name: e, storage_type: file, path: '${oc.env:RFT_TEST_UNSET}'}\n",
			func(j *File) bool {
				in, err := j.InputStore()
				return in == "/in" && err == nil
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := Parse("job.yaml", []byte(c.src))
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(j) {
				t.Errorf("job %+v", j)
			}
		})
	}
	for _, c := range []struct{ name, src, want string }{
		{"unset without default", "output: x\ninput: ${oc.env:RFT_TEST_UNSET}\n",
			"job.yaml: line 2: input: environment variable RFT_TEST_UNSET is not set and ${oc.env:RFT_TEST_UNSET} gives no default"},
		{"other resolver", "input: ${oc.decode:x}\n", "unsupported interpolation ${oc.decode:x}"},
		{"reference to a missing key", "input: ${model.model_path}\n", "line 1: input: ${model.model_path}: the file has no key model.model_path"},
		{"reference to a mapping", "model: {a: 1}\ninput: ${model}\n", "key model is a mapping, not a value"},
		{"reference cycle", "model: {a: '${model.b}', b: '${model.a}'}\ninput: ${model.a}\n", "a cycle?"},
		{"read key through a reference to an unset variable", "model: {p: '${oc.env:RFT_TEST_UNSET}'}\noutput: o\ninput: ${model.p}\n",
			"line 3: input: environment variable RFT_TEST_UNSET is not set"},
		{"read buffer key unresolvable", "buffer:\n  trainer_input:\n    experience_buffer:\n      path: ${oc.env:RFT_TEST_UNSET}\n",
			"line 4: buffer.trainer_input.experience_buffer.path: environment variable RFT_TEST_UNSET is not set"},
		{"relative reference above the top", "input: ${..x}\n", "climbs above the top"},
		{"unterminated", "input: ${oc.env:X\n", "unterminated interpolation"},
		{"resolved value of the wrong type", "algorithm: {repeat_times: '${oc.env:RFT_TEST_DIR}'}\n", `want a positive integer, got a string "/data"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, err := Parse("job.yaml", []byte(c.src))
			if err == nil { // the input's value is resolved where it is used
				_, err = j.InputStore()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, schema.ErrBadInput) {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}
