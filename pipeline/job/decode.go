package job

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/rftpipe/rftpipe/pipeline"
	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/rollout"
)

// field is one known key of a mapping: its documentation and how its value
// node is decoded into the job (path is the dotted key).
type field struct {
	key    string
	doc    string
	decode func(d *decoder, n *yaml.Node, path string) error
}

// topKeys are the keys of a job file.
var topKeys = []field{
	{"algorithm", "Trinity-RFT's algorithm section", func(d *decoder, n *yaml.Node, path string) error {
		return d.mapping(n, path, algorithmKeys())
	}},
	{"mode", "Trinity's run mode (train, both, explore, bench, serve); sft and dpo need train", func(d *decoder, n *yaml.Node, path string) error {
		return d.choice(n, path, &d.j.Mode, algorithm.Modes)
	}},
	{"input", "experience store to read", strField(func(j *File) *string { return &j.Input })},
	{"output", "store to write", strField(func(j *File) *string { return &j.Output })},
	{"metrics", "metrics file (JSON, upstream metric names)", strField(func(j *File) *string { return &j.Metrics })},
	{"prom", "metrics file in the Prometheus text format (node_exporter textfile collector)", strField(func(j *File) *string { return &j.Prom })},
	{"seed", "seed of the job's random choices", func(d *decoder, n *yaml.Node, path string) error {
		var v int64
		if err := d.scalar(n, path, "!!int", "a non-negative integer", &v); err != nil {
			return err
		}
		if v < 0 {
			return d.errf(n, path, "%d is not a non-negative integer", v)
		}
		d.j.Seed, d.j.HasSeed = uint64(v), true
		return nil
	}},
	{"on_invalid_reward", "null, NaN or infinite rewards: error (default) or drop", func(d *decoder, n *yaml.Node, path string) error {
		return d.choice(n, path, &d.j.OnInvalidReward, []string{pipeline.InvalidError, pipeline.InvalidDrop})
	}},
	{"columns", "rftpipe column name → the store's column name", func(d *decoder, n *yaml.Node, path string) error {
		return d.columns(n, path)
	}},
	{"quirks", "opt-in fixes of upstream quirks", func(d *decoder, n *yaml.Node, path string) error {
		return d.mapping(n, path, quirkKeys)
	}},
	{"data_processor", "Trinity's data processor: experience_pipeline.operators is read", func(d *decoder, n *yaml.Node, path string) error {
		return d.partial(n, path, dataProcessorKeys, nil)
	}},
	{"buffer", "Trinity's buffer section: batch sizes and the trainer's experience buffer are read", func(d *decoder, n *yaml.Node, path string) error {
		return d.partial(n, path, bufferKeys, bufferIgnored)
	}},
}

// trinitySections are the top-level sections of a Trinity-RFT config that
// configure Trinity's own services (model, cluster, explorer, …): a whole
// config file is accepted, and they are ignored with one note.
var trinitySections = []string{
	"project", "group", "name", "checkpoint_root_dir", "checkpoint_job_dir", "ray_namespace",
	"continue_from_checkpoint", "model", "cluster", "explorer", "synchronizer", "trainer",
	"monitor", "service", "log", "stages",
	// 0.6 line: CoD's task packing (CoDConfig), explorer side only.
	"cod",
}

// dataProcessorKeys are the keys of Trinity's data_processor section
// rftpipe reads.
var dataProcessorKeys = []field{
	{"experience_pipeline", "the operators run on each explore step's experiences", func(d *decoder, n *yaml.Node, path string) error {
		return d.partial(n, path, []field{{"operators", "experience operators [{name, args}], run in order", (*decoder).operators}}, nil)
	}},
}

// operators decodes data_processor.experience_pipeline.operators: a list
// of {name, args}, in order, each with its key and line (File.RunOperators
// checks their names).
func (d *decoder) operators(n *yaml.Node, path string) error {
	if n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return d.errf(n, path, "want a list of {name, args}, got %s", describe(n))
	}
	for i, item := range n.Content {
		item = resolveAlias(item)
		key := fmt.Sprintf("%s[%d]", path, i)
		op := Operator{Key: key + ".name", Line: item.Line}
		err := d.mapping(item, key, []field{
			{"name", "operator name", func(d *decoder, n *yaml.Node, path string) error {
				return d.scalar(n, path, "!!str", "a string", &op.Name)
			}},
			{"args", "operator arguments", func(d *decoder, n *yaml.Node, path string) error {
				a, err := d.args(n, path)
				op.Args = a
				return err
			}},
		})
		if err != nil {
			return err
		}
		if l, ok := d.j.lines[op.Key]; ok {
			op.Line = l
		}
		d.j.Operators = append(d.j.Operators, op)
	}
	return nil
}

