package args

import (
	"errors"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// FuzzParseKV feeds --arg lists (one k=v per line) to ParseKV and Resolve
// over testSchema: no panic; every error is bad input; a parsed value has
// its argument's kind.
func FuzzParseKV(f *testing.F) {
	for _, s := range []string{
		"clip=0.2", "c=3\nn=2\non=true\nmode=a", "clip=null", "clip=None", "n=1e3",
		"on=maybe", "mode=c", "need=NaN", "c=+Inf", "bogus=1", "clip", "=", "n==1",
		"clip=0x1p-2", "n=-9223372036854775808", "n=9223372036854775808", "mode=",
		"std_threshold=0", "epsilon=1e-6", "c=1_000",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		kvs := strings.Split(in, "\n")
		vals, err := testSchema.ParseKV(kvs)
		if err != nil {
			if !errors.Is(err, schema.ErrBadInput) {
				t.Fatalf("ParseKV(%q): error %v does not wrap ErrBadInput", kvs, err)
			}
			return
		}
		for name, v := range vals {
			p, ok := testSchema.param(name)
			if !ok {
				t.Fatalf("ParseKV(%q): unknown name %q accepted", kvs, name)
			}
			if v == nil {
				continue
			}
			var good bool
			switch p.Kind {
			case Float:
				_, good = v.(float64)
			case Int:
				_, good = v.(int64)
			case Bool:
				_, good = v.(bool)
			case String:
				_, good = v.(string)
			}
			if !good {
				t.Fatalf("ParseKV(%q): %s = %#v, want a %s", kvs, name, v, p.Kind)
			}
		}
		if _, err := testSchema.Resolve(vals); err != nil && !errors.Is(err, schema.ErrBadInput) {
			t.Fatalf("Resolve(%v): error %v does not wrap ErrBadInput", vals, err)
		}
	})
}
