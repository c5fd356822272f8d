package iceberg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// metadataFile is what restore reads of a metadata version.
type metadataFile struct {
	UUID        string         `json:"table-uuid"`
	Location    string         `json:"location"`
	LastUpdated int64          `json:"last-updated-ms"`
	LastColumn  int            `json:"last-column-id"`
	Schemas     []schemaJSON   `json:"schemas"`
	Current     int64          `json:"current-snapshot-id"`
	Snapshots   []snapshotJSON `json:"snapshots"`
	MetadataLog []logEntry     `json:"metadata-log"`
}

// restore returns the builder state after commit n, read from metadata
// version n and its snapshot's manifest list (the manifests it lists are
// read once a commit needs the files: readFiles): what replaying commits 1
// to n gives, without them. It fails when any of them is missing,
// unreadable or does not belong to this table: the caller then replays
// the log.
func (t *Table) restore(n int64) (*builder, error) {
	raw, err := os.ReadFile(t.MetadataPath(n))
	if err != nil {
		return nil, err
	}
	var md metadataFile
	if err := json.Unmarshal(raw, &md); err != nil {
		return nil, err
	}
	if md.UUID != t.UUID || md.Location != t.URI(t.Dir) || len(md.Schemas) == 0 {
		return nil, errors.New("another table's metadata")
	}
	b := newBuilder(t)
	b.schemas, b.lastColumnID, b.snapshots, b.currentSnap = md.Schemas, md.LastColumn, md.Snapshots, md.Current
	for _, s := range md.Schemas {
		for _, f := range s.Fields {
			b.fields[f.Name] = f
		}
	}
	// the entries of versions before n Write kept, and n's own
	b.metadataLog = append(md.MetadataLog, logEntry{TimestampMS: md.LastUpdated, MetadataFile: t.URI(t.MetadataPath(n))})
	if b.currentSnap < 0 {
		return b, nil
	}
	if len(b.snapshots) == 0 || b.snapshots[len(b.snapshots)-1].SnapshotID != b.currentSnap {
		return nil, errors.New("the current snapshot is not the last")
	}
	cur := b.snapshots[len(b.snapshots)-1]
	if b.totalRows, err = strconv.ParseInt(cur.Summary["total-records"], 10, 64); err != nil {
		return nil, err
	}
	meta := t.URI(filepath.Join(t.Dir, Dir)) + "/"
	if cur.ManifestList != meta+fmt.Sprintf("snap-%d.avro", cur.SnapshotID) {
		return nil, fmt.Errorf("manifest list %s is not the table's", cur.ManifestList)
	}
	if err := readAvro(t.path(cur.ManifestList), manifestListSchema, &b.manifests); err != nil {
		return nil, err
	}
	if len(b.manifests) == 0 {
		return nil, fmt.Errorf("manifest list %s lists no manifest", cur.ManifestList)
	}
	for _, mf := range b.manifests {
		if mf.Path != meta+fmt.Sprintf("manifest-%d.avro", mf.AddedSnapshotID) {
			return nil, fmt.Errorf("manifest %s is not the table's", mf.Path)
		}
	}
	if b.unreadFiles, err = strconv.Atoi(cur.Summary["total-data-files"]); err != nil {
		return nil, err
	}
	b.unread = b.manifests
	return b, nil
}

// readFiles reads the files of the restored version's manifests, before
// the files the commits since added (in commit order).
func (b *builder) readFiles() error {
	if b.unread == nil {
		return nil
	}
	later, laterOrder := b.files, b.order
	b.files, b.order = map[string]live{}, nil
	for i := len(b.unread) - 1; i >= 0; i-- { // oldest first: the files in commit order
		mf := b.unread[i]
		var entries []ManifestEntry
		if err := readAvro(b.t.path(mf.Path), manifestSchema, &entries); err != nil {
			return err
		}
		if st, err := os.Stat(b.t.path(mf.Path)); err != nil || st.Size() != mf.Length {
			return fmt.Errorf("manifest %s is not the one listed", mf.Path)
		}
		for _, e := range entries {
			if err := b.restoreEntry(e); err != nil {
				return fmt.Errorf("%s: %w", mf.Path, err)
			}
		}
	}
	if len(b.files) != b.unreadFiles {
		return fmt.Errorf("the manifests hold %d files, the snapshot %d", len(b.files), b.unreadFiles)
	}
	b.order = append(b.order, laterOrder...)
	maps.Copy(b.files, later)
	b.unread, b.unreadFiles = nil, 0
	return nil
}