// deferredKeys are the keys a command line can leave unused (input,
// output, metrics and prom by its flags; the experience buffer by an
// input): an interpolation of theirs that does not resolve is an error only
// where the value is used.
var deferredKeys = []string{"input", "output", "metrics", "prom",
	experienceBuffer + ".name", experienceBuffer + ".storage_type", experienceBuffer + ".path"}

// experienceBuffer is the dotted key of the trainer's experience buffer.
const experienceBuffer = "buffer.trainer_input.experience_buffer"

// bufferKeys are the keys of Trinity's buffer section rftpipe reads.
var bufferKeys = []field{
	{"batch_size", "tasks per explore step", intField(func(j *File) *int { return &j.BatchSize })},
	{"train_batch_size", "experiences per train step (default batch_size × repeat_times)", intField(func(j *File) *int { return &j.TrainBatchSize })},
	{"trainer_input", "the trainer's inputs", func(d *decoder, n *yaml.Node, path string) error {
		return d.partial(n, path, trainerInputKeys, trainerInputIgnored)
	}},
}

// trainerInputKeys are the keys of buffer.trainer_input rftpipe reads.
var trainerInputKeys = []field{
	{"experience_buffer", "the buffer the trainer reads experiences from", func(d *decoder, n *yaml.Node, path string) error {
		return d.partial(n, path, experienceBufferKeys, experienceBufferIgnored)
	}},
}

// experienceBufferKeys are the keys of buffer.trainer_input.experience_buffer
// rftpipe reads.
var experienceBufferKeys = []field{
	{"name", "buffer name", strField(func(j *File) *string { return &j.ExperienceBuffer.Name })},
	{"storage_type", "file, sql, queue or task_dir", func(d *decoder, n *yaml.Node, path string) error {
		return d.choice(n, path, &d.j.ExperienceBuffer.StorageType, StorageTypes)
	}},
	{"path", "the buffer's file, directory or database URL", strField(func(j *File) *string { return &j.ExperienceBuffer.Path })},
}

// Trinity keys of the partly read sections that rftpipe ignores; a key that
// is neither read nor listed here is ignored too, unless it is a likely typo
// of a read key.
var (
	bufferIgnored = []string{"total_epochs", "total_steps", "explorer_input", "explorer_output",
		"max_retry_times", "max_retry_interval", "tokenizer_path", "pad_token_id", "cache_dir"}
	trainerInputIgnored = []string{"auxiliary_buffers", "sft_warmup_dataset", "sft_warmup_steps",
		"read_batch_size", "use_priority_queue"}
	experienceBufferIgnored = []string{"format", "max_read_timeout", "use_priority_queue",
		"reuse_cooldown_time", "replay_buffer", "split", "subset_name", "index", "schema_type",
		"enable_progress_bar", "ray_namespace", "wrap_in_ray", "rollout_args", "workflow_args",
		"reward_fn_args", "default_workflow_type", "default_reward_fn_type", "capacity",
		"priority_fn", "priority_fn_args", "batch_size", "total_epochs", "total_steps"}
)

// quirkKeys are the quirk fixes a job file can switch on.
var quirkKeys = []field{
	{"use_algorithm_repeat_times_default", "Q-04: apply the repeat_times of the algorithm's default_config()", boolField(func(j *File) *bool {
		return &j.Options.AlgorithmRepeatTimes
	})},
}

// trainerOnly are keys of Trinity's algorithm section that configure the
// trainer itself; they are accepted so a Trinity config works unchanged, and
// ignored.
var trainerOnly = []struct{ key, tag string }{
	{"optimizer", "!!map"},
	{"enable_router_replay", "!!bool"},
}

