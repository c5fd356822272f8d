package job

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/algorithm"
	"github.com/rftpipe/rftpipe/schema"
)

// TestTrinitySnippet checks that an algorithm section as Trinity-RFT users
// write it works unchanged.
func TestTrinitySnippet(t *testing.T) {
	for _, src := range []string{
		"algorithm: {algorithm_type: grpo, repeat_times: 8, advantage_fn_args: {std_threshold: 0.0}}\n",
		"algorithm:\n  algorithm_type: grpo\n  repeat_times: 8\n  advantage_fn_args:\n    std_threshold: 0.0\n",
	} {
		j, err := Parse("job.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		res, err := j.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		c := res.Config
		if c.AlgorithmType != "grpo" || c.RepeatTimes != 8 || c.Fn(algorithm.AdvantageFn) != "grpo" ||
			!reflect.DeepEqual(c.Args(algorithm.AdvantageFn), algorithm.Args{"std_threshold": 0.0}) {
			t.Errorf("resolved %+v", c)
		}
		fn, err := res.PipelineAdvantage()
		if err != nil || fn == nil {
			t.Errorf("advantage fn %v, %v", fn, err)
		}
	}
}

func TestParseJob(t *testing.T) {
	src := `# a full job
algorithm:
  algorithm_type: gspo
  policy_loss_fn_args:
    clip_range_low: 0.0003
    clip_range_high: 0.0004
    loss_agg_mode: seq-mean-token-mean
  loss_agg_mode: seq-mean-token-sum
  kl_loss_fn: low_var_kl
  kl_loss_fn_args: {kl_coef: 0.01}
  optimizer: {lr: 1.0e-6}
  bypass_old_logprobs: true
mode: train
input: in.parquet
output: out.parquet
metrics: m.json
prom: m.prom
seed: 42
on_invalid_reward: drop
columns:
  reward: score
quirks:
  use_algorithm_repeat_times_default: true
`
	j, err := Parse("job.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if j.Input != "in.parquet" || j.Output != "out.parquet" || j.Metrics != "m.json" || j.Prom != "m.prom" ||
		!j.HasSeed || j.Seed != 42 || j.Mode != "train" || !j.Options.AlgorithmRepeatTimes || j.OnInvalidReward != "drop" ||
		!reflect.DeepEqual(j.Columns, map[string]string{"reward": "score"}) {
		t.Errorf("job %+v", j)
	}
	if len(j.Warnings) != 1 || !strings.Contains(j.Warnings[0], "line 11: algorithm.optimizer") || j.Algorithm.NoBypassOldLogprobs {
		t.Errorf("warnings %q, bypass_old_logprobs false: %v", j.Warnings, j.Algorithm.NoBypassOldLogprobs)
	}
	if got := j.Line("algorithm.policy_loss_fn_args.clip_range_low"); got != 5 {
		t.Errorf("line of clip_range_low %d, want 5", got)
	}
	res, err := j.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	c := res.Config
	if c.RepeatTimes != 2 || c.Args(algorithm.PolicyLossFn)["loss_agg_mode"] != "seq-mean-token-sum" ||
		c.Fn(algorithm.KLLossFn) != "low_var_kl" || c.Args(algorithm.KLLossFn)["kl_coef"] != 0.01 {
		t.Errorf("resolved %+v", c)
	}
}

// TestErrors checks that every problem names the key and its line, with a
// suggestion where one is close.
func TestErrors(t *testing.T) {
	tests := []struct {
		name, src  string
		line       int
		key        string
		suggestion string
		msg        string
	}{
		{"misspelled section key", "algorithm:\n  algorithm_type: grpo\n  advantage_fn_arg: {std_threshold: 0.0}\n",
			3, "algorithm.advantage_fn_arg", "advantage_fn_args", "unknown key"},
		{"misspelled top key", "algorithm: {algorithm_type: grpo}\nimput: a.parquet\n", 2, "imput", "input", "unknown key"},
		{"transposed letters", "algorithm:\n  algorithm_tpye: grpo\n", 2, "algorithm.algorithm_tpye", "algorithm_type", "unknown key"},
		{"unknown key, nothing close", "algorithm:\n  trainer: {}\n", 2, "algorithm.trainer", "", "unknown key"},
		{"unknown algorithm", "algorithm:\n  algorithm_type: grpoo\n", 2, "algorithm.algorithm_type", "grpo", `unknown value "grpoo"`},
		{"unknown loss", "algorithm:\n  policy_loss_fn: gpso\n", 2, "algorithm.policy_loss_fn", "gspo", `unknown value "gpso"`},
		{"unknown loss_agg_mode", "algorithm:\n  loss_agg_mode: token_mean\n", 2, "algorithm.loss_agg_mode", "token-mean", "unknown value"},
		{"misspelled argument", "algorithm:\n  algorithm_type: grpo\n  advantage_fn_args:\n    std_treshold: 0.0\n",
			4, "algorithm.advantage_fn_args.std_treshold", "std_threshold", `takes no argument "std_treshold"`},
		{"argument of the default loss", "algorithm:\n  policy_loss_fn_args: {clip_rnage: 0.2}\n",
			2, "algorithm.policy_loss_fn_args.clip_rnage", "clip_range", "policy_loss_fn ppo takes no argument"},
		{"bad argument value", "algorithm:\n  algorithm_type: grpo\n  advantage_fn_args:\n    epsilon: tiny\n",
			3, "algorithm.advantage_fn_args", "", "epsilon"},
		{"repeat_times not an integer", "algorithm:\n  repeat_times: eight\n", 2, "algorithm.repeat_times", "", `want a positive integer, got a string "eight"`},
		{"repeat_times zero", "algorithm:\n  repeat_times: 0\n", 2, "algorithm.repeat_times", "", "not a positive integer"},
		{"args not a mapping", "algorithm:\n  kl_loss_fn_args: [1, 2]\n", 2, "algorithm.kl_loss_fn_args", "", "want a mapping of arguments, got a list"},
		{"section not a mapping", "algorithm: grpo\n", 1, "algorithm", "", "algorithm must be a mapping"},
		{"root not a mapping", "- a\n- b\n", 1, "", "", "the job file must be a mapping"},
		{"duplicate key", "input: a\ninput: b\n", 2, "input", "", "key given twice (first on line 1)"},
		{"negative seed", "seed: -1\n", 1, "seed", "", "not a non-negative integer"},
		{"seed a string", "seed: abc\n", 1, "seed", "", "want a non-negative integer"},
		{"bad mode", "mode: trian\n", 1, "mode", "train", "unknown value"},
		{"unknown column", "columns: {rewrd: score}\n", 1, "columns.rewrd", "reward", "unknown key"},
		{"unknown quirk", "quirks: {use_algorithm_repeat_time_default: true}\n", 1, "quirks.use_algorithm_repeat_time_default", "use_algorithm_repeat_times_default", "unknown key"},
		{"quirk not a bool", "quirks: {use_algorithm_repeat_times_default: 1}\n", 1, "quirks.use_algorithm_repeat_times_default", "", "want true or false"},
		{"trainer key of the wrong type", "algorithm: {optimizer: 3}\n", 1, "algorithm.optimizer", "", "want a mapping"},
		{"sft needs train mode", "mode: both\ninput: a.parquet\nalgorithm:\n  algorithm_type: sft\n", 4, "algorithm.algorithm_type", "", "SFT does not support `both` mode"},
		{"KL loss without reference", "algorithm:\n  algorithm_type: asymre\n  kl_loss_fn: k2\n", 3, "algorithm.kl_loss_fn", "", "needs ref_log_prob"},
		{"not YAML", "algorithm: [\n", 0, "", "", "not valid YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j, err := Parse("job.yaml", []byte(tc.src))
			if err == nil {
				_, err = j.Resolve()
			}
			var je *Error
			if !errors.As(err, &je) || !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("error %v (%T), want a bad-input *job.Error", err, err)
			}
			if je.Line != tc.line || je.Key != tc.key || je.Suggestion != tc.suggestion || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got line %d key %q suggestion %q: %v\nwant line %d key %q suggestion %q msg %q",
					je.Line, je.Key, je.Suggestion, err, tc.line, tc.key, tc.suggestion, tc.msg)
			}
			if tc.suggestion != "" && !strings.Contains(err.Error(), `did you mean "`+tc.suggestion+`"?`) {
				t.Errorf("message lacks the suggestion: %v", err)
			}
		})
	}
}

