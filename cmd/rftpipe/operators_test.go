package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/store"
)

// writeDropStore writes a JSONL store whose rows hit every drop reason of
// `run --operator dapo_dynamic_sampling --operator reward_std_filter
// --on-invalid-reward drop`: task a all correct, b all wrong, c a
// singleton, e a reward std under 0.45, f an invalid (null) reward; d is
// kept.
func writeDropStore(t *testing.T, path string) {
	t.Helper()
	rows := []struct {
		task   string
		reward string
	}{
		{"a", "1"}, {"a", "1"}, {"b", "0"}, {"b", "0"}, {"c", "1"},
		{"d", "1"}, {"d", "0"}, {"e", "1"}, {"e", "0"}, {"e", "0"}, {"e", "0"},
		{"f", "null"}, {"f", "1"}, {"f", "0"},
	}
	var b strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&b, `{"eid":{"batch":0,"task":%q,"run":%d,"step":0,"suffix":"s%d"},"reward":%s,"prompt_length":2,"tokens":[1,2,3,4],"logprobs":[-0.5,-0.25],"action_mask":[true,true],"info":{"k":1}}`+"\n",
			r.task, i, i, r.reward)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRejectedEveryReason: --rejected keeps every dropped row with its
// reason and dropper, on Parquet and on a Trinity sqlite buffer URL, and
// the main output is byte-identical with and without it.
func TestRejectedEveryReason(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	writeDropStore(t, in)
	base := []string{"run", "--in", in, "--operator", "dapo_dynamic_sampling", "--operator", "reward_std_filter",
		"--arg", "reward_std_filter.threshold=0.45", "--advantage-fn", "grpo", "--on-invalid-reward", "drop", "--progress", "never"}
	plain := filepath.Join(dir, "plain.parquet")
	if _, stderr, code := runCLI(t, append(base, "--out", plain)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{
		"0/a dapo_all_correct dapo_dynamic_sampling", "0/a dapo_all_correct dapo_dynamic_sampling",
		"0/b dapo_all_wrong dapo_dynamic_sampling", "0/b dapo_all_wrong dapo_dynamic_sampling",
		"0/c singleton_group dapo_dynamic_sampling",
		"0/e reward_std_below_threshold reward_std_filter", "0/e reward_std_below_threshold reward_std_filter",
		"0/e reward_std_below_threshold reward_std_filter", "0/e reward_std_below_threshold reward_std_filter",
		"0/f invalid_reward invalid_reward_filter",
	}
	checkRejected(t, dir, base, plain, want)
	stdout, stderr, code := runCLI(t, "sql", "--query", "drop_reasons", "--format", "json", "--store", filepath.Join(dir, "rej.parquet"))
	if code != 0 || !strings.Contains(stdout, `"drop_reason":"reward_std_below_threshold"`) {
		t.Errorf("drop_reasons: exit %d: %s%s", code, stdout, stderr)
	}
	if _, rows := storeShape(t, plain); rows != 4 {
		t.Errorf("%d rows kept, want 4 (task d, the valid rows of f)", rows)
	}
	// The rejected store must not land on the input.
	if _, _, code := runCLI(t, append(base, "--out", filepath.Join(dir, "x.parquet"), "--rejected", in)...); code != 2 {
		t.Errorf("--rejected over the input: exit %d, want 2", code)
	}
}

// checkRejected runs base with --rejected into a Parquet store and an
// SQLite buffer: the output must equal plain (the run without it) byte for
// byte, and the rejected rows be want.
func checkRejected(t *testing.T, dir string, base []string, plain string, want []string) {
	t.Helper()
	for _, rej := range []string{filepath.Join(dir, "rej.parquet"), "sqlite:///" + filepath.Join(dir, "rej.db") + "?table=rejected"} {
		out := filepath.Join(dir, "out.parquet")
		os.Remove(out)
		if _, stderr, code := runCLI(t, append(base, "--out", out, "--rejected", rej)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", rej, code, stderr)
		}
		if !bytes.Equal(readAll(t, out), readAll(t, plain)) {
			t.Errorf("%s: the output differs with --rejected", rej)
		}
		if got := rejectedRows(t, rej); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: rejected rows\n%s\nwant\n%s", rej, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rejectedRows returns "batch/task drop_reason dropped_by" per row, sorted.
func rejectedRows(t *testing.T, path string) []string {
	t.Helper()
	r, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		col := func(name string) arrow.Array {
			idx := rec.Schema().FieldIndices(name)
			if len(idx) == 0 {
				t.Fatalf("%s: no column %s (have %v)", path, name, rec.Schema())
			}
			return rec.Column(idx[0])
		}
		task, batch := col("task"), col("batch")
		for i := 0; i < int(rec.NumRows()); i++ {
			var reason, by string
			if len(rec.Schema().FieldIndices("drop_reason")) > 0 {
				reason, by = col("drop_reason").ValueStr(i), col("dropped_by").ValueStr(i)
			} else { // a Trinity buffer: in info, beside the row's own keys
				var info struct {
					K          int    `json:"k"`
					DropReason string `json:"drop_reason"`
					DroppedBy  string `json:"dropped_by"`
				}
				if err := json.Unmarshal([]byte(col("info").ValueStr(i)), &info); err != nil || info.K != 1 {
					t.Fatalf("%s: row %d: info %s (%v)", path, i, col("info").ValueStr(i), err)
				}
				reason, by = info.DropReason, info.DroppedBy
			}
			out = append(out, fmt.Sprintf("%s/%s %s %s", batch.ValueStr(i), task.ValueStr(i), reason, by))
		}
	}
	sort.Strings(out)
	return out
}

// TestRejectedCoDJudgeFlagged: `run --advantage-fn cod` in the iterative mode
// drops the rows CoD's judge flagged (info.judge_format_error or
// info.judge_format_error_in_trajectory); --rejected keeps them with reason
// cod_judge_flagged and dropper cod, on Parquet and on a Trinity sqlite
// buffer URL, and the main output is byte-identical with and without it.
func TestRejectedCoDJudgeFlagged(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	rows := []struct {
		task, info string
		reward     float64
	}{
		{"a", `"exp_type":"solve_task","task_idx":0,"task_rewards":[1,0.5],"taskset_id":0`, 1},
		{"a", `"exp_type":"solve_task","task_idx":0,"task_rewards":[0,0.5],"taskset_id":0,"judge_format_error":true`, 0},
		{"a", `"exp_type":"solve_task","task_idx":1,"task_rewards":[0,1],"taskset_id":0`, 1},
		{"b", `"exp_type":"gen_hint","hint_idx":-1,"task_rewards":[1,0],"taskset_id":1`, 0.5},
		{"b", `"exp_type":"gen_hint","hint_idx":0,"task_rewards":[1,0],"taskset_id":1,"judge_format_error_in_trajectory":true`, 0.25},
		{"b", `"exp_type":"gen_hint","hint_idx":0,"task_rewards":[0,1],"taskset_id":1,"judge_format_error":false`, 1},
		{"c", `"exp_type":"solve_task","task_idx":0,"task_rewards":[1],"taskset_id":1,"judge_format_error":true`, 1},
	}
	var b strings.Builder
	for i, r := range rows {
		fmt.Fprintf(&b, `{"eid":{"batch":0,"task":%q,"run":%d,"step":0,"suffix":"s%d"},"reward":%v,"prompt_length":2,"tokens":[1,2,3,4],"logprobs":[-0.5,-0.25],"action_mask":[true,true],"info":{"k":1,%s}}`+"\n",
			r.task, i, i, r.reward, r.info)
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--in", in, "--advantage-fn", "cod", "--arg", "iterative_hint_e2e_causal=true",
		"--arg", "red_weight_temp=1", "--progress", "never"}
	plain := filepath.Join(dir, "plain.parquet")
	if _, stderr, code := runCLI(t, append(base, "--out", plain)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := []string{
		"0/a cod_judge_flagged cod", "0/b cod_judge_flagged cod", "0/c cod_judge_flagged cod",
	}
	checkRejected(t, dir, base, plain, want)
	if _, n := storeShape(t, plain); n != 4 {
		t.Errorf("%d rows kept, want 4 (the rows the judge did not flag)", n)
	}
}

// TestOperatorBadMetricRow: a metrics or info value that is not a number
// (an operator's metric, gigpo's step reward, CoD's returns_norm and
// task_idx) is refused naming its row in the store, not its place among
// the grouped rows (a row with a null reward before it is not grouped).
func TestOperatorBadMetricRow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		good, bad string // the JSON fields of the other rows and of row 4
		args      []string
		want      string
	}{
		{"operator metric", `"metrics":{"accuracy":1}`, `"metrics":{"accuracy":"x"}`,
			[]string{"--operator", "dapo_dynamic_sampling", "--arg", "dapo_dynamic_sampling.metric_key=accuracy", "--advantage-fn", "grpo"},
			"row 4: metrics.accuracy is not a number"},
		{"gigpo step reward", `"info":{"step_reward":0.5}`, `"info":{"step_reward":"x"}`,
			[]string{"--advantage-fn", "gigpo"}, "row 4: info.step_reward is not a number"},
		{"cod returns_norm", `"info":{"returns_norm":0.5}`, `"info":{"returns_norm":"x"}`,
			[]string{"--operator", "cod_overwrite_reward_with_returns", "--advantage-fn", "grpo"}, "row 4: info.returns_norm is not a number"},
		{"cod task_idx", `"info":{"exp_type":"solve_task","task_idx":0,"task_rewards":[1],"taskset_id":0}`,
			`"info":{"exp_type":"solve_task","task_idx":"1e400","task_rewards":[1],"taskset_id":0}`,
			[]string{"--advantage-fn", "cod", "--arg", "iterative_hint_e2e_causal=true"}, `row 4: info task_idx/hint_idx "1e400" is not an integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.jsonl")
			var b strings.Builder
			for i := range 5 {
				reward, fields := "1", tc.good
				if i == 0 {
					reward = "null"
				}
				if i == 4 {
					fields = tc.bad
				}
				fmt.Fprintf(&b, `{"eid":{"batch":0,"task":"t","run":%d,"step":0},"reward":%s,"prompt_length":2,"tokens":[1,2,3,4],"logprobs":[-0.5,-0.25],"action_mask":[true,true],%s}`+"\n", i, reward, fields)
			}
			if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"run", "--in", in}, tc.args...)
			_, stderr, code := runCLI(t, append(args, "--on-invalid-reward", "drop", "--out", filepath.Join(dir, "o.parquet"), "--progress", "never")...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d: %s", code, stderr)
			}
		})
	}
}

// TestGiGPOStepRewardLikeUpstream: gigpo reads a step reward as upstream's
// float(value) — a boolean as 1 or 0 — and a NaN step reward ("nan")
// propagates as upstream's arithmetic does: every advantage of its task is
// NaN.
func TestGiGPOStepRewardLikeUpstream(t *testing.T) {
	dir := t.TempDir()
	advantages := func(last string) string {
		t.Helper()
		in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.parquet")
		var b strings.Builder
		for i := range 4 {
			v := []string{"0.5", "0", "1", last}[i]
			fmt.Fprintf(&b, `{"eid":{"batch":0,"task":"t","run":%d,"step":0},"reward":1,"prompt_length":2,"tokens":[1,2,3],"logprobs":[-0.5],"action_mask":[true],"info":{"step_reward":%s}}`+"\n", i, v)
		}
		if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, stderr, code := runCLI(t, "run", "--in", in, "--advantage-fn", "gigpo", "--out", out, "--progress", "never"); code != 0 {
			t.Fatalf("%s: exit %d: %s", last, code, stderr)
		}
		stdout, stderr, code := runCLI(t, "sql", "--store", out, "--format", "csv", "SELECT list(CASE WHEN isnan(advantages[1]) THEN 'NaN' ELSE advantages[1]::VARCHAR END ORDER BY run) AS a FROM experiences")
		if code != 0 {
			t.Fatalf("sql: exit %d: %s", code, stderr)
		}
		return stdout
	}
	if a, b := advantages("true"), advantages("1"); a != b {
		t.Errorf("step reward true gives %s, 1 gives %s", a, b)
	}
	if got := advantages(`"nan"`); strings.Count(got, "NaN") != 4 {
		t.Errorf("a NaN step reward gives %s, want 4 NaN advantages", got)
	}
}

// TestRowsConserved: every input row is written or rejected, never both,
// never neither: rows in = rows out + rows rejected, for filters and
// operators that drop rows (GRPO's std filter, DAPO's operators, the
// invalid-reward filter, staleness control), run whole and sharded, the
// sharded run also after --replace over the parts of a 3-shard run.
func TestRowsConserved(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	var b strings.Builder
	for batch := 0; batch < 3; batch++ {
		for i, r := range []struct{ task, reward string }{
			{"a", "1"}, {"a", "1"}, {"b", "0"}, {"b", "0"}, {"c", "1"}, {"d", "1"}, {"d", "0"},
			{"e", "1"}, {"e", "0"}, {"e", "0"}, {"e", "0"}, {"f", "null"}, {"f", "1"}, {"f", "0"},
		} {
			fmt.Fprintf(&b, `{"eid":{"batch":%d,"task":%q,"run":%d,"step":0,"suffix":"s%d"},"reward":%s,"model_version":%d,"prompt_length":2,"tokens":[1,2,3,4],"logprobs":[-0.5,-0.25],"action_mask":[true,true],"info":{"k":1}}`+"\n",
				batch, r.task, i, i, r.reward, batch)
		}
	}
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "stale.yaml")
	if err := os.WriteFile(stale, []byte("algorithm:\n  algorithm_type: grpo\n  sample_strategy: staleness_control\n  sample_strategy_args: {max_staleness: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, rowsIn := storeShape(t, in)
	for _, c := range []struct {
		name string
		job  []string
	}{
		{"grpo std filter", []string{"--advantage-fn", "grpo", "--arg", "std_threshold=0"}},
		{"dapo operators", []string{"--operator", "dapo_dynamic_sampling", "--operator", "reward_std_filter", "--arg", "reward_std_filter.threshold=0.45", "--advantage-fn", "grpo"}},
		{"staleness control", []string{"--config", stale, "--step", "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := t.TempDir()
			job := append([]string{"run", "--in", in, "--on-invalid-reward", "drop", "--progress", "never"}, c.job...)
			check := func(what, out, rej string) {
				t.Helper()
				_, rowsOut := storeShape(t, out)
				_, rowsRej := storeShape(t, rej)
				if rowsRej == 0 || rowsOut+rowsRej != rowsIn {
					t.Errorf("%s: %d rows in, %d out + %d rejected", what, rowsIn, rowsOut, rowsRej)
				}
			}
			out, rej := filepath.Join(sub, "out.parquet"), filepath.Join(sub, "rej.parquet")
			if _, stderr, code := runCLI(t, append(job, "--out", out, "--rejected", rej)...); code != 0 {
				t.Fatalf("whole: exit %d: %s", code, stderr)
			}
			check("whole", out, rej)
			parts, rejParts := filepath.Join(sub, "parts"), filepath.Join(sub, "rej")
			for i := 0; i < 3; i++ {
				if _, stderr, code := runCLI(t, append(job, "--out", parts, "--rejected", rejParts, "--shards", "3", "--shard", fmt.Sprint(i))...); code != 0 {
					t.Fatalf("shard %d of 3: exit %d: %s", i, code, stderr)
				}
			}
			check("3 shards", parts, rejParts)
			if _, stderr, code := runCLI(t, append(job, "--out", parts, "--rejected", rejParts, "--shards", "1", "--shard", "0", "--replace")...); code != 0 {
				t.Fatalf("1 shard, --replace: exit %d: %s", code, stderr)
			}
			check("1 shard after --replace", parts, rejParts)
		})
	}
}
