// Package store reads and writes experience stores as streams of Arrow record
// batches: Parquet (zstd by default), Arrow IPC (file and stream) and JSONL
// (Trinity-style experience records). An input may be a file, a directory of
// Parquet files or a glob. Writers write a temp file beside the target, fsync
// it and rename it into place, so a crash never leaves a half-written store,
// and they refuse to write over any input. Memory stays bounded by the batch
// size, never by the store's size.
package store

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/trinity"
)

// Format is an on-disk store format.
type Format int

// Supported formats.
const (
	Parquet       Format = iota // .parquet, .pq
	ArrowFile                   // .arrow, .feather, .ipc (Arrow IPC file format)
	ArrowStream                 // .arrows (Arrow IPC stream format)
	JSONL                       // .jsonl, .ndjson, .json (one experience per line)
	TrinityBuffer               // sqlite:// or postgresql:// URL with ?table=NAME (Trinity-RFT's SQL buffer)
)

var formatNames = [...]string{"parquet", "arrow", "arrows", "jsonl", "trinity"}

func (f Format) String() string { return formatNames[f] }

// FormatOf infers a store's format from its file name.
func FormatOf(path string) (Format, error) {
	if trinity.IsURL(path) {
		return TrinityBuffer, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".parquet", ".pq":
		return Parquet, nil
	case ".arrow", ".feather", ".ipc":
		return ArrowFile, nil
	case ".arrows":
		return ArrowStream, nil
	case ".jsonl", ".ndjson", ".json":
		return JSONL, nil
	}
	return 0, schema.Errorf(path, -1, "", "cannot tell the store format from the file name (use .parquet, .arrow, .arrows or .jsonl, or a sqlite:// or postgresql:// URL)")
}

// DefaultBatchRows is the number of rows per record batch when reading.
const DefaultBatchRows = 16384

// closeUnless closes c unless *kept: deferred by an open, it releases the
// file on every early return and on a decoder panic, which the caller
// recovers from.
func closeUnless(kept *bool, c io.Closer) {
	if !*kept {
		c.Close()
	}
}

// fileError wraps a library error as a located input error.
func fileError(file string, err error, format string, args ...any) error {
	return &schema.InputError{File: file, Row: -1, Msg: fmt.Sprintf(format, args...), Err: err}
}
