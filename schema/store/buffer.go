package store

import (
	"context"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema/trinity"
)

// A TrinityBuffer store is a table of Trinity-RFT's SQL experience buffer,
// named by a database URL (sqlite:///buffer.db?table=NAME,
// postgresql://user@host/db?table=NAME): package trinity reads it as a
// source and writes it in one transaction instead of a temp file.

func openBuffer(url string, cfg readConfig) (source, error) {
	return trinity.Open(url, trinity.ReadOptions{Columns: cfg.columns, BatchRows: cfg.batchRows, Mem: cfg.mem, Context: cfg.ctx, After: cfg.after})
}

func createBuffer(ctx context.Context, url string, s *arrow.Schema, g *trinity.Group) (*Writer, error) {
	t, err := trinity.Create(ctx, url, s, trinity.CreateOptions{TempFile: CreateTemp, Group: g})
	if err != nil {
		return nil, err
	}
	return &Writer{path: url, sink: t, table: t, sc: s}, nil
}
