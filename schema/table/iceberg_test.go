package table_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"

	"github.com/rftpipe/rftpipe/schema/table"
	"github.com/rftpipe/rftpipe/schema/table/catalog"
	"github.com/rftpipe/rftpipe/schema/table/feed"
	"github.com/rftpipe/rftpipe/schema/table/iceberg"
)

// metadata is an Iceberg v2 table metadata file, as the spec names its
// fields.
type metadata struct {
	FormatVersion      int               `json:"format-version"`
	TableUUID          string            `json:"table-uuid"`
	Location           string            `json:"location"`
	LastSequenceNumber int64             `json:"last-sequence-number"`
	LastUpdatedMS      int64             `json:"last-updated-ms"`
	LastColumnID       int               `json:"last-column-id"`
	Schemas            []json.RawMessage `json:"schemas"`
	CurrentSchemaID    int               `json:"current-schema-id"`
	PartitionSpecs     []struct {
		SpecID int `json:"spec-id"`
		Fields []struct {
			Name      string `json:"name"`
			Transform string `json:"transform"`
			SourceID  int    `json:"source-id"`
			FieldID   int    `json:"field-id"`
		} `json:"fields"`
	} `json:"partition-specs"`
	DefaultSpecID   int `json:"default-spec-id"`
	LastPartitionID int `json:"last-partition-id"`
	SortOrders      []struct {
		OrderID int   `json:"order-id"`
		Fields  []any `json:"fields"`
	} `json:"sort-orders"`
	DefaultSortOrderID int               `json:"default-sort-order-id"`
	Properties         map[string]string `json:"properties"`
	CurrentSnapshotID  int64             `json:"current-snapshot-id"`
	Snapshots          []struct {
		SnapshotID     int64             `json:"snapshot-id"`
		ParentID       *int64            `json:"parent-snapshot-id"`
		SequenceNumber int64             `json:"sequence-number"`
		TimestampMS    int64             `json:"timestamp-ms"`
		ManifestList   string            `json:"manifest-list"`
		Summary        map[string]string `json:"summary"`
		SchemaID       int               `json:"schema-id"`
	} `json:"snapshots"`
	SnapshotLog []struct {
		TimestampMS int64 `json:"timestamp-ms"`
		SnapshotID  int64 `json:"snapshot-id"`
	} `json:"snapshot-log"`
	MetadataLog []struct {
		TimestampMS  int64  `json:"timestamp-ms"`
		MetadataFile string `json:"metadata-file"`
	} `json:"metadata-log"`
}

// required are the fields the Iceberg v2 spec requires of table metadata
// (and those it requires when the table has snapshots, logs or refs).
var required = []string{"format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
	"last-column-id", "schemas", "current-schema-id", "partition-specs", "default-spec-id", "last-partition-id",
	"sort-orders", "default-sort-order-id", "properties", "current-snapshot-id", "snapshots", "snapshot-log",
	"metadata-log", "refs"}

// logEntry is what the test reads of a log commit.
type logEntry struct {
	Snapshot      int64               `json:"snapshot"`
	Time          time.Time           `json:"time"`
	Operation     string              `json:"operation"`
	Added         []table.DataFile    `json:"added"`
	Removed       []string            `json:"removed"`
	ExpiredBefore int64               `json:"expired_before"`
	Columns       []map[string]string `json:"columns"`
}

