package args

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

var testSchema = Schema{
	{Name: "clip", Kind: Float, Nullable: true, Default: 0.2, InDefaults: true, Range: "[0,1)"},
	{Name: "c", Kind: Float, Ctor: 3.0, Default: 3.0, InDefaults: true},
	{Name: "n", Kind: Int, Ctor: int64(1), Range: schema.AtLeast1},
	{Name: "on", Kind: Bool, Ctor: false},
	{Name: "mode", Kind: String, Ctor: "a", Default: "b", InDefaults: true, Choices: []string{"a", "b"}},
	{Name: "need", Kind: Float, Default: 0.0, InDefaults: true},
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		user    Values
		want    Values
		wantErr string
	}{
		{"nil is default_args", nil, Values{"clip": 0.2, "c": 3.0, "n": int64(1), "on": false, "mode": "b", "need": 0.0}, ""},
		{"user dict replaces defaults", Values{"need": 1.0}, Values{"clip": nil, "c": 3.0, "n": int64(1), "on": false, "mode": "a", "need": 1.0}, ""},
		{"numbers coerced", Values{"need": int64(2), "n": 4.0}, Values{"clip": nil, "c": 3.0, "n": int64(4), "on": false, "mode": "a", "need": 2.0}, ""},
		{"unknown", Values{"need": 1.0, "x": 1.0}, nil, "unknown argument x (valid: clip, c, n, on, mode, need)"},
		{"required", Values{}, nil, "argument need is required"},
		{"not nullable", Values{"need": 1.0, "c": nil}, nil, "argument c is required"},
		{"bad int", Values{"need": 1.0, "n": 1.5}, nil, "not a valid int"},
		{"bad choice", Values{"need": 1.0, "mode": "z"}, nil, `invalid value "z" (valid: a, b)`},
		{"bad bool", Values{"need": 1.0, "on": "yes"}, nil, "not a valid bool"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testSchema.Resolve(tc.user)
			if tc.wantErr != "" {
				if !errors.Is(err, schema.ErrBadInput) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %#v, want %#v", k, got[k], v)
				}
			}
		})
	}
}

func TestParseKVAndJSON(t *testing.T) {
	v, err := testSchema.ParseKV([]string{"clip=null", "c=2.5", "n=7", "on=true", "mode=a"})
	if err != nil {
		t.Fatal(err)
	}
	if v["clip"] != nil || v["c"] != 2.5 || v["n"] != int64(7) || v["on"] != true || v["mode"] != "a" {
		t.Errorf("ParseKV = %v", v)
	}
	for _, bad := range []string{"c", "zz=1", "n=x", "c=1e"} {
		if _, err := testSchema.ParseKV([]string{bad}); !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("ParseKV(%q): %v", bad, err)
		}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(`{"c": 2, "clip": null, "need": 0.5, "mode": "b", "on": true}`), &raw); err != nil {
		t.Fatal(err)
	}
	j, err := FromJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if j["c"] != int64(2) || j["clip"] != nil || j["need"] != 0.5 || j["mode"] != "b" || j["on"] != true {
		t.Errorf("FromJSON = %v", j)
	}
	r, err := testSchema.Resolve(j)
	if err != nil || r.Float("c") != 2 {
		t.Errorf("Resolve(FromJSON) = %v, %v", r, err)
	}
}

// TestParseKVNoneChoice: "none" is None, except where it is one of a string
// argument's choices.
func TestParseKVNoneChoice(t *testing.T) {
	s := Schema{{Name: "mode", Kind: String, Ctor: "none", Choices: []string{"none", "std"}},
		{Name: "x", Kind: Float, Nullable: true}, {Name: "w", Kind: Floats, Nullable: true}}
	v, err := s.ParseKV([]string{"mode=none", "x=none", "w=1,0.5,-2"})
	if err != nil {
		t.Fatal(err)
	}
	if v["mode"] != "none" || v["x"] != nil {
		t.Fatalf("parsed %v", v)
	}
	r, err := s.Resolve(v)
	if err != nil {
		t.Fatal(err)
	}
	if w := r.Floats("w"); len(w) != 3 || w[0] != 1 || w[1] != 0.5 || w[2] != -2 {
		t.Fatalf("w = %v", w)
	}
}
