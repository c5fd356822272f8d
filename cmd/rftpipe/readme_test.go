package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/pipeline/builder"
)

// TestReadmeCommandsRun runs every command of README.md that works on the
// bundled stores — the lines of its code blocks and its inline code that
// start with `rftpipe` and name a fixtures/ path — as written, from the
// repository root, with out/ moved to a temp dir (an SQLite URL's too).
func TestReadmeCommandsRun(t *testing.T) {
	t.Chdir("../..")
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	inBlock := false
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			line = strings.TrimPrefix(line, "$ ")
			if strings.HasPrefix(line, "rftpipe ") {
				cmds = append(cmds, line)
			}
		}
	}
	for _, m := range regexp.MustCompile("`(rftpipe [^`]+)`").FindAllStringSubmatch(string(src), -1) {
		cmds = append(cmds, m[1])
	}
	out := t.TempDir()
	ran := 0
	synopsis := regexp.MustCompile(`\b(NAME|STORE|FILE|COLUMN|DIR|CMD|INPUT|OUT|COLS|LIST|N|S|T|C)\b|[\[\n…]`) // NAME, [--flag], …: a usage line, not a command
	for _, cmd := range cmds {
		if !strings.Contains(cmd, "fixtures/") || synopsis.MatchString(cmd) {
			continue
		}
		if strings.HasPrefix(cmd, "rftpipe view ") {
			continue // serves until stopped: TestViewCommand runs it
		}
		cmd = strings.ReplaceAll(strings.ReplaceAll(cmd, " out/", " "+out+"/"), "sqlite:///out/", "sqlite:///"+out+"/")
		args := shellWords(t, cmd)[1:]
		if _, stderr, code := runCLI(t, args...); code != 0 {
			t.Errorf("%s: exit %d: %s", cmd, code, stderr)
		}
		ran++
	}
	if ran < 5 {
		t.Fatalf("ran %d README commands, expected more", ran)
	}
	left, _ := filepath.Glob(filepath.Join(out, "*"))
	t.Logf("%d README commands ran; %d outputs", ran, len(left))
}

// shellWords splits a command line as sh does for words, '…' and "…".
func shellWords(t *testing.T, s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unclosed quote in %q", s)
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// TestReadmeRegistries holds the README's section on adding a component to
// the code: every file and folder it names exists, each registry table it
// names is declared in the file it names, every conformance kind has its
// KIND.json, and every registered name (taken from the registries, so a new
// entry is checked without editing this test) is offered by the help text
// of the command that runs it.
func TestReadmeRegistries(t *testing.T) {
	t.Chdir("../..")
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const title = "## Adding a new advantage fn, policy loss or store kind\n"
	start := strings.Index(string(src), title)
	if start < 0 {
		t.Fatalf("README.md has no section %q", title)
	}
	section := string(src[start+len(title):])
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	paths := 0
	for _, m := range regexp.MustCompile("`([a-z][a-z/_]*/[a-z_]+(?:\\.go)?)`").FindAllStringSubmatch(section, -1) {
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("README names %s: %v", m[1], err)
		}
		paths++
	}
	tables := 0
	for _, m := range regexp.MustCompile("table of `(\\w+)` in `([\\w/]+\\.go)`").FindAllStringSubmatch(section, -1) {
		code, err := os.ReadFile(m[2])
		if err != nil || !regexp.MustCompile(`(?m)^(var|func) `+m[1]+`\b`).Match(code) {
			t.Errorf("README: the table %s is not declared in %s (%v)", m[1], m[2], err)
		}
		tables++
	}
	if paths < 6 || tables < 2 {
		t.Fatalf("README section: %d paths, %d tables found, expected the fn's and the loss's", paths, tables)
	}
	if !strings.Contains(section, "fixtures/conformance/KIND.json") {
		t.Error("README section does not say where golden vectors come")
	}
	for _, kind := range builder.Names(builder.ConformanceKinds) {
		if _, err := os.Stat(filepath.Join("fixtures/conformance", kind+".json")); err != nil {
			t.Errorf("conformance kind %s: %v", kind, err)
		}
	}
	for _, c := range []struct {
		command  string
		families []builder.Family
	}{
		{"run", []builder.Family{builder.AdvantageFns, builder.AddStrategies, builder.Operators}},
		{"loss", []builder.Family{builder.PolicyLosses, builder.KLFns, builder.EntropyFns}},
	} {
		help, stderr, code := runCLI(t, "help", c.command)
		if code != 0 {
			t.Fatalf("help %s: exit %d: %s", c.command, code, stderr)
		}
		words := map[string]bool{}
		for _, w := range regexp.MustCompile(`[a-z0-9_]+`).FindAllString(help, -1) {
			words[w] = true
		}
		for _, f := range c.families {
			for _, name := range builder.Names(f) {
				if !words[name] {
					t.Errorf("help %s does not offer %s", c.command, name)
				}
			}
		}
	}
}
