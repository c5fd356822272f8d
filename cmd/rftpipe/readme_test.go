package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
