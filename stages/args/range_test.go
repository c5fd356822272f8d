package args

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rftpipe/rftpipe/schema"
)

// TestResolveRange: values outside a declared range are refused by Resolve
// (whether they come from --arg or a config), naming the argument and the
// range; values inside pass.
func TestResolveRange(t *testing.T) {
	for _, kvs := range [][]string{{"clip=-0.1"}, {"clip=1"}, {"clip=inf"}, {"n=0"}, {"n=-3"}, {"c=inf"}, {"c=-Inf"}} {
		v, err := testSchema.ParseKV(kvs)
		if err == nil {
			_, err = testSchema.Resolve(v)
		}
		if !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("%v: got %v, want bad input", kvs, err)
			continue
		}
		name, _, _ := strings.Cut(kvs[0], "=")
		if !strings.Contains(err.Error(), "argument "+name) || !strings.Contains(err.Error(), "valid range") {
			t.Errorf("%v: %v does not name the argument and its range", kvs, err)
		}
	}
	for _, user := range []Values{{"clip": math.NaN()}, {"n": 0.0}, {"c": math.Inf(1)}} {
		if _, err := testSchema.Resolve(user); !errors.Is(err, schema.ErrBadInput) {
			t.Errorf("%v: got %v, want bad input", user, err)
		}
	}
	if _, err := testSchema.Resolve(Values{"clip": 0.0, "n": int64(9), "c": -5.0, "need": 1.0}); err != nil {
		t.Error(err)
	}
}