// algorithmKeys are the keys of the algorithm section.
func algorithmKeys() []field {
	cfg := func(j *File) *algorithm.Config { return &j.Algorithm }
	fs := []field{
		{"algorithm_type", "algorithm type (default ppo)", func(d *decoder, n *yaml.Node, path string) error {
			return d.choice(n, path, &cfg(d.j).AlgorithmType, algorithm.Default().Names())
		}},
		{"repeat_times", "rollouts per task (default 1)", func(d *decoder, n *yaml.Node, path string) error {
			var v int64
			if err := d.scalar(n, path, "!!int", "a positive integer", &v); err != nil {
				return err
			}
			if n.Tag != "!!null" && (v < 1 || v > math.MaxInt32) {
				return d.errf(n, path, "%d is not a positive integer", v)
			}
			cfg(d.j).RepeatTimes = int(v)
			return nil
		}},
	}
	for _, s := range algorithm.Slots {
		fs = append(fs,
			field{s.Key(), "component name", func(d *decoder, n *yaml.Node, path string) error {
				var name string
				if err := d.choice(n, path, &name, algorithm.ComponentNames(s)); err != nil {
					return err
				}
				c := cfg(d.j)
				c.Set(s, name, c.Args(s))
				return nil
			}},
			field{s.ArgsKey(), "component arguments (null: its default_args)", func(d *decoder, n *yaml.Node, path string) error {
				a, err := d.args(n, path)
				if err != nil {
					return err
				}
				c := cfg(d.j)
				c.Set(s, c.Fn(s), a)
				return nil
			}},
		)
	}
	fs = append(fs, field{"rollout_correction", "verl's rollout correction: IS weights and rejection sampling (stages/rollout)", func(d *decoder, n *yaml.Node, path string) error {
		a, err := d.args(n, path)
		if err != nil {
			return err
		}
		if _, err := rollout.Parse(a); err != nil {
			return d.errf(n, path, "%v", err)
		}
		d.j.RolloutCorrection = a
		return nil
	}})
	fs = append(fs, field{"loss_agg_mode", "aggregation of the losses (default token-mean)", func(d *decoder, n *yaml.Node, path string) error {
		return d.choice(n, path, &cfg(d.j).LossAggMode, agg.ModeNames())
	}})
	fs = append(fs, field{"bypass_old_logprobs", "old_log_probs are the rollout log-probs (default true; m2po requires it)", func(d *decoder, n *yaml.Node, path string) error {
		bypass := true
		if err := d.scalar(n, path, "!!bool", "true or false", &bypass); err != nil {
			return err
		}
		cfg(d.j).NoBypassOldLogprobs = !bypass
		return nil
	}})
	for _, t := range trainerOnly {
		tag := t.tag
		fs = append(fs, field{t.key, "trainer setting, ignored", func(d *decoder, n *yaml.Node, path string) error {
			if n.Tag != tag && n.Tag != "!!null" {
				return d.errf(n, path, "want %s, got %s", kindOf(tag), describe(n))
			}
			d.j.Warnings = append(d.j.Warnings, fmt.Sprintf("%s: line %d: %s configures the trainer; rftpipe ignores it", d.j.File, n.Line, path))
			return nil
		}})
	}
	return fs
}

// strField decodes a string (null: unset) into the job.
func strField(at func(*File) *string) func(d *decoder, n *yaml.Node, path string) error {
	return func(d *decoder, n *yaml.Node, path string) error {
		return d.scalar(n, path, "!!str", "a string", at(d.j))
	}
}

// intField decodes a positive integer (null: unset) into the job.
func intField(at func(*File) *int) func(d *decoder, n *yaml.Node, path string) error {
	return func(d *decoder, n *yaml.Node, path string) error {
		var v int64
		if err := d.scalar(n, path, "!!int", "a positive integer", &v); err != nil {
			return err
		}
		if n.Tag != "!!null" && (v < 1 || v > math.MaxInt32) {
			return d.errf(n, path, "%d is not a positive integer", v)
		}
		*at(d.j) = int(v)
		return nil
	}
}

// boolField decodes a boolean into the job.
func boolField(at func(*File) *bool) func(d *decoder, n *yaml.Node, path string) error {
	return func(d *decoder, n *yaml.Node, path string) error {
		return d.scalar(n, path, "!!bool", "true or false", at(d.j))
	}
}

// decoder walks the YAML tree of one job file.
type decoder struct {
	j *File
	// ignored are the keys of Trinity's sections skipped, "key (line N)".
	ignored []string
	// unresolvable are the interpolations of ignored keys that cannot be
	// resolved, "key (line N): why".
	unresolvable []string
	// root is the file's top mapping, which ${KEY} references look up.
	root *yaml.Node
}

func (d *decoder) errf(n *yaml.Node, path, format string, a ...any) error {
	return &Error{File: d.j.File, Line: n.Line, Key: path, Msg: fmt.Sprintf(format, a...)}
}

// join appends key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping decodes a mapping node whose keys must be among fields; null is an
// empty mapping. Each key's line is recorded.
func (d *decoder) mapping(n *yaml.Node, path string, fields []field) error {
	return d.keys(n, path, fields, nil)
}

// partial decodes a mapping of which rftpipe reads only fields: another key
// is ignored (noted in the job's warnings), unless it is not among known
// and is close to a read key, a likely typo.
func (d *decoder) partial(n *yaml.Node, path string, fields []field, known []string) error {
	return d.keys(n, path, fields, func(k *yaml.Node, key string) error {
		if !slices.Contains(known, k.Value) {
			names := make([]string, len(fields))
			for i, f := range fields {
				names[i] = f.key
			}
			if s := suggest(k.Value, names); s != "" {
				return &Error{File: d.j.File, Line: k.Line, Key: key, Suggestion: s, Msg: "unknown key"}
			}
		}
		d.ignored = append(d.ignored, fmt.Sprintf("%s (line %d)", key, k.Line))
		return nil
	})
}

