package iceberg

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"sort"
	"sync"

	"github.com/hamba/avro/v2"
)

// The Avro schemas of Iceberg v2 manifest lists and manifests (the spec's
// manifest_file and manifest_entry, with their field ids), less the
// optional fields an experience table never sets.
const (
	manifestListSchema = `{"type": "record", "name": "manifest_file", "fields": [
  {"name": "manifest_path", "type": "string", "field-id": 500},
  {"name": "manifest_length", "type": "long", "field-id": 501},
  {"name": "partition_spec_id", "type": "int", "field-id": 502},
  {"name": "content", "type": "int", "field-id": 517},
  {"name": "sequence_number", "type": "long", "field-id": 515},
  {"name": "min_sequence_number", "type": "long", "field-id": 516},
  {"name": "added_snapshot_id", "type": "long", "field-id": 503},
  {"name": "added_files_count", "type": "int", "field-id": 504},
  {"name": "existing_files_count", "type": "int", "field-id": 505},
  {"name": "deleted_files_count", "type": "int", "field-id": 506},
  {"name": "added_rows_count", "type": "long", "field-id": 512},
  {"name": "existing_rows_count", "type": "long", "field-id": 513},
  {"name": "deleted_rows_count", "type": "long", "field-id": 514},
  {"name": "partitions", "type": ["null", {"type": "array", "element-id": 508, "items":
    {"type": "record", "name": "r508", "fields": [
      {"name": "contains_null", "type": "boolean", "field-id": 509},
      {"name": "contains_nan", "type": ["null", "boolean"], "default": null, "field-id": 518},
      {"name": "lower_bound", "type": ["null", "bytes"], "default": null, "field-id": 510},
      {"name": "upper_bound", "type": ["null", "bytes"], "default": null, "field-id": 511}]}}],
   "default": null, "field-id": 507}]}`

	manifestSchema = `{"type": "record", "name": "manifest_entry", "fields": [
  {"name": "status", "type": "int", "field-id": 0},
  {"name": "snapshot_id", "type": ["null", "long"], "default": null, "field-id": 1},
  {"name": "sequence_number", "type": ["null", "long"], "default": null, "field-id": 3},
  {"name": "file_sequence_number", "type": ["null", "long"], "default": null, "field-id": 4},
  {"name": "data_file", "field-id": 2, "type": {"type": "record", "name": "r2", "fields": [
    {"name": "content", "type": "int", "field-id": 134},
    {"name": "file_path", "type": "string", "field-id": 100},
    {"name": "file_format", "type": "string", "field-id": 101},
    {"name": "partition", "field-id": 102, "type": {"type": "record", "name": "r102", "fields": [
      {"name": "experiment", "type": ["null", "string"], "default": null, "field-id": 1000}]}},
    {"name": "record_count", "type": "long", "field-id": 103},
    {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
    {"name": "lower_bounds", "type": ["null", {"type": "array", "logicalType": "map", "items":
      {"type": "record", "name": "k126_v127", "fields": [
        {"name": "key", "type": "int", "field-id": 126},
        {"name": "value", "type": "bytes", "field-id": 127}]}}], "default": null, "field-id": 125},
    {"name": "upper_bounds", "type": ["null", {"type": "array", "logicalType": "map", "items":
      {"type": "record", "name": "k129_v130", "fields": [
        {"name": "key", "type": "int", "field-id": 129},
        {"name": "value", "type": "bytes", "field-id": 130}]}}], "default": null, "field-id": 128}]}}]}`
)

// ManifestFile is a manifest list's record of one manifest.
type ManifestFile struct {
	Path               string         `avro:"manifest_path"`
	Length             int64          `avro:"manifest_length"`
	SpecID             int32          `avro:"partition_spec_id"`
	Content            int32          `avro:"content"`
	SequenceNumber     int64          `avro:"sequence_number"`
	MinSequenceNumber  int64          `avro:"min_sequence_number"`
	AddedSnapshotID    int64          `avro:"added_snapshot_id"`
	AddedFilesCount    int32          `avro:"added_files_count"`
	ExistingFilesCount int32          `avro:"existing_files_count"`
	DeletedFilesCount  int32          `avro:"deleted_files_count"`
	AddedRowsCount     int64          `avro:"added_rows_count"`
	ExistingRowsCount  int64          `avro:"existing_rows_count"`
	DeletedRowsCount   int64          `avro:"deleted_rows_count"`
	Partitions         []FieldSummary `avro:"partitions"`
}

