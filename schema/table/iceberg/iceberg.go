// Package iceberg writes the Apache Iceberg (format v2) metadata of an
// experience table, in the file-system ("Hadoop") catalog layout inside
// the table directory: metadata/vN.metadata.json, metadata/version-hint.text,
// a manifest list (snap-N.avro) and a manifest (manifest-N.avro) per
// snapshot, so that Spark, Trino, PyIceberg and DuckDB read the table as an
// Iceberg table.
//
// The table's commit log stays authoritative (as Delta's UniForm keeps
// Delta's): metadata version N describes exactly log snapshot N, and is a
// pure function of the log's commits 1 to N (and of the table's absolute
// location), so that writing it again gives the same bytes. An append
// becomes an Iceberg append snapshot whose id and sequence number are the
// log snapshot's number; a compaction a replace snapshot (the rewritten
// files DELETED, the new one ADDED); an expiry a version that drops the
// expired snapshots. Each file is written atomically (a temp file renamed
// or linked into place) and the metadata JSON last, so a reader sees a
// version whole or not at all; a version is written only after the log
// commit it describes, so Iceberg readers never see a snapshot the log
// does not hold. Write writes every version the directory lacks: a commit
// killed between its log commit and its metadata leaves Iceberg one
// version behind, and the next commit writes what is missing. It builds
// them from the newest version written, read back, rather than from the
// whole log, when that version reads whole: the same bytes.
//
// The data files carry no Parquet field ids: the table property
// schema.name-mapping.default maps their column names to the schema's ids.
// The metadata is written here, not by github.com/apache/iceberg-go, which
// cannot be linked into rftpipe (its arrow-go v18.8 Parquet and rftpipe's
// arrow v17 Parquet define the same assembly symbol); the Avro files are
// encoded with github.com/hamba/avro/v2.
package iceberg

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dir is the metadata directory inside the table directory.
const Dir = "metadata"

// PartitionFieldID is the field id of the experiment partition field.
const PartitionFieldID = 1000

// maxMetadataLog bounds the metadata-log, as Iceberg's
// write.metadata.previous-versions-max does by default.
const maxMetadataLog = 100

// File is a data file of a commit.
type File struct {
	Path       string // relative to the table directory, slash-separated
	Experiment string
	Rows, Size int64
	// the range of model_version in the file; nil when it holds none
	MinVersion, MaxVersion *int64
}

// Column is a column of the table: its name and Arrow type (as
// arrow.DataType's String).
type Column struct{ Name, Type string }

// Commit is a commit of the table's log.
type Commit struct {
	Time      time.Time
	Operation string // append, compact or expire
	Added     []File
	Removed   []string // paths of data files
	// Columns are the table's columns after the commit; nil when they do
	// not change.
	Columns []Column
	// ExpiredBefore: log snapshots before this one are expired.
	ExpiredBefore int64
}

// Table is the Iceberg view of an experience table.
type Table struct {
	Dir  string // the table directory, absolute
	UUID string
	// Partition is the column the table is partitioned by (identity), and
	// Version the column whose range data files record as bounds.
	Partition, Version string
	// WriteFile writes a file atomically: renamed into place with
	// replace, else linked, failing with os.ErrExist when path exists.
	WriteFile func(path string, data []byte, replace bool) error
}