// keys decodes a mapping node whose keys are among fields; other is called
// for any other key (nil: an unknown key is an error).
func (d *decoder) keys(n *yaml.Node, path string, fields []field, other func(k *yaml.Node, key string) error) error {
	n = resolveAlias(n)
	if n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		where := "the job file"
		if path != "" {
			where = path
		}
		return &Error{File: d.j.File, Line: n.Line, Key: path, Msg: fmt.Sprintf("%s must be a mapping, got %s", where, describe(n))}
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.key
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			return d.errf(k, path, "keys must be strings, got %s", describe(k))
		}
		if first, dup := seen[k.Value]; dup {
			return d.errf(k, key, "key given twice (first on line %d)", first)
		}
		seen[k.Value] = k.Line
		idx := slices.Index(names, k.Value)
		if idx < 0 && other != nil {
			if err := other(k, key); err != nil {
				return err
			}
			d.unresolved(v, key)
			continue
		}
		if idx < 0 {
			return &Error{File: d.j.File, Line: k.Line, Key: key, Suggestion: suggest(k.Value, names),
				Msg: "unknown key"}
		}
		d.j.lines[key] = k.Line
		v = resolveAlias(v)
		if v.Kind == yaml.ScalarNode { // a mapping's keys resolve as they are read
			var err error
			if v, err = d.interp(v, key); err != nil && slices.Contains(deferredKeys, key) {
				d.j.unresolved[key] = err // an error where the value is used (File.checkResolved)
				continue
			} else if err != nil {
				return err
			}
		}
		if err := fields[idx].decode(d, v, key); err != nil {
			return err
		}
	}
	return nil
}

// scalar decodes a scalar of the given tag into dst; null leaves dst unset.
func (d *decoder) scalar(n *yaml.Node, path, tag, want string, dst any) error {
	if n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != tag {
		return d.errf(n, path, "want %s, got %s", want, describe(n))
	}
	if err := n.Decode(dst); err != nil {
		return d.errf(n, path, "want %s, got %q", want, n.Value)
	}
	return nil
}

// choice decodes a string that must be one of valid (null: unset).
func (d *decoder) choice(n *yaml.Node, path string, dst *string, valid []string) error {
	var s string
	if err := d.scalar(n, path, "!!str", "a string", &s); err != nil {
		return err
	}
	if n.Tag != "!!null" && !slices.Contains(valid, s) {
		return &Error{File: d.j.File, Line: n.Line, Key: path, Suggestion: suggest(s, valid),
			Msg: fmt.Sprintf("unknown value %q (valid: %s)", s, strings.Join(valid, ", "))}
	}
	*dst = s
	return nil
}

// args decodes an argument dict (null: nil) and records its keys' lines.
func (d *decoder) args(n *yaml.Node, path string) (algorithm.Args, error) {
	if n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, d.errf(n, path, "want a mapping of arguments, got %s", describe(n))
	}
	out := algorithm.Args{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolveAlias(n.Content[i+1])
		key := join(path, k.Value)
		if k.Kind != yaml.ScalarNode {
			return nil, d.errf(k, path, "argument names must be strings, got %s", describe(k))
		}
		if _, dup := out[k.Value]; dup {
			return nil, d.errf(k, key, "argument given twice")
		}
		v, err := d.interp(v, key)
		if err != nil {
			return nil, err
		}
		var val any
		if err := v.Decode(&val); err != nil {
			return nil, d.errf(v, key, "%v", err)
		}
		d.j.lines[key] = k.Line
		out[k.Value] = val
	}
	return out, nil
}

// columns decodes the column mapping: rftpipe's name (schema's vocabulary,
// or Trinity's and verl's name for it, schema.Aliases) → the store's.
func (d *decoder) columns(n *yaml.Node, path string) error {
	names := slices.Clone(schema.Order)
	for alias := range schema.Aliases {
		names = append(names, alias)
	}
	slices.Sort(names[len(schema.Order):])
	fields := make([]field, len(names))
	for i, name := range names {
		fields[i] = field{name, "store column holding " + name, func(d *decoder, v *yaml.Node, key string) error {
			var col string
			if err := d.scalar(v, key, "!!str", "a column name", &col); err != nil {
				return err
			}
			if col == "" {
				return d.errf(v, key, "want a column name, got an empty string")
			}
			if d.j.Columns == nil {
				d.j.Columns = map[string]string{}
			}
			if canon, ok := schema.Aliases[name]; ok {
				name = canon
			}
			d.j.Columns[name] = col
			return nil
		}}
	}
	return d.mapping(n, path, fields)
}

// resolveAlias follows YAML aliases (*anchor) to their node.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names a node's kind for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%s %q", kindOf(n.Tag), n.Value)
}

// kindOf names a YAML tag.
func kindOf(tag string) string {
	switch tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!map":
		return "a mapping"
	case "!!null":
		return "null"
	}
	return tag
}
