package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
)

// demoStore is the bundled store, from this package directory.
const demoStore = "../../fixtures/stores/demo.parquet"

func TestVersion(t *testing.T) {
	stdout, stderr, code := runCLI(t, "--version")
	if code != 0 || stdout != "rftpipe version "+appVersion()+"\n" || appVersion() == "" {
		t.Errorf("--version: exit %d, %q, %q", code, stdout, stderr)
	}
	version = "v9.9.9"
	defer func() { version = "" }()
	if v := appVersion(); v != "v9.9.9" {
		t.Errorf("-ldflags version: %q", v)
	}
}

func TestHelpCommand(t *testing.T) {
	stdout, _, code := runCLI(t, "help", "run")
	if code != 0 || !strings.Contains(stdout, "rftpipe run - ") || !strings.Contains(stdout, "--advantage-fn") {
		t.Errorf("help run: exit %d: %s", code, stdout)
	}
	stdout, _, code = runCLI(t)
	if code != 0 || !strings.Contains(stdout, "COMMANDS:") {
		t.Errorf("no command: exit %d: %s", code, stdout)
	}
}

func TestUnknownCommand(t *testing.T) {
	_, stderr, code := runCLI(t, "frobnicate", "x")
	if code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) || !strings.Contains(stderr, "inspect, convert, run") ||
		strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d: %q", code, stderr)
	}
}

// completeCLI runs a completion request; urfave/cli reads the words typed
// from os.Args, so they are set as a shell would run the binary.
func completeCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	saved := os.Args
	os.Args = append([]string{"rftpipe"}, args...)
	defer func() { os.Args = saved }()
	stdout, _, code := runCLI(t, args...)
	return stdout, code
}

func TestCompletion(t *testing.T) {
	stdout, code := completeCLI(t, "--generate-bash-completion")
	if code != 0 || !strings.Contains(stdout, "inspect\n") || !strings.Contains(stdout, "report\n") {
		t.Errorf("command words: exit %d: %q", code, stdout)
	}
	stdout, code = completeCLI(t, "report", "-", "--generate-bash-completion")
	if code != 0 || !strings.Contains(stdout, "--std-threshold") {
		t.Errorf("report flags: exit %d: %q", code, stdout)
	}
	for _, shell := range []string{"bash", "zsh"} {
		script, _, code := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(script, "complete -o bashdefault -o default -F _rftpipe_complete rftpipe") {
			t.Errorf("completion %s: exit %d: %s", shell, code, script)
		}
		if shell == "bash" {
			if _, err := exec.LookPath("bash"); err == nil {
				cmd := exec.Command("bash", "-n")
				cmd.Stdin = strings.NewReader(script)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("bash -n: %v: %s", err, out)
				}
			}
		}
	}
	if _, stderr, code := runCLI(t, "completion", "fish"); code != 2 || !strings.Contains(stderr, `unknown shell "fish"`) {
		t.Errorf("fish: exit %d: %s", code, stderr)
	}
}

func TestReportPositional(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.html"), filepath.Join(dir, "b.html")
	if _, stderr, code := runCLI(t, "report", demoStore, "--out", a); code != 0 {
		t.Fatalf("report STORE: exit %d: %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "report", "--in", demoStore, "--out", b); code != 0 {
		t.Fatalf("report --in: exit %d: %s", code, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "--out", a}, "report needs a STORE"},
		{[]string{"report", demoStore, "--in", demoStore, "--out", a}, "give the store once"},
		{[]string{"report", demoStore, demoStore, "--out", a}, "report takes one STORE"},
	} {
		if _, stderr, code := runCLI(t, c.args...); code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
	}
}

func TestInspectValidatesAndKeepsBrackets(t *testing.T) {
	_, stderr, code := runCLI(t, "inspect", "../../fixtures/bad/ragged.jsonl")
	if code != 2 || !strings.Contains(stderr, `ragged.jsonl: row 1: column "action_mask": ragged row`) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("ragged: exit %d: %q", code, stderr)
	}
	stdout, _, code := runCLI(t, "inspect", demoStore, "--format", "json")
	if code != 0 || strings.Contains(stdout, `\u003c`) || !strings.Contains(stdout, `"list<`) {
		t.Errorf("json: exit %d: %s", code, stdout)
	}
}

