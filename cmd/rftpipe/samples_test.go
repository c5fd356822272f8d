package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// trinitySamples holds the Trinity-RFT buffers written by upstream's code,
// both layouts, with the JSONL each import must give.
const trinitySamples = "../../fixtures/trinity"

// refusedSamples are the buffers whose rows no store row can hold as they
// are: convert refuses them with exit 2 naming the table's row id (the
// samples' README lets an importer refuse them). orphans.db reads whole
// with the URL's on_missing_blob=skip, the test's second read of it.
var refusedSamples = map[string]string{
	"edge/bad.db":          "id 1",
	"edge/legacy.db":       "id 1",
	"edge/multimodal.db":   "id 2",
	"v0.6/edge/orphans.db": "id 7",
}

// TestConvertEveryTrinitySample walks every sample buffer and JSONL under
// fixtures/trinity and converts each with default flags: a buffer to
// Parquet, the Parquet to JSONL and to a new buffer, that buffer to JSONL,
// each JSONL equal in value to the sample's own; a JSONL to Parquet and
// back, and through a buffer. Null rewards (experience rows without one,
// every DPO and SFT row) are kept, not refused.
func TestConvertEveryTrinitySample(t *testing.T) {
	dir := t.TempDir()
	var dbs, jsonls int
	err := filepath.WalkDir(trinitySamples, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(trinitySamples, path)
		base := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(rel))
		switch filepath.Ext(path) {
		case ".db":
			dbs++
			t.Run(rel, func(t *testing.T) {
				url := "sqlite:///" + mustAbs(t, path) + "?table=" + sampleKind(rel) + "_buffer"
				if id, ok := refusedSamples[rel]; ok {
					_, stderr, code := runCLI(t, "convert", url, base+".parquet")
					if code != 2 || !strings.Contains(stderr, id) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
						t.Errorf("exit %d, want 2 and one line naming %s:\n%s", code, id, stderr)
					}
					if _, err := os.Stat(base + ".parquet"); !os.IsNotExist(err) {
						t.Errorf("a refused convert left %s (%v)", base+".parquet", err)
					}
					if !strings.Contains(rel, "orphans") {
						return
					}
					url += "&on_missing_blob=skip"
				}
				want := strings.TrimSuffix(path, ".db") + ".jsonl"
				convertOK(t, url, base+".parquet")
				convertOK(t, base+".parquet", base+".jsonl")
				convertOK(t, base+".parquet", "sqlite:///"+base+"-again.db?table=t")
				convertOK(t, "sqlite:///"+base+"-again.db?table=t", base+"-again.jsonl")
				sameRecords(t, want, base+".jsonl", false)
				sameRecords(t, want, base+"-again.jsonl", false)
			})
		case ".jsonl":
			jsonls++
			t.Run(rel, func(t *testing.T) {
				convertOK(t, path, base+".parquet")
				convertOK(t, base+".parquet", base+".jsonl")
				sameRecords(t, path, base+".jsonl", false)
				// JSONL keeps no table type: the URL names it. An experience
				// table's task_id column is text (upstream's).
				kind := sampleKind(rel)
				convertOK(t, base+".parquet", "sqlite:///"+base+".db?table=t&schema_type="+kind)
				convertOK(t, "sqlite:///"+base+".db?table=t", base+"-buffer.jsonl")
				sameRecords(t, path, base+"-buffer.jsonl", kind == "experience")
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if dbs != 13 || jsonls != 13 {
		t.Errorf("walked %d buffers and %d JSONL files, want the samples' 13 and 13", dbs, jsonls)
	}
}

// sampleKind is the schema type of a sample, from its file name; its
// buffer's table is KIND_buffer.
func sampleKind(rel string) string {
	for _, k := range []string{"dpo", "sft"} {
		if strings.HasPrefix(filepath.Base(rel), k) {
			return k
		}
	}
	return "experience"
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// convertOK runs convert with default flags and fails the test unless it
// exits 0.
func convertOK(t *testing.T, in, out string) {
	t.Helper()
	if _, stderr, code := runCLI(t, "convert", in, out); code != 0 {
		t.Fatalf("convert %s %s: exit %d: %s", in, out, code, stderr)
	}
}

// sameRecords compares two JSONL files record by record as parsed JSON
// (ints and floats kept apart); a null field and an absent one are equal,
// as the samples leave out columns null in every row. textTask compares
// eid.task as text, as an experience table's task_id column holds it.
func sameRecords(t *testing.T, want, got string, textTask bool) {
	t.Helper()
	a, b := jsonRecords(t, want, textTask), jsonRecords(t, got, textTask)
	if len(a) != len(b) {
		t.Fatalf("%s: %d records, want %d", got, len(b), len(a))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			t.Errorf("%s: record %d differs from %s's:\n got %v\nwant %v", got, i, want, b[i], a[i])
			return
		}
	}
}

func jsonRecords(t *testing.T, path string, textTask bool) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("%s record %d: %v", path, len(recs), err)
		}
		for k, v := range m {
			if v == nil {
				delete(m, k)
			}
		}
		if eid, ok := m["eid"].(map[string]any); ok && textTask {
			eid["task"] = fmt.Sprint(eid["task"])
		}
		recs = append(recs, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestPromptTruncatedRoutedExperts: a prompt-truncated row carries
// placeholder routed_experts (Trinity after 0.6: arange % num_experts);
// inspect counts them apart from routing data, and they survive a 0.6
// buffer, Parquet and JSONL unchanged.
func TestPromptTruncatedRoutedExperts(t *testing.T) {
	dir := t.TempDir()
	recs := jsonRecords(t, filepath.Join(trinitySamples, "v0.6/experience.jsonl"), false)
	routed, truncated := recs[2], recs[39] // id 3: uint8 [24][4][2]; id 40: prompt_truncated, 13 tokens
	if truncated["truncate_status"] != "prompt_truncated" || routed["routed_experts"] == nil {
		t.Fatal("the sample's rows 3 and 40 changed")
	}
	placeholder := make([][][]int, len(truncated["tokens"].([]any))-1)
	for k := range placeholder {
		placeholder[k] = [][]int{{(8 * k) % 64, (8*k + 1) % 64}, {(8*k + 2) % 64, (8*k + 3) % 64}, {(8*k + 4) % 64, (8*k + 5) % 64}, {(8*k + 6) % 64, (8*k + 7) % 64}}
	}
	truncated["routed_experts"] = placeholder
	in := filepath.Join(dir, "in.jsonl")
	var b bytes.Buffer
	for _, r := range []map[string]any{routed, truncated} {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "sqlite:///" + filepath.Join(dir, "b.db") + "?table=t&layout=0.6"
	convertOK(t, in, url)
	convertOK(t, url, filepath.Join(dir, "b.parquet"))
	convertOK(t, filepath.Join(dir, "b.parquet"), filepath.Join(dir, "out.jsonl"))
	sameRecords(t, in, filepath.Join(dir, "out.jsonl"), true)
	for _, store := range []string{in, url, filepath.Join(dir, "b.parquet")} {
		stdout, stderr, code := runCLI(t, "inspect", store, "--format", "json")
		if code != 0 || !strings.Contains(stdout, `"routed_experts": {
    "rows": 1,
    "prompt_truncated_placeholders": 1
  }`) {
			t.Errorf("inspect %s (exit %d) does not count one row of routing data and one placeholder:\n%s%s", store, code, stdout, stderr)
		}
	}
	stdout, _, _ := runCLI(t, "inspect", in)
	if !strings.Contains(stdout, "1 rows of routing data, 1 prompt_truncated placeholders (not routing data)") {
		t.Errorf("inspect's table does not show the counts:\n%s", stdout)
	}
}
