package algorithm

import (
	"testing"

	"github.com/rftpipe/rftpipe/stages/addstrategy"
	"github.com/rftpipe/rftpipe/stages/args"
)

// TestArgumentRanges checks every argument of every registered component
// (and add strategy): its range is well formed, only numbers have one, and
// its defaults lie inside it — so a default never trips the range check and
// the range help prints is the one Resolve applies.
func TestArgumentRanges(t *testing.T) {
	check := func(where string, ps args.Schema) {
		for _, p := range ps {
			if err := p.Range.Valid(); err != nil {
				t.Errorf("%s: %s: %v", where, p.Name, err)
			}
			numeric := p.Kind == args.Float || p.Kind == args.Int
			if !numeric && p.Range != args.Finite {
				t.Errorf("%s: %s: a %s argument has range %s", where, p.Name, p.Kind, p.Range)
			}
			for _, v := range []any{p.Ctor, p.Default} {
				if v == nil || !numeric {
					continue
				}
				if _, err := (args.Schema{p}).Resolve(args.Values{p.Name: v}); err != nil {
					t.Errorf("%s: default %v: %v", where, v, err)
				}
			}
		}
	}
	for _, s := range Slots {
		f := family(s)
		for _, n := range f.Names() {
			ps, err := f.Params(n)
			if err != nil {
				t.Fatal(err)
			}
			check(s.String()+" "+n, ps)
		}
	}
	reg := addstrategy.Default()
	for _, n := range reg.Names() {
		spec, _ := reg.Get(n)
		check("add strategy "+n, spec.Params)
	}
}