// TestIcebergMetadata grows a table over three ingests of one source, a
// schema evolution (a new column), an ingest into a second experiment, a
// compaction and an expiry; after each, the Iceberg metadata version of
// the new log snapshot is checked against the spec's required fields (JSON
// and Avro) and against the table's own reader: the same data files, the
// same rows.
func TestIcebergMetadata(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tbl := filepath.Join(dir, "table")
	rows := func(name, extra string, from, n int) string {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := from; i < from+n; i++ {
			fmt.Fprintf(f, `{"batch":0,"task":"t%d","run":%d,"reward":1.5,"model_version":%d%s}`+"\n", i/2, i, i/2, extra)
		}
		return p
	}
	ingest := func(src, exp string) {
		res, err := feed.Ingest(ctx, src, tbl, feed.Options{Experiment: exp})
		if err != nil || len(res.Warnings) > 0 {
			t.Fatalf("ingest %s: %v %v", src, err, res.Warnings)
		}
	}
	var seen []*metadata
	steps := []struct {
		name string
		do   func()
	}{
		{"first ingest", func() { ingest(rows("a.jsonl", "", 0, 3), "a") }},
		{"second ingest", func() { ingest(rows("a.jsonl", "", 3, 4), "a") }},
		{"new column", func() { ingest(rows("b.jsonl", `,"judge_score":0.25`, 0, 2), "b") }},
		{"third ingest", func() { ingest(rows("a.jsonl", "", 7, 1), "a") }},
		{"compaction", func() {
			res, err := feed.Compact(ctx, tbl, 1000, time.Time{}, "", catalog.Target{})
			if err != nil || res.Merged != 3 || len(res.Warnings) > 0 {
				t.Fatalf("compact: %+v %v", res, err)
			}
		}},
		{"expiry", func() {
			res, err := feed.Compact(ctx, tbl, 1000, time.Now(), "", catalog.Target{})
			if err != nil || res.Expired != 3 || len(res.Warnings) > 0 {
				t.Fatalf("expire: %+v %v", res, err)
			}
		}},
	}
	for i, s := range steps {
		s.do()
		md := checkVersion(t, tbl, int64(i+1))
		seen = append(seen, md)
		t.Logf("%s: version %d, %d snapshots", s.name, i+1, len(md.Snapshots))
	}

	first, last := seen[0], seen[len(seen)-1]
	ids := map[string]int{}
	for _, md := range seen {
		if md.TableUUID != first.TableUUID {
			t.Fatalf("table-uuid changed: %s, then %s", first.TableUUID, md.TableUUID)
		}
		for _, raw := range md.Schemas {
			for name, id := range topLevel(t, raw) {
				if old, ok := ids[name]; ok && old != id {
					t.Fatalf("column %s: field id %d, then %d", name, old, id)
				}
				ids[name] = id
			}
		}
	}
	if len(seen[1].Schemas) != 1 || len(seen[2].Schemas) != 2 || seen[2].CurrentSchemaID != 1 {
		t.Fatalf("the new column made %d schemas (current %d), want a second one", len(seen[2].Schemas), seen[2].CurrentSchemaID)
	}
	if ids["judge_score"] <= seen[1].LastColumnID {
		t.Fatalf("judge_score has id %d, not a new one (last-column-id was %d)", ids["judge_score"], seen[1].LastColumnID)
	}
	// compaction: a replace snapshot; expiry drops the snapshots before it
	if op := seen[4].Snapshots[len(seen[4].Snapshots)-1].Summary["operation"]; op != "replace" {
		t.Fatalf("compaction's snapshot operation %q, want replace", op)
	}
	if len(last.Snapshots) != 1 || last.Snapshots[0].SnapshotID != 5 || last.CurrentSnapshotID != 5 || len(last.SnapshotLog) != 1 {
		t.Fatalf("after expiry: snapshots %+v, log %+v; want snapshot 5 alone", last.Snapshots, last.SnapshotLog)
	}
	if len(last.MetadataLog) != 5 || !strings.HasSuffix(last.MetadataLog[4].MetadataFile, "/metadata/v5.metadata.json") {
		t.Fatalf("metadata-log %+v, want versions 1 to 5", last.MetadataLog)
	}

	// writing the metadata again, from the log, gives the same bytes
	before := readDir(t, filepath.Join(tbl, iceberg.Dir))
	for _, v := range []string{"v6.metadata.json", "v5.metadata.json", "snap-5.avro", "manifest-5.avro"} {
		if err := os.Remove(filepath.Join(tbl, iceberg.Dir, v)); err != nil {
			t.Fatal(err)
		}
	}
	tb, err := table.Open(tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	tb.SyncIceberg()
	if w := tb.Warnings(); len(w) > 0 {
		t.Fatal(w)
	}
	after := readDir(t, filepath.Join(tbl, iceberg.Dir))
	for name, b := range before {
		if !bytes.Equal(after[name], b) {
			t.Errorf("%s differs when written again", name)
		}
	}
}

// readDir returns the files of a directory by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[de.Name()] = b
	}
	return out
}