func TestEmptyAndOverride(t *testing.T) {
	j, err := Parse("job.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := j.Resolve()
	if err != nil || res.Config.AlgorithmType != "ppo" {
		t.Fatalf("empty job: %v, %v", res, err)
	}
	j, err = Parse("job.yaml", []byte("algorithm:\n  algorithm_type: grpo\n"))
	if err != nil {
		t.Fatal(err)
	}
	j.SetAlgorithmType("nope")
	_, err = j.Resolve()
	var je *Error
	if !errors.As(err, &je) || je.Line != 1 || je.Suggestion != "" {
		t.Errorf("overridden type: error %v; want it located at the section, not the overridden line", err)
	}
}

func TestSuggest(t *testing.T) {
	names := []string{"input", "output", "metrics", "prom", "seed", "algorithm"}
	tests := []struct{ word, want string }{
		{"imput", "input"},
		{"outptu", "output"},
		{"metric", "metrics"},
		{"algoritm", "algorithm"},
		{"sed", "seed"},
		{"xyz", ""},
		{"completely_different", ""},
	}
	for _, tc := range tests {
		if got := suggest(tc.word, names); got != tc.want {
			t.Errorf("suggest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "abc", 3}, {"abc", "abc", 0}, {"abc", "acb", 1}, {"kitten", "sitting", 3}, {"héllo", "hello", 1}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

// TestBypassOldLogprobs: bypass_old_logprobs is read (default true), and
// m2po refuses false as upstream's validator does.
func TestBypassOldLogprobs(t *testing.T) {
	for _, tc := range []struct {
		src, wantErr string
	}{
		{"algorithm: {algorithm_type: m2po}\n", ""},
		{"algorithm: {algorithm_type: m2po, bypass_old_logprobs: true}\n", ""},
		{"algorithm: {algorithm_type: m2po, bypass_old_logprobs: false}\n", "rollout behavior policy"},
		{"algorithm: {algorithm_type: grpo, policy_loss_fn: m2po, bypass_old_logprobs: false}\n", "rollout behavior policy"},
		{"algorithm: {algorithm_type: grpo, bypass_old_logprobs: false}\n", ""},
		{"algorithm: {algorithm_type: m2po, bypass_old_logprobs: 1}\n", "true or false"},
	} {
		j, err := Parse("job.yaml", []byte(tc.src))
		if err == nil {
			_, err = j.Resolve()
		}
		if (err != nil) != (tc.wantErr != "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(tc.src), err, tc.wantErr)
		}
	}
}

// TestCoDSection: the 0.6 line's top-level cod: section (task packing, the
// explorer's) is accepted and noted as ignored; the cod advantage fn's
// arguments come from advantage_fn_args only.
func TestCoDSection(t *testing.T) {
	src := `algorithm:
  algorithm_type: multi_step_grpo
  advantage_fn: cod
  advantage_fn_args: {iterative_hint_e2e_causal: true}
  policy_loss_fn: rec
  policy_loss_fn_args: {epsilon_low: 0.2, epsilon_high: 0.2, clip_mode: one-side, weight: none, fix_opd_advantage: true}
  sample_strategy: staleness_control
  sample_strategy_args: {max_staleness: 20}
cod:
  task_pack_size: 4
  packing_strategy: cod
  cod_workflow_args: {activated_cod_methods: [iterative_hint_e2e], reuse_workflow_instance: true}
`
	j, err := Parse("job.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(j.Warnings, "\n"); !strings.Contains(notes, "cod (line 9)") {
		t.Errorf("notes lack the cod section: %s", notes)
	}
	res, err := j.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if res.Config.Fn(algorithm.AdvantageFn) != "cod" || res.Config.Args(algorithm.SampleStrategy)["max_staleness"] == nil {
		t.Errorf("resolved %v", res.Config)
	}
}
