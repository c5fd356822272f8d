package main

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHostileBufferProcess: rftpipe convert, as a process, on a buffer
// whose first payload's pickle holds a list containing itself (Python:
// l = []; l.append(l); messages = l) or memo references spelling out 200
// GB: exit 2 within the minute, one line naming the table, the row id and
// the field, no trace, no output file.
func TestHostileBufferProcess(t *testing.T) {
	// BINUNICODE s
	str := func(s string) []byte {
		return append(binary.LittleEndian.AppendUint32([]byte{'X'}, uint32(len(s))), s...)
	}
	// {"version": 1, "num_items": 1, "items": [{"messages": value}]}
	meta := func(value []byte) []byte {
		b := append([]byte{0x80, 2, '}', '('}, str("version")...)
		b = append(append(b, 'K', 1), str("num_items")...)
		b = append(append(b, 'K', 1), str("items")...)
		b = append(append(b, ']', '}', '('), str("messages")...)
		return append(append(b, value...), 'u', 'a', 'u', '.')
	}
	// ten references to ten references … (9 deep) to a 200-byte str
	bomb := append([]byte{}, bytes.Repeat([]byte{']', 0x94, '('}, 9)...)
	bomb = append(append(bomb, str(strings.Repeat("x", 200))...), 0x94)
	for d := 8; d >= 0; d-- {
		bomb = append(append(bomb, bytes.Repeat([]byte{'h', byte(d + 1)}, 9)...), 'e')
	}
	src, err := os.ReadFile("../../fixtures/trinity/experience.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		value []byte
		msg   string
	}{
		{"self-reference", []byte{']', 0x94, 'h', 0, 'a'}, "a list that contains itself"},
		{"memo expansion", bomb, "expands (memo references) to more than 16× the pickle's size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "b.db")
			if err := os.WriteFile(path, src, 0o644); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			var blob []byte
			if err := db.QueryRow("SELECT experience_bytes FROM experience_buffer WHERE id = 1").Scan(&blob); err != nil {
				t.Fatal(err)
			}
			m, n := binary.LittleEndian.Uint64(blob[5:]), binary.LittleEndian.Uint64(blob[13:])
			block := blob[21+m : 21+m+n]
			p := meta(tc.value)
			hostile := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64([]byte("TRXP\x01"), uint64(len(p))), n)
			hostile = append(append(hostile, p...), block...)
			if _, err := db.Exec("UPDATE experience_buffer SET experience_bytes = ? WHERE id = 1", hostile); err != nil {
				t.Fatal(err)
			}
			db.Close()
			out := filepath.Join(dir, "out.jsonl")
			cmd := cliCmd(nil, "convert", "sqlite:///"+path+"?table=experience_buffer", out)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
			err = cmd.Wait()
			if !timer.Stop() {
				t.Fatal("convert did not end within a minute")
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2: %s", err, stderr.String())
			}
			msg := strings.TrimSpace(stderr.String())
			for _, w := range []string{`column "messages"`, "table experience_buffer, id 1:", tc.msg} {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "goroutine") {
				t.Errorf("stderr is not one line: %s", msg)
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("output left: %v", err)
			}
		})
	}
}