func TestGenWith(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "full.parquet")
	if _, stderr, code := runCLI(t, "gen", "--tasks", "4", "--runs", "2", "--resp-len", "4:8", "--with", "all", "--out", out); code != 0 {
		t.Fatalf("gen --with all: exit %d: %s", code, stderr)
	}
	cols, rows := storeShape(t, out)
	if rows != 8 || !strings.Contains(strings.Join(cols, ","), "logprob,old_logprob,ref_logprob,values,entropy,expert_mask") {
		t.Errorf("%d rows, columns %v", rows, cols)
	}
	pairs := filepath.Join(dir, "pairs.parquet")
	if _, stderr, code := runCLI(t, "gen", "--kind", "pairs", "--tasks", "4", "--resp-len", "4:8", "--with", "logprob,ref_logprob", "--out", pairs); code != 0 {
		t.Fatalf("gen --kind pairs: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := runCLI(t, "loss", "--fn", "dpo", "--in", pairs, "--format", "json")
	if code != 0 || !strings.Contains(stdout, "dpo_loss") {
		t.Errorf("loss --fn dpo on pairs: exit %d: %s %s", code, stdout, stderr)
	}
	if _, stderr, code := runCLI(t, "gen", "--with", "bogus", "--out", filepath.Join(dir, "x.parquet")); code != 2 || !strings.Contains(stderr, `unknown column "bogus"`) {
		t.Errorf("bad --with: exit %d: %s", code, stderr)
	}
}

// TestUsageErrorsExit2: every command refuses an unknown flag, missing or
// extra arguments and a flag value outside its choices with exit 2 and one
// line, writing nothing.
func TestUsageErrorsExit2(t *testing.T) {
	demo := "../../fixtures/stores/demo.parquet"
	for _, args := range [][]string{
		{"run", "--bogus"}, {"run", "x"}, {"run", "--advantage-fn", "grpo", "--in", demo, "--out", "OUT", "--progress", "bogus"},
		{"run", "--advantage-fn", "grpo", "--in", demo, "--out", "OUT", "--replace"},
		{"loss", "--bogus"}, {"loss"}, {"loss", "--fn", "ppo", "--in", demo, "--format", "xml"},
		{"sql", "--bogus"}, {"sql"}, {"sql", "a", "b"}, {"sql", "--store", demo, "SELECT 1", "--var", "x"},
		{"convert", "--bogus"}, {"convert", demo}, {"convert", demo, "OUT", "--progress", "sometimes"},
		{"inspect", "--bogus"}, {"inspect"}, {"inspect", demo, "--format", "xml"},
		{"report", "--bogus"}, {"report", "--in", demo},
		{"gen", "--bogus"}, {"gen"}, {"gen", "--out", "OUT", "--reward", "bogus"},
		{"bench", "--bogus"}, {"bench", "loss", "--fn", "ppo", "--shape", "abc"},
		{"merge-metrics"}, {"merge-metrics", "a", "b"},
		{"algorithms", "a", "b"}, {"conformance"}, {"conformance", "/nonexistent"},
		{"completion", "fish"}, {"nosuchcommand"},
	} {
		dir := t.TempDir()
		for i, a := range args {
			if a == "OUT" {
				args[i] = filepath.Join(dir, "out.parquet")
			}
		}
		_, stderr, code := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
			continue
		}
		checkOneLine(t, stderr)
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%v: left %v", args, ents)
		}
	}
}

