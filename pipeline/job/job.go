// Package job reads rftpipe job files: YAML holding Trinity-RFT's
// `algorithm:` section exactly as users write it for Trinity, plus the keys
// of an rftpipe job (input, output, metrics, seed, on_invalid_reward, column
// mapping, quirk fixes):
//
//	algorithm:                  # Trinity-RFT's section, unchanged
//	  algorithm_type: grpo
//	  repeat_times: 8
//	  advantage_fn_args: {std_threshold: 0.0}
//	input: rollouts.parquet
//	output: train.parquet
//	metrics: metrics.json
//	seed: 7
//
// Decoding is strict: an unknown key, a value of the wrong type, an unknown
// component name or argument is an error naming the file, the line and the
// key, with a did-you-mean suggestion when one is close. Every error wraps
// schema.ErrBadInput.
package job

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
	"github.com/rftpipe/rftpipe/stages/operator"
)

// File is a decoded job file. Values the file leaves out are zero; a command
// line may override any of them before Resolve.
type File struct {
	// File is the job file's path, for messages.
	File string
	// Algorithm is the algorithm section as written (unresolved).
	Algorithm algorithm.Config
	// Options are the resolution's quirk fixes (quirks section).
	Options algorithm.Options
	// Mode is Trinity's top-level mode ("" = train).
	Mode string
	// Input, Output, Metrics and Prom are file paths: the experience store
	// read, the store written, the metrics as JSON and in the Prometheus
	// text format.
	Input, Output, Metrics, Prom string
	// OnInvalidReward is what a run does with null, NaN or infinite
	// rewards (pipeline.Job's; "" the default).
	OnInvalidReward string
	// Seed seeds the job's random choices; HasSeed says whether it is set.
	Seed    uint64
	HasSeed bool
	// RolloutCorrection is the algorithm section's rollout_correction (verl's
	// keys), nil when absent.
	RolloutCorrection map[string]any
	// Columns maps rftpipe's column names to the store's (columns section).
	Columns map[string]string
	// BatchSize and TrainBatchSize are Trinity's buffer.batch_size (tasks
	// per explore step) and buffer.train_batch_size (experiences per train
	// step); 0 when the file leaves them out.
	BatchSize, TrainBatchSize int
	// ExperienceBuffer is Trinity's buffer.trainer_input.experience_buffer,
	// the buffer the trainer reads.
	ExperienceBuffer ExperienceBuffer
	// Operators are Trinity's data_processor.experience_pipeline.operators,
	// in order (RunOperators: those a run runs).
	Operators []Operator
	// Warnings are notes on keys accepted for compatibility and ignored.
	Warnings []string

	// lines maps dotted keys ("algorithm.policy_loss_fn_args.clip_range")
	// to the line they are on.
	lines map[string]int
	// unresolved holds, by dotted key, the error of a deferredKeys value
	// whose interpolation did not resolve (the value is left unset).
	unresolved map[string]error
}

// Operator is one experience operator of a job file: upstream's name and
// args (nil: the operator's defaults), and where its name is written.
type Operator struct {
	Name string
	Args map[string]any
	Key  string // dotted key of its name
	Line int
}

// ExperienceBuffer is the trainer's experience buffer of a Trinity config.
type ExperienceBuffer struct {
	// Name is the buffer's name.
	Name string
	// StorageType is one of StorageTypes ("" when unset).
	StorageType string
	// Path is the buffer's file or directory (relative paths resolved
	// against the job file's directory) or database URL (as written, e.g.
	// sqlite:///buffer.db).
	Path string
}

// StorageTypes are Trinity's buffer storage types; task_dir (Trinity after
// 0.6) is a directory of task files, which holds no experiences: a job
// reads it only with an input of its own.
var StorageTypes = []string{"file", "sql", "queue", "task_dir"}

// Error is a problem in a job file, located by line and key.
type Error struct {
	File string
	Line int    // 1-based; 0 when unknown
	Key  string // dotted key path; "" for the file as a whole
	Msg  string
	// Suggestion is the closest valid name, if any.
	Suggestion string
	Err        error // cause, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	if e.Suggestion != "" {
		fmt.Fprintf(&b, " (did you mean %q?)", e.Suggestion)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, schema.ErrBadInput) true and exposes the cause.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{schema.ErrBadInput, e.Err}
	}
	return []error{schema.ErrBadInput}
}

// Load reads and decodes a job file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot read job file: " + err.Error(), Err: err}
	}
	return Parse(path, data)
}

