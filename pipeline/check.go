package pipeline

import (
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/rftpipe/rftpipe/schema"
)

// Check returns the stage of a job that computes nothing (an SFT or DPO
// store, an algorithm without an advantage fn): the store must have the
// columns, every row is validated as it passes, and with nonEmpty every row
// must have a non-empty list in each of those columns (DPO's chosen and
// rejected answers).
func Check(name string, columns, nonEmpty []string) Stage {
	return &checkStage{name: name, columns: columns, nonEmpty: nonEmpty}
}

type checkStage struct {
	name              string
	columns, nonEmpty []string
}

func (c *checkStage) Name() string { return c.name }
func (c *checkStage) Needs() Needs { return Needs{Columns: append(c.columns, c.nonEmpty...)} }

func (c *checkStage) Apply(b *Batch) error {
	for _, col := range c.nonEmpty {
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
