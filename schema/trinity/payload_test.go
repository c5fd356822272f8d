package trinity

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

const fixtures = "../../fixtures/trinity"

type fixtureRow struct {
	id   int64
	blob []byte
	cols *tableCols
	json [2]sql.NullString // the table's JSON columns (dpo: chosen, rejected; sft: message_list)
}

// fixtureRows reads every row of a fixture buffer.
func fixtureRows(t *testing.T, file, table string, kind Kind) []fixtureRow {
	t.Helper()
	db, err := sql.Open("sqlite", fixtures+"/"+file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := map[Kind]string{
		KindExperience: "SELECT id, experience_bytes, task_id, run_id, msg_id, model_version, reward FROM ",
		KindDPO:        "SELECT id, experience_bytes, chosen_message_list, rejected_message_list FROM ",
		KindSFT:        "SELECT id, experience_bytes, message_list, NULL FROM ",
	}[kind]
	from := table
	if strings.HasPrefix(file, "v0.6/") { // the payload is in <table>_blob
		from = table + " JOIN " + table + "_blob USING (id)"
	}
	rows, err := db.Query(q + from + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []fixtureRow
	for rows.Next() {
		var r fixtureRow
		if kind == KindExperience {
			var task, msg sql.NullString
			var run, mv sql.NullInt64
			var rw sql.NullFloat64
			if err := rows.Scan(&r.id, &r.blob, &task, &run, &msg, &mv, &rw); err != nil {
				t.Fatal(err)
			}
			r.cols = &tableCols{taskID: ptr(task.Valid, task.String), msgID: ptr(msg.Valid, msg.String),
				runID: ptr(run.Valid, run.Int64), modelVersion: ptr(mv.Valid, mv.Int64), reward: ptr(rw.Valid, rw.Float64)}
		} else if err := rows.Scan(&r.id, &r.blob, &r.json[0], &r.json[1]); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// tensorBlock returns the safetensors block of a payload.
func tensorBlock(t *testing.T, blob []byte) []byte {
	m := binary.LittleEndian.Uint64(blob[5:])
	n := binary.LittleEndian.Uint64(blob[13:])
	return blob[headerSize+m : headerSize+m+n]
}

// TestPayloadMatchesUpstream: rftpipe's payload of a fixture row, decoded
// with the same decoder, holds the same item as upstream's (the eid's task,
// run and suffix and the reward as the columns have them, which is what
// the writer puts in the payload), and the tensor block is byte for byte
// upstream's where the dtypes are rftpipe's (int32 ids, float32, bool mask).
func TestPayloadMatchesUpstream(t *testing.T) {
	identical, routedIdentical := 0, 0
	for _, f := range []struct {
		file, table string
		kind        Kind
	}{
		{"experience.db", "experience_buffer", KindExperience},
		{"multistep.db", "experience_buffer", KindExperience},
		{"overrides.db", "experience_buffer", KindExperience},
		{"dpo.db", "dpo_buffer", KindDPO},
		{"sft.db", "sft_buffer", KindSFT},
		{"v0.6/experience.db", "experience_buffer", KindExperience},
		{"v0.6/multistep.db", "experience_buffer", KindExperience},
		{"v0.6/dpo.db", "dpo_buffer", KindDPO},
		{"v0.6/sft.db", "sft_buffer", KindSFT},
	} {
		for _, fr := range fixtureRows(t, f.file, f.table, f.kind) {
			up, fe := decodePayload(fr.blob)
			if fe != nil {
				t.Fatalf("%s id %d: %v", f.file, fr.id, fe)
			}
			var rec record
			if fe := rec.fromPayload(up, fr.cols); fe != nil {
				t.Fatalf("%s id %d: %v", f.file, fr.id, fe)
			}
			row, fe := rec.toRow(f.kind, nil)
			if fe != nil {
				t.Fatalf("%s id %d: %v", f.file, fr.id, fe)
			}
			ours, fe := decodePayload(row.blob)
			if fe != nil {
				t.Fatalf("%s id %d: our payload: %v", f.file, fr.id, fe)
			}
			if f.kind == KindExperience {
				// The writer puts the columns' values in the payload.
				eid, _ := up.item.Get("eid")
				e := eid.(*Dict)
				e.Set("task", *fr.cols.taskID)
				e.Set("run", *fr.cols.runID)
				e.Set("suffix", *fr.cols.msgID)
				up.item.Set("reward", nil)
				if fr.cols.reward != nil {
					up.item.Set("reward", *fr.cols.reward)
				}
				info, _ := up.item.Get("info")
				info.(*Dict).Set("model_version", *fr.cols.modelVersion)
			}
			if v, _ := up.item.Get("reward"); v != nil {
				if n, ok := v.(int64); ok { // a Python int reward is a float in the store
					up.item.Set("reward", float64(n))
				}
			}
			if !reflect.DeepEqual(ours.item, up.item) {
				t.Errorf("%s id %d: item\n got %s\nwant %s", f.file, fr.id, dump(t, ours.item), dump(t, up.item))
			}
			sameDtypes := true
			for name, ts := range up.tensors {
				if name == "routed_experts" { // U8 when every id < 256, else I16
					sameDtypes = sameDtypes && ts.Dtype == ours.tensors[name].Dtype
					continue
				}
				if want := map[string]string{"tokens": "I32", "chosen": "I32", "rejected": "I32", "action_mask": "BOOL"}[name]; ts.Dtype != want && (want != "" || ts.Dtype != "F32") {
					sameDtypes = false
				}
			}
			got, want := tensorBlock(t, row.blob), tensorBlock(t, fr.blob)
			if sameDtypes && len(up.tensors) == len(ours.tensors) {
				if !bytes.Equal(got, want) {
					t.Errorf("%s id %d: tensor block differs from upstream's\n got %q\nwant %q", f.file, fr.id, got, want)
				}
				identical++
				if _, ok := up.tensors["routed_experts"]; ok {
					routedIdentical++
				}
			}
			for name, ts := range up.tensors {
				if len(ours.tensors[name].Shape) == 0 || ours.tensors[name].Shape[0] != ts.Shape[0] {
					t.Errorf("%s id %d: tensor %s shape %v, want %v", f.file, fr.id, name, ours.tensors[name].Shape, ts.Shape)
				}
			}
			// The dpo and sft tables' JSON columns: json.dumps text.
			switch f.kind {
			case KindDPO:
				if *row.messages[1] != fr.json[0].String || *row.messages[2] != fr.json[1].String {
					t.Errorf("%s id %d: message lists\n got %s | %s\nwant %s | %s", f.file, fr.id, *row.messages[1], *row.messages[2], fr.json[0].String, fr.json[1].String)
				}
			case KindSFT:
				if *row.messages[0] != fr.json[0].String {
					t.Errorf("%s id %d: message_list\n got %s\nwant %s", f.file, fr.id, *row.messages[0], fr.json[0].String)
				}
			}
		}
	}
	if routedIdentical < 20 {
		t.Errorf("only %d rows with routed_experts compared byte for byte", routedIdentical)
	}
	if identical < 100 {
		t.Errorf("only %d rows compared byte for byte", identical)
	}
}

func dump(t *testing.T, v any) string {
	b, err := appendJSON(nil, v, false)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPickleRoundTrip: the writer's protocol-2 pickle decodes to the values
// it was given.
func TestPickleRoundTrip(t *testing.T) {
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	for _, v := range []any{
		nil, true, false, int64(0), int64(255), int64(256), int64(65535), int64(65536), int64(-1),
		int64(math.MaxInt32), int64(math.MinInt32), int64(math.MaxInt32) + 1, int64(1) << 41,
		int64(math.MinInt64), int64(math.MaxInt64), huge, 1.5, math.Inf(-1), math.Copysign(0, -1),
		"", "Grüße √2 数学 🙂", string(make([]byte, 300)),
		&List{}, &List{Items: []any{int64(1), "a", nil}}, Tuple{}, Tuple{int64(1), "x"},
		&Dict{}, &Dict{Keys: []any{"b", "a", int64(3)}, Vals: []any{int64(1), &Dict{Keys: []any{"x"}, Vals: []any{1.0}}, "three"}},
	} {
		var p pickler
		if err := p.dump(v); err != nil {
			t.Fatal(err)
		}
		got, err := unpickle(p.b)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		if b, ok := v.(*big.Int); ok {
			if g, ok := got.(*big.Int); !ok || g.Cmp(b) != 0 {
				t.Errorf("%v: got %v", v, got)
			}
			continue
		}
		if f, ok := v.(float64); ok && math.Signbit(f) != math.Signbit(got.(float64)) {
			t.Errorf("%v: sign lost", v)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("got %#v, want %#v", got, v)
		}
	}
}

// TestUnpickleProtocol5: Python's own protocol-5 encoding of the opcodes
// the spec lists (FRAME, MEMOIZE, BINGET, SHORT_BINUNICODE, LONG1, TUPLE*,
// APPENDS, SETITEM): pickle.dumps({"a": [1, 2, 300], "b": ("x", -70000,
// 2**70, 0.5), "c": True, "a2": <the same list>}, protocol=5).
func TestUnpickleProtocol5(t *testing.T) {
	b := []byte("\x80\x05\x95D\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01K\x02M,\x01e\x8c\x01b\x94(\x8c\x01x\x94J\x90\xee\xfe\xff\x8a\t\x00\x00\x00\x00\x00\x00\x00\x00@G?\xe0\x00\x00\x00\x00\x00\x00t\x94\x8c\x01c\x94\x88\x8c\x02a2\x94h\x02u.")
	v, err := unpickle(b)
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*Dict)
	a, _ := d.Get("a")
	a2, _ := d.Get("a2")
	if a != a2 {
		t.Errorf("a memo reference is not the same object")
	}
	got := dump(t, d)
	want := `{"a":[1,2,300],"b":["x",-70000,1180591620717411303424,0.5],"c":true,"a2":[1,2,300]}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestUnpickleRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"global":    []byte("\x80\x02cbuiltins\nset\nq\x00."),
		"bytes":     []byte("\x80\x03C\x01a."),
		"truncated": []byte("\x80\x02X\x05\x00\x00\x00ab"),
		"no stop":   []byte("\x80\x02N"),
		"bad memo":  []byte("\x80\x02h\x05."),
		"empty":     nil,
	} {
		if _, err := unpickle(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestJSON(t *testing.T) {
	v := &Dict{Keys: []any{"s", "i", "f", "g", "n", "l", "e"}, Vals: []any{
		"数学 🙂 \"q\"\n\x7f", int64(-3), 1.0, 1e-5, math.NaN(), &List{Items: []any{true, nil, 1e16, 0.1}}, &List{},
	}}
	compact, _ := appendJSON(nil, v, false)
	if want := "{\"s\":\"数学 🙂 \\\"q\\\"\\n\x7f\",\"i\":-3,\"f\":1.0,\"g\":1e-05,\"n\":NaN,\"l\":[true,null,1e+16,0.1],\"e\":[]}"; string(compact) != want {
		t.Errorf("compact:\n got %s\nwant %s", compact, want)
	}
	python, _ := appendJSON(nil, v, true)
	if want := `{"s": "\u6570\u5b66 \ud83d\ude42 \"q\"\n\u007f", "i": -3, "f": 1.0, "g": 1e-05, "n": NaN, "l": [true, null, 1e+16, 0.1], "e": []}`; string(python) != want {
		t.Errorf("python:\n got %s\nwant %s", python, want)
	}
	for _, text := range []string{string(compact), string(python)} {
		back, err := parseJSON(text)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := appendJSON(nil, back, false)
		if string(again) != string(compact) {
			t.Errorf("round trip of %s:\n got %s", text, again)
		}
	}
	for _, bad := range []string{"", "{", `{"a" 1}`, "[1,]", `"\x"`, "01x", "{} x"} {
		if _, err := parseJSON(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
