package store_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// TestJSONLForeignShapes: JSONL as other tools write it reads as the same
// store as the plain form.
func TestJSONLForeignShapes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain.jsonl", `{"eid":{"batch":0,"task":1,"run":0},"reward":null,"tokens":[1,2]}
{"eid":{"batch":0,"task":1,"run":1},"reward":1.0,"tokens":[3]}
`)
	want, _ := readAll(t, plain)
	for _, tc := range []struct{ name, body string }{
		{"byte-order mark", "\ufeff" + `{"eid":{"batch":0,"task":1,"run":0},"reward":null,"tokens":[1,2]}
{"eid":{"batch":0,"task":1,"run":1},"reward":1.0,"tokens":[3]}
`},
		{"first record without reward", `{"eid":{"batch":0,"task":1,"run":0},"tokens":[1,2]}
{"eid":{"batch":0,"task":1,"run":1},"reward":1.0,"tokens":[3]}
`},
		{"whole-number floats", `{"eid":{"batch":0.0,"task":1,"run":0.0},"reward":null,"tokens":[1.0,2]}
{"eid":{"batch":0,"task":1e0,"run":1},"reward":1,"tokens":[3]}
`},
		{"field first seen later", `{"eid":{"batch":0,"task":1,"run":0},"tokens":[1,2]}
{"eid":{"batch":0,"task":1,"run":1},"tokens":[3],"reward":1.0}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := readAll(t, write("x.jsonl", tc.body))
			if got != want {
				t.Fatalf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
	t.Run("mixed integer and string ids", func(t *testing.T) {
		got, sc := readAll(t, write("ids.jsonl", `{"eid":{"batch":0,"task":7},"reward":1}
{"eid":{"batch":0,"task":"7"},"reward":0}
{"eid":{"batch":0,"task":"a"},"reward":0}
`))
		if typ := sc.Field(sc.FieldIndices("task")[0]).Type.String(); typ != "utf8" {
			t.Fatalf("task type %s, want utf8", typ)
		}
		if strings.Count(got, "task=7;") != 2 {
			t.Fatalf("integer and string 7 render differently:\n%s", got)
		}
	})
}

// TestJSONLRoundTripKeepsJSON: JSON-valued fields and non-finite floats
// come back out of rftpipe's JSONL writer as JSON, not strings.
func TestJSONLRoundTripKeepsJSON(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	body := `{"eid":{"batch":0,"task":1},"reward":NaN,"logprobs":[-Infinity,0.5],"messages":[{"role":"user","content":"hi"}],"response_length":12,"info":{"a":1},"custom_fields":null}
{"eid":{"batch":0,"task":2},"reward":Infinity,"logprobs":[1],"messages":"plain","response_length":3,"info":{},"custom_fields":{"k":[1,2]}}
`
	if err := os.WriteFile(in, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mid := range []string{"mid.parquet", "mid.arrow", "mid.jsonl"} {
		t.Run(mid, func(t *testing.T) {
			copyTo(t, in, filepath.Join(dir, mid))
			out := filepath.Join(dir, "out-"+mid+".jsonl")
			copyTo(t, filepath.Join(dir, mid), out)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"reward":NaN`, `"logprobs":[-Infinity,0.5]`, `"messages":[{"role":"user","content":"hi"}]`,
				`"messages":"plain"`, `"response_length":12`, `"info":{"a":1}`, `"custom_fields":{"k":[1,2]}`, `"reward":Infinity`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("output lacks %s:\n%s", want, b)
				}
			}
		})
	}
}

// TestJSONLLineLimit: a line past the limit is a clear error.
func TestJSONLLineLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 256 MiB line")
	}
	path := filepath.Join(t.TempDir(), "long.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"eid":{"batch":0,"task":1},"reward":1}` + "\n" + `{"x":"`)
	chunk := strings.Repeat("a", 1<<20)
	for i := 0; i < 257; i++ {
		f.WriteString(chunk)
	}
	f.WriteString("\"}\n")
	f.Close()
	err = drain(path)
	if err == nil || !strings.Contains(err.Error(), "line 2 is longer than the 256 MiB limit") {
		t.Fatalf("err = %v", err)
	}
}

// TestJSONLLoneSurrogates: a \u escape of a lone UTF-16 surrogate (which
// JSON decoding turns into U+FFFD) is refused naming file, row and column;
// pairs, escaped backslashes and other escapes read as they are.
func TestJSONLLoneSurrogates(t *testing.T) {
	dir := t.TempDir()
	line := func(task string) string {
		return `{"eid":{"batch":0,"task":"` + task + `","run":0},"reward":1.0,"tokens":[1]}` + "\n"
	}
	ok := line("a")
	for _, c := range []struct {
		name, body, want string
	}{
		{"high alone", ok + line(`x\uD800`), `row 1: column "task": a \u escape of a lone UTF-16 surrogate`},
		{"low alone", line(`\udc00y`), `row 0: column "task"`},
		{"high then non-surrogate", line(`\uD83D\u0041`), `row 0: column "task"`},
		{"high at the end", line(`\uDBFF`), `row 0: column "task"`},
		{"reversed pair", line(`\uDE00\uD83D`), `row 0: column "task"`},
		{"in another column", `{"eid":{"batch":0,"task":"a","run":0},"reward":1.0,"tokens":[1],"note":"\ud800"}` + "\n", `row 0: column "note"`},
		{"pair", line(`\uD83D\uDE00`), ""},
		{"escaped backslash", line(`\\uD800`), ""},
		{"plain escape", line(`\u00e9\u0041`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".jsonl")
			if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := store.Open(p)
			if err == nil {
				for err == nil {
					_, err = r.Next()
				}
				r.Close()
				if errors.Is(err, io.EOF) {
					err = nil
				}
			}
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), p+": "+c.want) || !errors.Is(err, schema.ErrBadInput)):
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
	// The pair reads as the character it encodes.
	got, _ := readAll(t, filepath.Join(dir, "pair.jsonl"))
	if !strings.Contains(got, "\U0001F600") {
		t.Errorf("pair read as %q", got)
	}
}