// Parse decodes the job file data; file names it in messages, and its
// directory is where the file's relative paths start.
func Parse(file string, data []byte) (*File, error) {
	j := &File{File: file, lines: map[string]int{}, unresolved: map[string]error{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{File: file, Msg: "not valid YAML: " + oneLine(err), Err: err}
	}
	if len(doc.Content) == 0 {
		return j, nil // an empty file: everything from the command line
	}
	d := decoder{j: j, root: doc.Content[0]}
	names := make([]string, 0, len(topKeys)+len(trinitySections))
	for _, f := range topKeys {
		names = append(names, f.key)
	}
	names = append(names, trinitySections...)
	err := d.keys(doc.Content[0], "", topKeys, func(k *yaml.Node, key string) error {
		if !slices.Contains(trinitySections, k.Value) {
			return &Error{File: file, Line: k.Line, Key: key, Suggestion: suggest(k.Value, names), Msg: "unknown key"}
		}
		d.ignored = append(d.ignored, fmt.Sprintf("%s (line %d)", key, k.Line))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(d.ignored) > 0 {
		j.Warnings = append(j.Warnings, fmt.Sprintf("%s: ignored Trinity-RFT settings that configure Trinity's services, not the algorithm: %s",
			file, strings.Join(d.ignored, ", ")))
	}
	if len(d.unresolvable) > 0 {
		j.Warnings = append(j.Warnings, fmt.Sprintf("%s: interpolations in ignored settings that do not resolve (rftpipe never reads them): %s",
			file, strings.Join(d.unresolvable, "; ")))
	}
	j.resolvePaths(filepath.Dir(file))
	return j, nil
}

// resolvePaths makes the file's relative paths relative to dir, the job
// file's directory, so a job runs the same from any working directory: plain
// paths and the file of an SQLite URL (sqlite:///relative.db) alike.
// Other database URLs and absolute paths are left as written.
func (j *File) resolvePaths(dir string) {
	for _, p := range []*string{&j.Input, &j.Output, &j.Metrics, &j.Prom, &j.ExperienceBuffer.Path} {
		scheme, rest, isURL := strings.Cut(*p, "://")
		switch {
		case *p == "" || filepath.IsAbs(*p):
		case !isURL:
			*p = filepath.Join(dir, *p)
		case strings.HasPrefix(strings.ToLower(scheme), "sqlite") && strings.HasPrefix(rest, "/") && !strings.HasPrefix(rest, "//"):
			*p = scheme + ":///" + filepath.Join(dir, rest[1:])
		}
	}
}

// Override sets key — input, output, metrics or prom — to a command line's
// value (when not empty): the file's value, resolved or not, is not used.
func (j *File) Override(key, value string) {
	if value == "" {
		return
	}
	dst := map[string]*string{"input": &j.Input, "output": &j.Output, "metrics": &j.Metrics, "prom": &j.Prom}[key]
	*dst = value
	delete(j.unresolved, key)
}

// checkResolved returns the error of the first of keys (dotted keys or
// sections) whose interpolation did not resolve, nil when every one did:
// the values of deferredKeys are checked where they are used.
func (j *File) checkResolved(keys ...string) error {
	var bad []string
	for k := range j.unresolved {
		for _, want := range keys {
			if k == want || strings.HasPrefix(k, want+".") {
				bad = append(bad, k)
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return j.unresolved[bad[0]]
}

// OutputStore returns the job's output store.
func (j *File) OutputStore() (string, error) { return j.Output, j.checkResolved("output") }

// Monitoring returns the job's metrics and Prometheus files.
func (j *File) Monitoring() (metrics, prom string, err error) {
	return j.Metrics, j.Prom, j.checkResolved("metrics", "prom")
}

// Line returns the line of a dotted key, 0 if the file does not set it.
func (j *File) Line(key string) int { return j.lines[key] }

// SetAlgorithmType overrides algorithm_type (a command-line flag): errors
// about it no longer point into the file.
func (j *File) SetAlgorithmType(name string) {
	j.Algorithm.AlgorithmType = name
	delete(j.lines, "algorithm.algorithm_type")
}

// Resolve resolves the algorithm section (algorithm.Resolve) with the job's
// mode, input (or else the experience buffer's path) and quirk options. Errors point at the line of the key at
// fault.
func (j *File) Resolve() (*algorithm.Resolved, error) {
	if err := j.checkArgNames(); err != nil {
		return nil, err
	}
	input := j.Input
	if input == "" {
		input = j.ExperienceBuffer.Path // the trainer's buffer of a Trinity config
	}
	res, err := algorithm.Resolve(j.Algorithm, &algorithm.Env{Mode: j.Mode, Input: input}, j.Options)
	var ke *algorithm.KeyError
	if errors.As(err, &ke) {
		return nil, j.errAt("algorithm."+ke.Key, "", ke.Err)
	}
	return res, err
}

// checkArgNames checks every argument name of the *_args dicts against the
// component the slot resolves to, to point at the key with a suggestion.
func (j *File) checkArgNames() error {
	typeName := j.Algorithm.AlgorithmType
	if typeName == "" {
		typeName = algorithm.DefaultType
	}
	spec, err := algorithm.Default().Get(typeName)
	if err != nil {
		return j.errAt("algorithm.algorithm_type", suggest(typeName, algorithm.Default().Names()), err)
	}
	for _, s := range algorithm.Slots {
		fn := j.Algorithm.Fn(s)
		if fn == "" {
			fn = spec.New.DefaultFn(s)
		}
		valid, err := algorithm.ArgNames(s, fn)
		if err != nil {
			return j.errAt("algorithm."+s.Key(), suggest(fn, algorithm.ComponentNames(s)), err)
		}
		var keys []string
		for k := range j.Algorithm.Args(s) {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !slices.Contains(valid, k) {
				key := "algorithm." + s.ArgsKey() + "." + k
				return &Error{File: j.File, Line: j.lines[key], Key: key, Suggestion: suggest(k, valid),
					Msg: fmt.Sprintf("%s %s takes no argument %q (valid: %s)", s.Key(), fn, k, strings.Join(valid, ", "))}
			}
		}
	}
	return nil
}

// errAt locates a cause at a dotted key, or at its closest set parent.
func (j *File) errAt(key, suggestion string, cause error) error {
	line := 0
	for k := key; k != ""; {
		if l, ok := j.lines[k]; ok {
			line = l
			break
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return &Error{File: j.File, Line: line, Key: key, Msg: oneLine(cause), Suggestion: suggestion, Err: cause}
}

// oneLine returns err's message on one line.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// RunOperators returns the file's experience operators a run runs: all but
// those named in skip (a command line's choice), which it describes, one
// line each, in skipped. An operator rftpipe does not know is an error
// naming it and the operators it knows — Trinity refuses it too — unless
// skipped; so is a skip that names no operator of the file.
func (j *File) RunOperators(skip []string) (run []Operator, skipped []string, err error) {
	known := operator.Default().Names()
	for _, op := range j.Operators {
		switch {
		case slices.Contains(skip, op.Name):
			skipped = append(skipped, fmt.Sprintf("%s: line %d: %s: skipped the experience operator %q (--skip-operator)", j.File, op.Line, op.Key, op.Name))
		case !slices.Contains(known, op.Name):
			return nil, nil, &Error{File: j.File, Line: op.Line, Key: op.Key, Suggestion: suggest(op.Name, known),
				Msg: fmt.Sprintf("unknown experience operator %q (rftpipe runs: %s); --skip-operator %s runs the job without it", op.Name, strings.Join(known, ", "), op.Name)}
		default:
			run = append(run, op)
		}
	}
	for _, name := range skip {
		if !slices.ContainsFunc(j.Operators, func(op Operator) bool { return op.Name == name }) {
			var names []string
			for _, op := range j.Operators {
				names = append(names, op.Name)
			}
			return nil, nil, &Error{File: j.File, Suggestion: suggest(name, names),
				Msg: fmt.Sprintf("--skip-operator %s: the file runs no such operator (its operators: %s)", name, orNone(names))}
		}
	}
	return run, skipped, nil
}

// orNone joins names, or says none.
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// InputStore returns the job's input store: its input, else the store the
// Trinity config's experience buffer names (a file path of a file buffer,
// the table of an sql buffer as a database URL).
func (j *File) InputStore() (string, error) {
	if j.Input != "" {
		return j.Input, nil
	}
	if err := j.checkResolved("input", experienceBuffer); err != nil {
		return "", err
	}
	eb := j.ExperienceBuffer
	switch {
	case eb == (ExperienceBuffer{}):
		return "", nil
	case eb.StorageType == "file":
		return eb.Path, nil
	}
	return trinity.BufferURL(eb.Path, eb.StorageType, eb.Name, "")
}