// UUID returns a table UUID derived from seed (the table's first commit):
// stable, and the same for every writer.
func UUID(seed []byte) string {
	s := sha256.Sum256(seed)
	s[6] = s[6]&0x0f | 0x80 // version 8: custom
	s[8] = s[8]&0x3f | 0x80 // variant RFC 4122
	return fmt.Sprintf("%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// MetadataPath returns the path of metadata version n.
func (t *Table) MetadataPath(n int64) string {
	return filepath.Join(t.Dir, Dir, fmt.Sprintf("v%d.metadata.json", n))
}

// Written returns the newest metadata version the directory holds, 0 when
// none, looking back from version last.
func (t *Table) Written(last int64) int64 {
	for n := last; n > 0; n-- {
		if _, err := os.Stat(t.MetadataPath(n)); err == nil {
			return n
		}
	}
	return 0
}

// Write writes the metadata versions of commits (version n is commits[n-1])
// that the directory does not hold yet, and points version-hint.text at
// the last. The versions are built from the newest one written, read back
// (its manifest list, and its manifests once a commit removes files), when
// it reads whole; else from the commits, replayed from the first.
func (t *Table) Write(commits []Commit) error {
	from := t.Written(int64(len(commits))) + 1
	if from > int64(len(commits)) {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(t.Dir, Dir), 0o755); err != nil {
		return err
	}
	if from > 1 {
		if b, err := t.restore(from - 1); err == nil && t.build(b, from-1, from, commits) == nil {
			return t.writeHint(int64(len(commits)))
		}
	}
	if err := t.build(newBuilder(t), 0, from, commits); err != nil {
		return err
	}
	return t.writeHint(int64(len(commits)))
}

// build applies commits[start:] to b (the state after commit start),
// writing the versions from from on.
func (t *Table) build(b *builder, start, from int64, commits []Commit) error {
	for i := start; i < int64(len(commits)); i++ {
		c, n := commits[i], i+1
		if err := b.apply(n, c, n >= from); err != nil {
			return fmt.Errorf("metadata version %d: %w", n, err)
		}
		if n >= from {
			md, err := json.MarshalIndent(b.metadata(n, c.Time), "", "  ")
			if err != nil {
				return err
			}
			if err := t.WriteFile(t.MetadataPath(n), append(md, '\n'), false); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		}
		b.metadataLog = append(b.metadataLog, logEntry{TimestampMS: c.Time.UnixMilli(), MetadataFile: t.URI(t.MetadataPath(n))})
	}
	return nil
}

// writeHint points version-hint.text at version n unless it names a later
// one already.
func (t *Table) writeHint(n int64) error {
	p := filepath.Join(t.Dir, Dir, "version-hint.text")
	if b, err := os.ReadFile(p); err == nil {
		if cur, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && cur >= n {
			return nil
		}
	}
	return t.WriteFile(p, []byte(strconv.FormatInt(n, 10)), true)
}

// URI returns the URI of a path inside the table.
func (t *Table) URI(p string) string {
	return "file://" + filepath.ToSlash(p)
}

// live is a data file of the current snapshot and the snapshot that added
// it.
type live struct {
	File
	snapshot int64
}

// schemaJSON is an Iceberg schema.
type schemaJSON struct {
	Type     string  `json:"type"` // "struct"
	SchemaID int     `json:"schema-id"`
	Fields   []Field `json:"fields"`
}

// snapshotJSON is an Iceberg snapshot.
type snapshotJSON struct {
	SnapshotID     int64             `json:"snapshot-id"`
	ParentID       *int64            `json:"parent-snapshot-id,omitempty"`
	SequenceNumber int64             `json:"sequence-number"`
	TimestampMS    int64             `json:"timestamp-ms"`
	ManifestList   string            `json:"manifest-list"`
	Summary        map[string]string `json:"summary"`
	SchemaID       int               `json:"schema-id"`
}

// logEntry is an entry of the snapshot-log (a snapshot) or of the
// metadata-log (a metadata file).
type logEntry struct {
	TimestampMS  int64  `json:"timestamp-ms"`
	SnapshotID   int64  `json:"snapshot-id,omitempty"`
	MetadataFile string `json:"metadata-file,omitempty"`
}

// newBuilder returns the state of t before its first commit.
func newBuilder(t *Table) *builder {
	return &builder{t: t, files: map[string]live{}, fields: map[string]Field{}, currentSnap: -1}
}

// builder replays commits into the table's Iceberg state.
type builder struct {
	t            *Table
	files        map[string]live
	order        []string // paths of files, in commit order
	schemas      []schemaJSON
	fields       map[string]Field // by column name
	lastColumnID int
	manifests    []ManifestFile // the current snapshot's manifest list
	snapshots    []snapshotJSON
	currentSnap  int64
	metadataLog  []logEntry
	totalRows    int64
	// unread are the manifests of a restored version whose files are not
	// in files yet (readFiles), unreadFiles the live files they hold.
	unread      []ManifestFile
	unreadFiles int
}

// apply replays commit n; with write, the snapshot's Avro files are
// written.
func (b *builder) apply(n int64, c Commit, write bool) error {
	if c.Columns != nil {
		if err := b.evolve(c.Columns); err != nil {
			return err
		}
	}
	if len(b.schemas) == 0 {
		return errors.New("the first commit names no columns")
	}
	switch c.Operation {
	case "append", "compact":
		return b.snapshot(n, c, write)
	case "expire":
		b.expire(c.ExpiredBefore)
		return nil
	}
	return fmt.Errorf("unknown operation %q", c.Operation)
}

// evolve makes cols the current schema: a column keeps its field id; a
// new one takes the next ids. A change of the columns is a new schema.
func (b *builder) evolve(cols []Column) error {
	var fields []Field
	for _, c := range cols {
		f, ok := b.fields[c.Name]
		if !ok {
			b.lastColumnID++
			f = Field{ID: b.lastColumnID, Name: c.Name}
			typ, err := icebergType(c.Type, &b.lastColumnID)
			if err != nil {
				return fmt.Errorf("column %s: %w", c.Name, err)
			}
			f.Type = typ
			b.fields[c.Name] = f
		}
		fields = append(fields, f)
	}
	if len(b.schemas) > 0 && sameFields(b.schemas[len(b.schemas)-1].Fields, fields) {
		return nil
	}
	if len(b.schemas) == 0 {
		if _, ok := b.fields[b.t.Partition]; !ok {
			return fmt.Errorf("no column %s to partition by", b.t.Partition)
		}
	}
	b.schemas = append(b.schemas, schemaJSON{Type: "struct", SchemaID: len(b.schemas), Fields: fields})
	return nil
}

// sameFields reports whether two schemas have the same fields, by id.
func sameFields(a, b []Field) bool {
	return slices.EqualFunc(a, b, func(x, y Field) bool { return x.ID == y.ID })
}

// snapshot replays an append or a compaction as snapshot n.
func (b *builder) snapshot(n int64, c Commit, write bool) error {
	var entries []ManifestEntry
	var added, deleted, existing int32
	var addedRows, deletedRows, existingRows int64
	entry := func(status int32, f live) { // its sequence number is the snapshot's id
		entries = append(entries, ManifestEntry{Status: status, SnapshotID: ptr(f.snapshot), SequenceNumber: ptr(f.snapshot),
			FileSequenceNumber: ptr(f.snapshot), DataFile: b.dataFile(f.File)})
	}
	if len(c.Removed) > 0 || c.Operation == "compact" {
		if err := b.readFiles(); err != nil {
			return err
		}
	}
	removed := map[string]bool{}
	for _, p := range c.Removed {
		f, ok := b.files[p]
		if !ok {
			return fmt.Errorf("removes %s, which the table does not hold", p)
		}
		removed[p] = true
		// by the snapshot that deletes it, with the sequence number it had
		entries = append(entries, ManifestEntry{Status: StatusDeleted, SnapshotID: ptr(n), SequenceNumber: ptr(f.snapshot),
			FileSequenceNumber: ptr(f.snapshot), DataFile: b.dataFile(f.File)})
		deleted++
		deletedRows += f.Rows
		delete(b.files, p)
	}
	if c.Operation == "compact" { // one manifest for the whole snapshot
		for _, p := range b.order {
			if f, ok := b.files[p]; ok && !removed[p] {
				entry(StatusExisting, f)
				existing++
				existingRows += f.Rows
			}
		}
	}
	for _, f := range c.Added {
		lf := live{File: f, snapshot: n}
		b.files[f.Path] = lf
		b.order = append(b.order, f.Path)
		entry(StatusAdded, lf)
		added++
		addedRows += f.Rows
	}
	b.order = slices.DeleteFunc(b.order, func(p string) bool { return removed[p] })

	mPath := filepath.Join(b.t.Dir, Dir, fmt.Sprintf("manifest-%d.avro", n))
	spec, _ := json.Marshal(b.specFields())
	sc, _ := json.Marshal(b.schemas[len(b.schemas)-1])
	manifest, err := encode(manifestSchema, mPath, map[string]string{
		"schema": string(sc), "schema-id": strconv.Itoa(len(b.schemas) - 1),
		"partition-spec": string(spec), "partition-spec-id": "0",
		"format-version": "2", "content": "data",
	}, entries)
	if err != nil {
		return err
	}
	mf := ManifestFile{Path: b.t.URI(mPath), Length: int64(len(manifest)), SequenceNumber: n, MinSequenceNumber: n,
		AddedSnapshotID: n, AddedFilesCount: added, ExistingFilesCount: existing, DeletedFilesCount: deleted,
		AddedRowsCount: addedRows, ExistingRowsCount: existingRows, DeletedRowsCount: deletedRows,
		Partitions: []FieldSummary{summary(entries)}}
	for _, e := range entries {
		if e.Status != StatusDeleted && *e.SequenceNumber < mf.MinSequenceNumber {
			mf.MinSequenceNumber = *e.SequenceNumber
		}
	}
	if c.Operation == "compact" {
		b.manifests = []ManifestFile{mf}
	} else {
		b.manifests = append([]ManifestFile{mf}, b.manifests...)
	}
	parent := ptr(b.currentSnap)
	if b.currentSnap < 0 {
		parent = nil
	}
	lPath := filepath.Join(b.t.Dir, Dir, fmt.Sprintf("snap-%d.avro", n))
	if write {
		parentID := "null"
		if parent != nil {
			parentID = strconv.FormatInt(*parent, 10)
		}
		list, err := encode(manifestListSchema, lPath, map[string]string{
			"snapshot-id": strconv.FormatInt(n, 10), "parent-snapshot-id": parentID,
			"sequence-number": strconv.FormatInt(n, 10), "format-version": "2",
		}, b.manifests)
		if err != nil {
			return err
		}
		if err := b.t.WriteFile(mPath, manifest, true); err != nil {
			return err
		}
		if err := b.t.WriteFile(lPath, list, true); err != nil {
			return err
		}
	}
	b.totalRows += addedRows - deletedRows
	op := "append"
	if c.Operation == "compact" {
		op = "replace"
	}
	b.snapshots = append(b.snapshots, snapshotJSON{SnapshotID: n, ParentID: parent, SequenceNumber: n,
		TimestampMS: c.Time.UnixMilli(), ManifestList: b.t.URI(lPath), SchemaID: len(b.schemas) - 1,
		Summary: map[string]string{
			"operation":          op,
			"added-data-files":   strconv.Itoa(int(added)),
			"added-records":      strconv.FormatInt(addedRows, 10),
			"deleted-data-files": strconv.Itoa(int(deleted)),
			"deleted-records":    strconv.FormatInt(deletedRows, 10),
			"total-data-files":   strconv.Itoa(len(b.files) + b.unreadFiles),
			"total-records":      strconv.FormatInt(b.totalRows, 10),
		}})
	b.currentSnap = n
	return nil
}

// expire drops the snapshots older than the one current at log snapshot
// before.
func (b *builder) expire(before int64) {
	keep := int64(-1) // the snapshot current at before
	for _, s := range b.snapshots {
		if s.SnapshotID <= before {
			keep = s.SnapshotID
		}
	}
	b.snapshots = slices.DeleteFunc(b.snapshots, func(s snapshotJSON) bool { return s.SnapshotID < keep })
}

// dataFile returns the manifest record of a data file.
func (b *builder) dataFile(f File) DataFile {
	d := DataFile{Path: b.t.URI(filepath.Join(b.t.Dir, filepath.FromSlash(f.Path))), Format: "PARQUET",
		Partition: Partition{Experiment: ptr(f.Experiment)}, RecordCount: f.Rows, Size: f.Size}
	if v, ok := b.fields[b.t.Version]; ok && v.Type == "long" && f.MinVersion != nil && f.MaxVersion != nil {
		d.LowerBounds = []Bound{{Key: int32(v.ID), Value: binary.LittleEndian.AppendUint64(nil, uint64(*f.MinVersion))}}
		d.UpperBounds = []Bound{{Key: int32(v.ID), Value: binary.LittleEndian.AppendUint64(nil, uint64(*f.MaxVersion))}}
	}
	return d
}

// summary returns the partition field's summary over a manifest's entries.
func summary(entries []ManifestEntry) FieldSummary {
	var lo, hi string
	for i, e := range entries {
		v := *e.DataFile.Partition.Experiment
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return FieldSummary{LowerBound: []byte(lo), UpperBound: []byte(hi)}
}

// specField is a partition spec's field.
type specField struct {
	Name      string `json:"name"`
	Transform string `json:"transform"`
	SourceID  int    `json:"source-id"`
	FieldID   int    `json:"field-id"`
}

// specFields returns the fields of the table's partition spec: identity
// on the partition column.
func (b *builder) specFields() []specField {
	return []specField{{Name: b.t.Partition, Transform: "identity", SourceID: b.fields[b.t.Partition].ID, FieldID: PartitionFieldID}}
}

// metadata returns the table metadata of version n, written at time at.
func (b *builder) metadata(n int64, at time.Time) map[string]any {
	mapping, _ := json.Marshal(nameMapping(b.mappedFields()))
	snapLog := []logEntry{}
	for _, s := range b.snapshots {
		snapLog = append(snapLog, logEntry{TimestampMS: s.TimestampMS, SnapshotID: s.SnapshotID})
	}
	metaLog := b.metadataLog
	if len(metaLog) > maxMetadataLog {
		metaLog = metaLog[len(metaLog)-maxMetadataLog:]
	}
	m := map[string]any{
		"format-version":        2,
		"table-uuid":            b.t.UUID,
		"location":              b.t.URI(b.t.Dir),
		"last-sequence-number":  b.lastSequence(),
		"last-updated-ms":       at.UnixMilli(),
		"last-column-id":        b.lastColumnID,
		"schemas":               b.schemas,
		"current-schema-id":     len(b.schemas) - 1,
		"partition-specs":       []any{map[string]any{"spec-id": 0, "fields": b.specFields()}},
		"default-spec-id":       0,
		"last-partition-id":     PartitionFieldID,
		"sort-orders":           []any{map[string]any{"order-id": 0, "fields": []any{}}},
		"default-sort-order-id": 0,
		"properties": map[string]string{
			"schema.name-mapping.default": string(mapping),
			"write.format.default":        "parquet",
		},
		"snapshots":    b.snapshots,
		"snapshot-log": snapLog,
		"metadata-log": append([]logEntry{}, metaLog...),
	}
	if b.currentSnap > 0 {
		m["current-snapshot-id"] = b.currentSnap
		m["refs"] = map[string]any{"main": map[string]any{"snapshot-id": b.currentSnap, "type": "branch"}}
	} else {
		m["current-snapshot-id"] = -1
	}
	return m
}

// mappedFields returns every column the table has had, by id: the name
// mapping covers the columns of every schema.
func (b *builder) mappedFields() []Field {
	var out []Field
	for _, f := range b.fields {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// lastSequence returns the highest sequence number assigned: the current
// snapshot's, 0 before the first.
func (b *builder) lastSequence() int64 {
	return max(b.currentSnap, 0)
}

func ptr[T any](v T) *T { return &v }