// FieldSummary summarizes a partition field's values over a manifest.
type FieldSummary struct {
	ContainsNull bool   `avro:"contains_null"`
	ContainsNaN  *bool  `avro:"contains_nan"`
	LowerBound   []byte `avro:"lower_bound"`
	UpperBound   []byte `avro:"upper_bound"`
}

// Manifest entry statuses.
const (
	StatusExisting = 0
	StatusAdded    = 1
	StatusDeleted  = 2
)

// ManifestEntry is a manifest's record of one data file.
type ManifestEntry struct {
	Status             int32    `avro:"status"`
	SnapshotID         *int64   `avro:"snapshot_id"`
	SequenceNumber     *int64   `avro:"sequence_number"`
	FileSequenceNumber *int64   `avro:"file_sequence_number"`
	DataFile           DataFile `avro:"data_file"`
}

// DataFile is a manifest entry's data file.
type DataFile struct {
	Content     int32     `avro:"content"`
	Path        string    `avro:"file_path"`
	Format      string    `avro:"file_format"`
	Partition   Partition `avro:"partition"`
	RecordCount int64     `avro:"record_count"`
	Size        int64     `avro:"file_size_in_bytes"`
	LowerBounds []Bound   `avro:"lower_bounds"`
	UpperBounds []Bound   `avro:"upper_bounds"`
}

// Partition is a data file's partition tuple.
type Partition struct {
	Experiment *string `avro:"experiment"`
}

// Bound is a column's bound (key: the field id; value: the spec's
// single-value serialization).
type Bound struct {
	Key   int32  `avro:"key"`
	Value []byte `avro:"value"`
}

// parsedSchemas are the Avro schemas, each parsed once.
var parsedSchemas = map[string]func() (avro.Schema, error){
	manifestListSchema: sync.OnceValues(func() (avro.Schema, error) { return avro.Parse(manifestListSchema) }),
	manifestSchema:     sync.OnceValues(func() (avro.Schema, error) { return avro.Parse(manifestSchema) }),
}

// parsed returns schema (one of the constants above) parsed.
func parsed(schema string) (avro.Schema, error) { return parsedSchemas[schema]() }

// encode returns an Avro object container file of schema holding records
// in one block, uncompressed, with the key-value metadata meta. The header
// is written here, its keys sorted, and the sync marker derives from name,
// so that the same records make the same bytes (hamba/avro's ocf encoder
// writes the header's map in Go's random order).
func encode[T any](schema, name string, meta map[string]string, records []T) ([]byte, error) {
	sc, err := parsed(schema)
	if err != nil {
		return nil, err
	}
	var data bytes.Buffer
	for i := range records {
		b, err := avro.Marshal(sc, &records[i])
		if err != nil {
			return nil, err
		}
		data.Write(b)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(schema)); err != nil {
		return nil, err
	}
	meta["avro.schema"] = compact.String() // with the field ids, which String drops
	meta["avro.codec"] = "null"
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sync := sha256.Sum256([]byte(name))
	var out bytes.Buffer
	out.WriteString("Obj\x01")
	writeLong(&out, int64(len(keys)))
	for _, k := range keys {
		writeBytes(&out, []byte(k))
		writeBytes(&out, []byte(meta[k]))
	}
	writeLong(&out, 0)
	out.Write(sync[:16])
	if len(records) > 0 {
		writeLong(&out, int64(len(records)))
		writeBytes(&out, data.Bytes())
		out.Write(sync[:16])
	}
	return out.Bytes(), nil
}

// writeLong writes an Avro long: zig-zag, then as a varint.
func writeLong(b *bytes.Buffer, v int64) {
	b.Write(binary.AppendUvarint(nil, uint64((v<<1)^(v>>63))))
}

// writeBytes writes Avro bytes or a string: the length, then the bytes.
func writeBytes(b *bytes.Buffer, v []byte) {
	writeLong(b, int64(len(v)))
	b.Write(v)
}
