package pipeline

import (
	"strings"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// Check returns the stage of a job that computes nothing (an SFT or DPO
// store, an algorithm without an advantage fn): the store must have every
// column of one of the layouts (the first it has fully is used), every row
// is validated as it passes, and the nonEmpty columns of that layout must
// hold a non-empty list on every row (DPO's chosen and rejected answers).
func Check(name string, layouts [][]string, nonEmpty []string) Stage {
	return &checkStage{name: name, layouts: layouts, nonEmpty: nonEmpty}
}

type checkStage struct {
	name     string
	layouts  [][]string
	nonEmpty []string
	layout   []string
}

func (c *checkStage) Name() string { return c.name }
func (c *checkStage) Needs() Needs { return Needs{Columns: c.layout} }

// Prepare implements Preparer: the layout of the store.
func (c *checkStage) Prepare(has func(string) bool) error {
	for _, l := range c.layouts {
		all := true
		for _, col := range l {
			all = all && has(col)
		}
		if all {
			c.layout = l
			return nil
		}
	}
	c.layout = c.layouts[0] // the engine names what is missing
	if len(c.layouts) > 1 {
		alts := make([]string, len(c.layouts))
		for i, l := range c.layouts {
			alts[i] = strings.Join(l, ", ")
		}
		return schema.BadInputf("%s: the store needs the columns %s", c.name, strings.Join(alts, "; or "))
	}
	return nil
}

func (c *checkStage) Apply(b *Batch) error {
	for _, col := range c.layout {
		if !contains(c.nonEmpty, col) {
			continue
		}
		l, ok := b.Column(col).(array.ListLike)
		if !ok {
			return schema.Errorf(b.File, -1, col, "has type %s, want a list", b.Column(col).DataType())
		}
		for i := 0; i < b.Len(); i++ {
			if lo, hi := l.ValueOffsets(i); l.IsNull(i) || hi == lo {
				return b.Errorf(i, col, "%s needs a non-empty %s on every row", c.name, col)
			}
		}
	}
	return nil
}