// restoreEntry applies a manifest entry to the live files.
func (b *builder) restoreEntry(e ManifestEntry) error {
	d := e.DataFile
	rel, ok := strings.CutPrefix(d.Path, b.t.URI(b.t.Dir)+"/")
	if !ok || e.SnapshotID == nil || d.Partition.Experiment == nil {
		return fmt.Errorf("data file %s is not the table's", d.Path)
	}
	rel = filepath.ToSlash(rel)
	if e.Status == StatusDeleted {
		delete(b.files, rel)
		b.order = deleteString(b.order, rel)
		return nil
	}
	f := File{Path: rel, Experiment: *d.Partition.Experiment, Rows: d.RecordCount, Size: d.Size}
	if v, ok := b.fields[b.t.Version]; ok && len(d.LowerBounds) == 1 && len(d.UpperBounds) == 1 &&
		d.LowerBounds[0].Key == int32(v.ID) && d.UpperBounds[0].Key == int32(v.ID) &&
		len(d.LowerBounds[0].Value) == 8 && len(d.UpperBounds[0].Value) == 8 {
		lo, hi := int64(binary.LittleEndian.Uint64(d.LowerBounds[0].Value)), int64(binary.LittleEndian.Uint64(d.UpperBounds[0].Value))
		f.MinVersion, f.MaxVersion = &lo, &hi
	}
	if _, ok := b.files[rel]; !ok {
		b.order = append(b.order, rel)
	}
	b.files[rel] = live{File: f, snapshot: *e.SnapshotID}
	return nil
}

// deleteString returns s without the elements equal to v.
func deleteString(s []string, v string) []string {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// path returns the file path of a URI inside the table.
func (t *Table) path(uri string) string {
	return filepath.FromSlash(strings.TrimPrefix(uri, "file://"))
}

// readAvro decodes into out the records of an Avro object container file
// as encode writes it: schema's records in one block, uncompressed. Any
// other file is an error.
func readAvro[T any](path, schema string, out *[]T) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc, err := parsed(schema)
	if err != nil {
		return err
	}
	r := avro.NewReader(bytes.NewReader(raw), len(raw))
	var magic [4]byte
	r.Read(magic[:])
	meta := map[string]string{}
	for n := r.ReadLong(); n > 0 && r.Error == nil; n = r.ReadLong() {
		for range n {
			k := r.ReadString()
			meta[k] = string(r.ReadBytes())
		}
	}
	var sync, end [16]byte
	r.Read(sync[:])
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(schema)); err != nil {
		return err
	}
	if r.Error != nil || string(magic[:]) != "Obj\x01" || meta["avro.schema"] != compact.String() || meta["avro.codec"] != "null" {
		return fmt.Errorf("%s: not a file of the table's metadata", path)
	}
	if r.Peek(); r.Error != nil { // no block: no records
		return nil
	}
	n := r.ReadLong()
	r.ReadLong() // the block's size
	for range n {
		var v T
		r.ReadVal(sc, &v)
		*out = append(*out, v)
	}
	r.Read(end[:])
	if r.Error != nil || end != sync {
		return fmt.Errorf("%s: not a file of the table's metadata: %v", path, r.Error)
	}
	return nil
}

// UnmarshalJSON reads a field as MarshalJSON writes it: its type a
// primitive's name, a *ListType or a *StructType.
func (f *Field) UnmarshalJSON(data []byte) error {
	var raw struct {
		ID       int             `json:"id"`
		Name     string          `json:"name"`
		Required bool            `json:"required"`
		Type     json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	typ, err := decodeType(raw.Type)
	*f = Field{ID: raw.ID, Name: raw.Name, Required: raw.Required, Type: typ}
	return err
}

// decodeType reads an Iceberg type: a primitive's name, a list or a struct.
func decodeType(raw json.RawMessage) (any, error) {
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		return name, nil
	}
	var kind struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return nil, err
	}
	switch kind.Type {
	case "list":
		var l struct {
			ListType
			Element json.RawMessage `json:"element"`
		}
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, err
		}
		elem, err := decodeType(l.Element)
		lt := l.ListType
		lt.Element = elem
		return &lt, err
	case "struct":
		var s StructType
		err := json.Unmarshal(raw, &s)
		return &s, err
	}
	return nil, fmt.Errorf("unknown type %s", raw)
}