// TestHelpTellsTheTruth: help texts offer what the commands do and nothing
// they refuse.
func TestHelpTellsTheTruth(t *testing.T) {
	for _, c := range []struct {
		topic          []string
		want, unwanted []string
	}{
		{[]string{"sql"}, []string{"buffer URL", "sqlite:///"}, nil},
		{[]string{"report"}, []string{"buffer URL", "sqlite:///"}, nil},
		{[]string{"bench"}, []string{"bench loss"}, nil},
		{[]string{"loss"}, []string{"--fn"}, []string{"--shards", "--shard ", "--replace"}},
		{[]string{"run"}, []string{"--shards", "--replace", "_plan.json"}, nil},
		{[]string{"convert"}, []string{"--codec"}, []string{"--on-invalid-reward"}},
		{[]string{"run"}, []string{"interpolations"}, nil},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"help"}, c.topic...)...)
		if code != 0 {
			t.Fatalf("help %v: exit %d: %s", c.topic, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("help %v does not mention %q", c.topic, w)
			}
		}
		for _, w := range c.unwanted {
			if strings.Contains(stdout, w) {
				t.Errorf("help %v offers %q", c.topic, w)
			}
		}
	}
}

// TestCLIUsageErrorsTyped: urfave/cli's own command-line errors — flag
// parsing, a missing required flag, an unknown help topic — are told apart
// by type (schema.ErrUsage, cli.ExitCoder), keep cli's words on stderr and
// its help on stdout, and exit 2.
func TestCLIUsageErrorsTyped(t *testing.T) {
	tests := []struct {
		args   []string
		stderr string
		stdout string // the start of stdout
		usage  bool   // errors.Is(err, schema.ErrUsage); else a cli.ExitCoder
	}{
		{[]string{"--bogus"}, "flag provided but not defined: -bogus", "Incorrect Usage: flag provided but not defined: -bogus\n\nNAME:\n   rftpipe", true},
		{[]string{"loss", "--bogus"}, "flag provided but not defined: -bogus", "Incorrect Usage: flag provided but not defined: -bogus\n\nNAME:\n   rftpipe loss", true},
		{[]string{"bench", "loss", "--bogus"}, "flag provided but not defined: -bogus", "Incorrect Usage: flag provided but not defined: -bogus\n\nNAME:\n   rftpipe bench loss", true},
		{[]string{"loss", "--kl-coef", "abc"}, `invalid value "abc" for flag -kl-coef: parse error`, "Incorrect Usage: invalid value", true},
		{[]string{"loss", "--in"}, "flag needs an argument: -in", "Incorrect Usage: flag needs an argument: -in", true},
		{[]string{"gen"}, `Required flag "out" not set`, "NAME:\n   rftpipe gen", true},
		{[]string{"report"}, `Required flag "out" not set`, "NAME:\n   rftpipe report", true},
		{[]string{"bench", "loss"}, `Required flag "fn" not set`, "NAME:\n   rftpipe bench loss", true},
		{[]string{"help", "nosuch"}, "No help topic for 'nosuch'", "", false},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errb
		err := app.Run(interspersed(app, append([]string{"rftpipe"}, tc.args...)))
		var ec cli.ExitCoder
		if tc.usage && !errors.Is(err, schema.ErrUsage) || !tc.usage && !errors.As(err, &ec) {
			t.Errorf("%v: error %#v, want a usage error: %v", tc.args, err, tc.usage)
		}
		if code := report(&errb, context.Background(), err); code != exitBadInput || errb.String() != "rftpipe: "+tc.stderr+"\n" {
			t.Errorf("%v: exit %d, stderr %q; want 2, %q", tc.args, code, errb.String(), tc.stderr)
		}
		if !strings.HasPrefix(out.String(), tc.stdout) {
			t.Errorf("%v: stdout %q, want it to start %q", tc.args, out.String(), tc.stdout)
		}
	}
}

// TestNoRequiredFlagLeftToCLI: no flag is left Required for cli to check,
// whose error no type tells apart (usageErrors takes them over).
func TestNoRequiredFlagLeftToCLI(t *testing.T) {
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
					t.Errorf("%s %s: flag %s is Required for cli", path, c.Name, f.Names()[0])
				}
			}
			walk(path+" "+c.Name, c.Subcommands)
		}
	}
	walk("rftpipe", newApp().Commands)
}
