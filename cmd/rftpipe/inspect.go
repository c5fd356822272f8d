package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
)

// inspection is what `rftpipe inspect --format json` prints; scripts rely on
// rows and tasks.
type inspection struct {
	Store    string      `json:"store"`
	Files    int         `json:"files"`
	Columns  []columnDoc `json:"columns"`
	Rows     int64       `json:"rows"`
	Batches  int         `json:"batches"`
	Tasks    int         `json:"tasks"` // distinct batch/task
	Runs     int         `json:"runs"`  // distinct batch/task/run
	Steps    int         `json:"steps"` // distinct step values
	Reward   *summary    `json:"reward,omitempty"`
	Response *summary    `json:"response_length,omitempty"`
}

type columnDoc struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// summary is a streaming count/mean/std/min/max (Welford).
type summary struct {
	Count   int64   `json:"count"`
	Invalid int64   `json:"invalid,omitempty"` // null, NaN or Inf
	Mean    float64 `json:"mean"`
	Std     float64 `json:"std"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	m2      float64
}

func (s *summary) add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		s.Invalid++
		return
	}
	if s.Count == 0 {
		s.Min, s.Max = v, v
	}
	s.Count++
	d := v - s.Mean
	s.Mean += d / float64(s.Count)
	s.m2 += d * (v - s.Mean)
	s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	if s.Count > 1 {
		s.Std = math.Sqrt(s.m2 / float64(s.Count-1))
	}
}

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "summarise a store: schema, rows, distinct tasks/runs/steps, rewards, response lengths",
		ArgsUsage: "STORE",
		Flags:     []cli.Flag{formatFlag()},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect takes one STORE")
			}
			if f := c.String("format"); f != "table" && f != "json" {
				return usagef("--format %q: want table or json", f)
			}
			ins, err := inspect(c.Context, c.Args().First())
			if err != nil {
				return err
			}
			if c.String("format") == "json" {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(ins)
			}
			return ins.table(c.App.Writer)
		},
	}
}

func inspect(ctx context.Context, path string) (*inspection, error) {
	cols := []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Reward, schema.ActionMask}
	full, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	ins := &inspection{Store: path, Files: len(full.Files())}
	for _, f := range full.Schema().Fields() {
		ins.Columns = append(ins.Columns, columnDoc{f.Name, f.Type.String()})
	}
	// Response lengths come from the cheapest per-token column present.
	lenCol := ""
	for _, n := range []string{schema.ActionMask, schema.Logprobs, schema.Chosen} {
		if len(full.Schema().FieldIndices(n)) > 0 {
			lenCol = n
			break
		}
	}
	full.Close()
	cols[len(cols)-1] = lenCol
	r, err := store.Open(path, store.Columns(cols...))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sc := r.Schema()
	get := func(rec arrow.Record, name string) arrow.Array {
		if idx := sc.FieldIndices(name); len(idx) > 0 {
			return rec.Column(idx[0])
		}
		return nil
	}
	batches, tasks, runs, steps := map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}, map[string]struct{}{}
	var reward, resp summary
	var key []byte
	err = r.ForEach(ctx, func(rec arrow.Record) error {
		ins.Rows += rec.NumRows()
		b, t, ru, st := get(rec, schema.Batch), get(rec, schema.Task), get(rec, schema.Run), get(rec, schema.Step)
		rw, _ := get(rec, schema.Reward).(*array.Float64)
		ll, _ := get(rec, lenCol).(array.ListLike)
		for i := 0; i < int(rec.NumRows()); i++ {
			if b != nil && t != nil {
				key = schema.AppendKey(key[:0], i, b)
				batches[string(key)] = struct{}{}
				key = schema.AppendKey(key[:0], i, b, t)
				tasks[string(key)] = struct{}{}
				if ru != nil {
					key = schema.AppendKey(key[:0], i, b, t, ru)
					runs[string(key)] = struct{}{}
				}
			}
			if st != nil {
				key = schema.AppendID(key[:0], st, i)
				steps[string(key)] = struct{}{}
			}
			if rw != nil {
				if rw.IsNull(i) {
					reward.Invalid++
				} else {
					reward.add(rw.Value(i))
				}
			}
			if ll != nil && !ll.IsNull(i) {
				lo, hi := ll.ValueOffsets(i)
				resp.add(float64(hi - lo))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ins.Batches, ins.Tasks, ins.Runs, ins.Steps = len(batches), len(tasks), len(runs), len(steps)
	if rw := sc.FieldIndices(schema.Reward); len(rw) > 0 {
		ins.Reward = &reward
	}
	if lenCol != "" {
		ins.Response = &resp
	}
	return ins, nil
}

func (ins *inspection) table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\t%s (%d file(s))\n", ins.Store, ins.Files)
	fmt.Fprintf(tw, "rows\t%d\n", ins.Rows)
	fmt.Fprintf(tw, "batches / tasks / runs / steps\t%d / %d / %d / %d\n", ins.Batches, ins.Tasks, ins.Runs, ins.Steps)
	if s := ins.Reward; s != nil {
		fmt.Fprintf(tw, "reward\tmean %.4g  std %.4g  min %.4g  max %.4g  (%d invalid)\n", s.Mean, s.Std, s.Min, s.Max, s.Invalid)
	}
	if s := ins.Response; s != nil {
		fmt.Fprintf(tw, "response length\tmean %.1f  min %.0f  max %.0f\n", s.Mean, s.Min, s.Max)
	}
	fmt.Fprintln(tw, "columns\t")
	for _, c := range ins.Columns {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.Type)
	}
	return tw.Flush()
}