// checkVersion checks metadata version n of the table at tbl, the newest,
// against the spec and the log, and returns it.
func checkVersion(t *testing.T, tbl string, n int64) *metadata {
	t.Helper()
	abs, _ := filepath.Abs(tbl)
	mdir := filepath.Join(abs, iceberg.Dir)
	if hint, err := os.ReadFile(filepath.Join(mdir, "version-hint.text")); err != nil || string(hint) != strconv.FormatInt(n, 10) {
		t.Fatalf("version-hint.text %q (%v), want %d", hint, err, n)
	}
	if _, err := os.Stat(filepath.Join(mdir, fmt.Sprintf("v%d.metadata.json", n+1))); err == nil {
		t.Fatalf("metadata version %d is ahead of the log", n+1)
	}
	b, err := os.ReadFile(filepath.Join(mdir, fmt.Sprintf("v%d.metadata.json", n)))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range required {
		if _, ok := keys[k]; !ok {
			t.Fatalf("v%d lacks required field %s", n, k)
		}
	}
	var md metadata
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	var es []logEntry
	for i := int64(1); i <= n; i++ {
		var e logEntry
		lb, err := os.ReadFile(filepath.Join(tbl, "_log", fmt.Sprintf("%020d.json", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(lb, &e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	want := es[n-1]

	// the table
	cur := n
	for cur > 0 && es[cur-1].Operation == "expire" {
		cur--
	}
	if md.FormatVersion != 2 || len(md.TableUUID) != 36 || md.Location != "file://"+abs ||
		md.LastUpdatedMS != want.Time.UnixMilli() || md.CurrentSnapshotID != cur || md.LastSequenceNumber != cur {
		t.Fatalf("v%d: format %d uuid %q location %q updated %d current %d last-seq %d; want 2, a UUID, file://%s, %d, %d, %d",
			n, md.FormatVersion, md.TableUUID, md.Location, md.LastUpdatedMS, md.CurrentSnapshotID, md.LastSequenceNumber, abs, want.Time.UnixMilli(), cur, cur)
	}
	var refs map[string]struct {
		SnapshotID int64  `json:"snapshot-id"`
		Type       string `json:"type"`
	}
	if err := json.Unmarshal(keys["refs"], &refs); err != nil || refs["main"].SnapshotID != cur || refs["main"].Type != "branch" {
		t.Fatalf("v%d: refs %s, want main at %d", n, keys["refs"], cur)
	}
	// schemas: field ids unique, up to last-column-id, the current one the
	// log's columns
	maxID := 0
	for i, raw := range md.Schemas {
		var sc struct {
			Type     string `json:"type"`
			SchemaID *int   `json:"schema-id"`
		}
		json.Unmarshal(raw, &sc)
		if sc.Type != "struct" || sc.SchemaID == nil || *sc.SchemaID != i {
			t.Fatalf("v%d: schema %d: %s", n, i, raw)
		}
		ids := fieldIDs(t, raw)
		for j, id := range ids {
			if slices.Contains(ids[:j], id) {
				t.Fatalf("v%d: schema %d: field id %d twice", n, i, id)
			}
			maxID = max(maxID, id)
		}
	}
	if md.LastColumnID != maxID || md.CurrentSchemaID != len(md.Schemas)-1 {
		t.Fatalf("v%d: last-column-id %d current-schema-id %d; want %d, %d", n, md.LastColumnID, md.CurrentSchemaID, maxID, len(md.Schemas)-1)
	}
	var cols []string
	for _, e := range es {
		if e.Columns != nil {
			cols = cols[:0]
			for _, c := range e.Columns {
				cols = append(cols, c["name"])
			}
		}
	}
	current := topLevel(t, md.Schemas[md.CurrentSchemaID])
	if len(current) != len(cols) {
		t.Fatalf("v%d: current schema %v, log columns %v", n, current, cols)
	}
	for _, c := range cols {
		if _, ok := current[c]; !ok {
			t.Fatalf("v%d: current schema lacks column %s", n, c)
		}
	}
	// the name mapping covers every field id of every schema
	var mapping []iceberg.MappedField
	if err := json.Unmarshal([]byte(md.Properties["schema.name-mapping.default"]), &mapping); err != nil {
		t.Fatalf("v%d: schema.name-mapping.default: %v", n, err)
	}
	mapped := map[int]bool{}
	var walk func([]iceberg.MappedField)
	walk = func(fs []iceberg.MappedField) {
		for _, f := range fs {
			mapped[f.FieldID] = len(f.Names) > 0
			walk(f.Fields)
		}
	}
	walk(mapping)
	for _, raw := range md.Schemas {
		for _, id := range fieldIDs(t, raw) {
			if !mapped[id] {
				t.Fatalf("v%d: the name mapping lacks field id %d", n, id)
			}
		}
	}
	for name, id := range current {
		if !slices.ContainsFunc(mapping, func(f iceberg.MappedField) bool { return f.FieldID == id && f.Names[0] == name }) {
			t.Fatalf("v%d: the name mapping does not map %s to %d", n, name, id)
		}
	}
	// partitioned by experiment (identity), unsorted
	if len(md.PartitionSpecs) != 1 || md.PartitionSpecs[0].SpecID != 0 || len(md.PartitionSpecs[0].Fields) != 1 ||
		md.DefaultSpecID != 0 || md.LastPartitionID != iceberg.PartitionFieldID {
		t.Fatalf("v%d: partition specs %+v default %d last %d", n, md.PartitionSpecs, md.DefaultSpecID, md.LastPartitionID)
	}
	if pf := md.PartitionSpecs[0].Fields[0]; pf.Name != "experiment" || pf.Transform != "identity" || pf.SourceID != current["experiment"] || pf.FieldID != iceberg.PartitionFieldID {
		t.Fatalf("v%d: partition field %+v", n, pf)
	}
	if len(md.SortOrders) != 1 || md.SortOrders[0].OrderID != 0 || len(md.SortOrders[0].Fields) != 0 || md.DefaultSortOrderID != 0 {
		t.Fatalf("v%d: sort orders %+v default %d", n, md.SortOrders, md.DefaultSortOrderID)
	}
	// snapshots: the log's appends and compactions since the expiry,
	// sequence numbers increasing
	var wantSnaps []int64
	expired := int64(0)
	for _, e := range es {
		if e.Operation != "expire" {
			wantSnaps = append(wantSnaps, e.Snapshot)
		}
		expired = max(expired, e.ExpiredBefore)
	}
	wantSnaps = slices.DeleteFunc(wantSnaps, func(s int64) bool { return s < expired })
	if len(md.Snapshots) != len(wantSnaps) || len(md.SnapshotLog) != len(wantSnaps) {
		t.Fatalf("v%d: %d snapshots, %d in the snapshot log; want %v", n, len(md.Snapshots), len(md.SnapshotLog), wantSnaps)
	}
	for i, s := range md.Snapshots {
		e := es[s.SnapshotID-1]
		op := map[string]string{"append": "append", "compact": "replace"}[e.Operation]
		if s.SnapshotID != wantSnaps[i] || s.SequenceNumber != s.SnapshotID || s.TimestampMS != e.Time.UnixMilli() ||
			s.Summary["operation"] != op || md.SnapshotLog[i].SnapshotID != s.SnapshotID || md.SnapshotLog[i].TimestampMS != s.TimestampMS ||
			!strings.HasPrefix(s.ManifestList, "file://"+mdir+"/snap-") {
			t.Fatalf("v%d: snapshot %+v (log %+v), want id %d, operation %s", n, s, md.SnapshotLog[i], wantSnaps[i], op)
		}
		if i > 0 && (s.SequenceNumber <= md.Snapshots[i-1].SequenceNumber || s.ParentID == nil || *s.ParentID != md.Snapshots[i-1].SnapshotID) {
			t.Fatalf("v%d: snapshot %d: sequence number or parent not after snapshot %d", n, s.SnapshotID, md.Snapshots[i-1].SnapshotID)
		}
	}
	if len(md.MetadataLog) != int(n-1) {
		t.Fatalf("v%d: metadata-log of %d, want %d", n, len(md.MetadataLog), n-1)
	}
	for i, m := range md.MetadataLog {
		if m.MetadataFile != fmt.Sprintf("file://%s/v%d.metadata.json", mdir, i+1) || m.TimestampMS != es[i].Time.UnixMilli() {
			t.Fatalf("v%d: metadata-log %+v", n, m)
		}
	}
	// the Avro files: the current snapshot's live data files are the
	// table's, with its rows
	snap := md.Snapshots[len(md.Snapshots)-1]
	live := checkAvro(t, tbl, snap.ManifestList, snap.SnapshotID, current)
	tb, err := table.Open(tbl, false)
	if err != nil {
		t.Fatal(err)
	}
	files, err := tb.Files(table.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	logRows := map[string]int64{}
	for _, e := range es {
		for _, f := range e.Added {
			logRows[filepath.Join(abs, f.Path)] = f.Rows
		}
	}
	var paths []string
	var total int64
	for _, f := range files {
		paths = append(paths, "file://"+f)
		total += live[f]
		if live[f] != logRows[f] {
			t.Fatalf("v%d: data file %s: record_count %d, the log's rows %d", n, f, live[f], logRows[f])
		}
	}
	got := make([]string, 0, len(live))
	for p := range live {
		got = append(got, "file://"+p)
	}
	sort.Strings(paths)
	sort.Strings(got)
	if !slices.Equal(got, paths) {
		t.Fatalf("v%d: Iceberg's data files %v, the log's %v", n, got, paths)
	}
	if rows := countRows(t, tbl); total != rows || snap.Summary["total-records"] != strconv.FormatInt(rows, 10) ||
		snap.Summary["total-data-files"] != strconv.Itoa(len(files)) {
		t.Fatalf("v%d: record counts sum to %d, summary %v; the table reads %d rows in %d files", n, total, snap.Summary, rows, len(files))
	}
	return &md
}

// checkAvro checks a snapshot's manifest list and manifests and returns
// its live data files (absolute paths) and their record counts.
func checkAvro(t *testing.T, tbl, list string, snap int64, columns map[string]int) map[string]int64 {
	t.Helper()
	var mfs []iceberg.ManifestFile
	meta := readAvro(t, strings.TrimPrefix(list, "file://"), []int{500, 501, 502, 517, 515, 516, 503, 504, 505, 506, 512, 513, 514}, &mfs)
	for k, v := range map[string]string{"snapshot-id": strconv.FormatInt(snap, 10), "sequence-number": strconv.FormatInt(snap, 10), "format-version": "2"} {
		if meta[k] != v {
			t.Fatalf("manifest list %s: metadata %s = %q, want %q", list, k, meta[k], v)
		}
	}
	live := map[string]int64{}
	for _, mf := range mfs {
		st, err := os.Stat(strings.TrimPrefix(mf.Path, "file://"))
		if err != nil || st.Size() != mf.Length || mf.SpecID != 0 || mf.Content != 0 || mf.SequenceNumber > snap ||
			mf.MinSequenceNumber > mf.SequenceNumber || mf.AddedSnapshotID != mf.SequenceNumber {
			t.Fatalf("manifest %+v (%v)", mf, err)
		}
		var entries []iceberg.ManifestEntry
		meta := readAvro(t, strings.TrimPrefix(mf.Path, "file://"), []int{0, 1, 3, 4, 2, 134, 100, 101, 102, 103, 104, 1000}, &entries)
		if meta["format-version"] != "2" || meta["content"] != "data" || meta["partition-spec-id"] != "0" || meta["schema"] == "" || meta["partition-spec"] == "" {
			t.Fatalf("manifest %s: metadata %v", mf.Path, meta)
		}
		counts := map[int32]int32{}
		rows := map[int32]int64{}
		for _, e := range entries {
			d := e.DataFile
			p := strings.TrimPrefix(d.Path, "file://")
			counts[e.Status]++
			rows[e.Status] += d.RecordCount
			if d.Content != 0 || d.Format != "PARQUET" || e.SequenceNumber == nil || *e.SequenceNumber > mf.SequenceNumber ||
				d.Partition.Experiment == nil || !strings.Contains(p, "/data/experiment="+*d.Partition.Experiment+"/") {
				t.Fatalf("manifest %s: entry %+v", mf.Path, e)
			}
			if e.Status == iceberg.StatusDeleted {
				continue
			}
			st, err := os.Stat(p)
			if err != nil || st.Size() != d.Size {
				t.Fatalf("data file %s: %d bytes in the manifest (%v)", p, d.Size, err)
			}
			if _, dup := live[p]; dup {
				t.Fatalf("data file %s listed twice", p)
			}
			live[p] = d.RecordCount
			if len(d.LowerBounds) != 1 || d.LowerBounds[0].Key != int32(columns["model_version"]) || len(d.LowerBounds[0].Value) != 8 ||
				int64(binary.LittleEndian.Uint64(d.LowerBounds[0].Value)) > int64(binary.LittleEndian.Uint64(d.UpperBounds[0].Value)) {
				t.Fatalf("data file %s: bounds %+v %+v", p, d.LowerBounds, d.UpperBounds)
			}
		}
		if counts[iceberg.StatusAdded] != mf.AddedFilesCount || counts[iceberg.StatusExisting] != mf.ExistingFilesCount ||
			counts[iceberg.StatusDeleted] != mf.DeletedFilesCount || rows[iceberg.StatusAdded] != mf.AddedRowsCount ||
			rows[iceberg.StatusExisting] != mf.ExistingRowsCount || rows[iceberg.StatusDeleted] != mf.DeletedRowsCount {
			t.Fatalf("manifest %s: counts %v rows %v, the list says %+v", mf.Path, counts, rows, mf)
		}
	}
	return live
}

// readAvro decodes an Avro object container file into out (a slice
// pointer), checks that its schema carries the field ids ids, and returns
// its metadata.
func readAvro[T any](t *testing.T, path string, ids []int, out *[]T) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := ocf.NewDecoder(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for dec.HasNext() {
		var v T
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		*out = append(*out, v)
	}
	if dec.Error() != nil {
		t.Fatalf("%s: %v", path, dec.Error())
	}
	meta := map[string]string{}
	for k, v := range dec.Metadata() {
		meta[k] = string(v)
	}
	for _, id := range ids {
		if !strings.Contains(meta["avro.schema"], fmt.Sprintf(`"field-id":%d}`, id)) &&
			!strings.Contains(meta["avro.schema"], fmt.Sprintf(`"field-id":%d,`, id)) {
			t.Fatalf("%s: the Avro schema lacks field id %d", path, id)
		}
	}
	return meta
}

// topLevel returns a schema's columns' field ids by name.
func topLevel(t *testing.T, raw json.RawMessage) map[string]int {
	t.Helper()
	var sc struct {
		Fields []struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(raw, &sc); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, f := range sc.Fields {
		out[f.Name] = f.ID
	}
	return out
}

// fieldIDs returns every field id of a schema, nested ones included.
func fieldIDs(t *testing.T, raw json.RawMessage) []int {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var out []int
	var walk func(any)
	walk = func(v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range []string{"id", "element-id", "key-id", "value-id"} {
			if id, ok := m[k].(float64); ok {
				out = append(out, int(id))
			}
		}
		for _, k := range []string{"type", "element", "key", "value"} {
			walk(m[k])
		}
		if fs, ok := m["fields"].([]any); ok {
			for _, f := range fs {
				walk(f)
			}
		}
	}
	walk(v)
	return out
}

// TestIcebergHintNotAFile: a version-hint.text that is not a regular file
// (here a symbolic link) is never replaced: the commit stands, the link and
// its target are left, and the command is told in a warning.
func TestIcebergHintNotAFile(t *testing.T) {
	dir := t.TempDir()
	tbl := filepath.Join(dir, "table")
	src := filepath.Join(dir, "a.jsonl")
	write := func(from int) {
		f, err := os.OpenFile(src, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, `{"batch":0,"task":"t%d","run":0,"reward":1.5}`+"\n", from)
		f.Close()
	}
	write(0)
	if _, err := feed.Ingest(context.Background(), src, tbl, feed.Options{Experiment: "a"}); err != nil {
		t.Fatal(err)
	}
	hint := filepath.Join(tbl, "metadata", "version-hint.text")
	target := filepath.Join(dir, "elsewhere.txt")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(hint); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, hint); err != nil {
		t.Fatal(err)
	}
	write(1)
	res, err := feed.Ingest(context.Background(), src, tbl, feed.Options{Experiment: "a"})
	if err != nil || res.Rows != 1 {
		t.Fatalf("ingest: %+v %v", res, err)
	}
	if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, "\n"), "not a regular file") {
		t.Errorf("warnings %q, want one naming the link", res.Warnings)
	}
	if fi, err := os.Lstat(hint); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target holds %q", b)
	}
}
