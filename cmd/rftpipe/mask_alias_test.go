package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResponseMaskAsActionMask: a store whose mask is verl's response_mask
// reads as one with action_mask on every command — the same summary, the
// same advantages — and a response_mask that cannot be read (ragged, of
// text, not 0/1) is exit 2 naming the file, the row where there is one, and
// the column response_mask.
func TestResponseMaskAsActionMask(t *testing.T) {
	dir := t.TempDir()
	const full = "../../fixtures/stores/full.parquet"
	store := func(name, mask string) string {
		out := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".parquet")
		q := "SELECT * EXCLUDE (action_mask), " + mask + " AS response_mask FROM experiences"
		if _, stderr, code := runCLI(t, "sql", q, "--store", full, "--out", out); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		return out
	}
	cmds := map[string]func(in, out string) []string{
		"inspect": func(in, out string) []string { return []string{"inspect", in, "--format", "json"} },
		"run": func(in, out string) []string {
			return []string{"run", "--advantage-fn", "grpo", "--in", in, "--out", out + ".parquet", "--progress", "never"}
		},
		"loss":    func(in, out string) []string { return []string{"loss", "--fn", "ppo", "--in", in} },
		"convert": func(in, out string) []string { return []string{"convert", in, out + ".jsonl", "--progress", "never"} },
	}
	for _, c := range []struct {
		name, mask, want string
	}{
		{"ragged", "CASE WHEN file_row_number = 4 THEN action_mask[2:] ELSE action_mask END", `row 4: column "response_mask": ragged row: 21 values but logprobs has 22`},
		{"text", "list_transform(action_mask, x -> CASE WHEN x THEN 'y' ELSE 'n' END)", `column "response_mask": has type list<list: utf8, nullable>, want list<item: bool, nullable>`},
		{"not 0 or 1", "CASE WHEN file_row_number = 6 THEN list_transform(action_mask, x -> 2) ELSE list_transform(action_mask, x -> x::INT) END", `row 6: column "response_mask"`},
	} {
		in := store(c.name, strings.ReplaceAll(c.mask, "file_row_number", "row_number() OVER () - 1"))
		for name, args := range cmds {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				_, stderr, code := runCLI(t, args(in, filepath.Join(dir, "out"))...)
				if code != 2 {
					t.Fatalf("exit %d, want 2: %s", code, stderr)
				}
				checkOneLine(t, stderr, in+": ", c.want)
			})
		}
	}

	// A readable response_mask: the same summary and advantages as action_mask.
	renamed := store("renamed", "action_mask")
	var summaries []map[string]any
	for i, in := range []string{full, renamed} {
		out := filepath.Join(dir, fmt.Sprint("out", i))
		stdout, stderr, code := runCLI(t, cmds["inspect"](in, out)...)
		var s map[string]any
		if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil {
			t.Fatalf("inspect %s: exit %d: %s", in, code, stderr)
		}
		summaries = append(summaries, s)
		if _, stderr, code := runCLI(t, cmds["run"](in, out)...); code != 0 {
			t.Fatalf("run %s: exit %d: %s", in, code, stderr)
		}
	}
	for _, k := range []string{"response_length", "rows", "tasks"} {
		a, _ := json.Marshal(summaries[0][k])
		b, _ := json.Marshal(summaries[1][k])
		if string(a) != string(b) || string(a) == "null" {
			t.Errorf("inspect %s: %s with action_mask, %s with response_mask", k, a, b)
		}
	}
	want, _ := readLists(t, filepath.Join(dir, "out0.parquet"), "advantages")
	got, _ := readLists(t, filepath.Join(dir, "out1.parquet"), "advantages")
	if !slices.Equal(got["advantages"], want["advantages"]) || len(want["advantages"]) == 0 {
		t.Error("advantages differ")
	}
}
