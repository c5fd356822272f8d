package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/urfave/cli/v2"

	"github.com/rftpipe/rftpipe/gpu"
	"github.com/rftpipe/rftpipe/schema"
	"github.com/rftpipe/rftpipe/schema/store"
	"github.com/rftpipe/rftpipe/stages/agg"
	"github.com/rftpipe/rftpipe/stages/args"
	"github.com/rftpipe/rftpipe/stages/entropy"
	"github.com/rftpipe/rftpipe/stages/kl"
	"github.com/rftpipe/rftpipe/stages/loss"
	"github.com/rftpipe/rftpipe/stages/tokens"
)

// gradColumn is the column of --grad-out: dLoss/dlogprob per token.
const gradColumn = "grad_logprob"

// idColumns are copied from the input into --grad-out when present.
var idColumns = []string{schema.Batch, schema.Task, schema.Run, schema.Step, schema.Suffix}

// defaultColumns is where each input is read from unless --col says
// otherwise: the first store column present in the list. The current policy's
// log-prob of an offline store defaults to a `logprob` column, else to the
// rollout `logprobs` — then ratio = 1, i.e. the loss and gradient at the
// rollout policy, the first step of an update.
var defaultColumns = []struct {
	input   string
	columns []string
}{
	{tokens.LogProb, []string{"logprob", schema.Logprobs}},
	{tokens.OldLogProb, []string{schema.Logprobs}},
	{tokens.RefLogProb, []string{"ref_logprob"}},
	{tokens.Advantages, []string{schema.Advantages}},
	{tokens.ActionMask, []string{schema.ActionMask}},
	{tokens.TeacherLogProb, []string{schema.TeacherLogprobs}},
	{tokens.Entropy, []string{"entropy"}},
	{tokens.Values, []string{"values"}},
	{tokens.ExpertMask, []string{"expert_mask", "is_expert"}},
}

// lossOutput is what `rftpipe loss --format json` prints.
type lossOutput struct {
	Fn      string      `json:"fn"`
	Args    args.Values `json:"args"`
	Rows    int         `json:"rows"`
	Tokens  int         `json:"tokens"`
	Loss    float64     `json:"loss"`
	Metrics agg.Metrics `json:"metrics"`
}

func lossCommand() *cli.Command {
	return &cli.Command{
		Name:  "loss",
		Usage: "compute a policy loss (+ KL and entropy terms), its metrics and dLoss/dlogprob on a store",
		Description: "The store is one micro-batch: final_loss = pg_loss - entropy_loss + kl_loss, metrics named as the\n" +
			"trainer publishes them (actor/...). Inputs are read from list columns (see --col); the current\n" +
			"policy's log-prob defaults to a `logprob` column, else to the rollout `logprobs` (ratio 1).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "fn", Usage: "policy loss `NAME`: " + strings.Join(loss.Default().Names(), ", ")},
			&cli.StringSliceFlag{Name: "arg", Usage: "policy loss argument `NAME=VALUE` over its default_args (repeatable; null for None)"},
			&cli.StringFlag{Name: "loss-agg-mode", Usage: "algorithm.loss_agg_mode for the policy (overriding its loss_agg_mode unless respect_own_loss_agg_mode), KL and entropy terms (default: --arg loss_agg_mode, else token-mean)"},
			&cli.StringFlag{Name: "kl-loss-fn", Value: "none", Usage: "KL loss `NAME`: " + strings.Join(kl.Registry().Names(), ", ")},
			&cli.Float64Flag{Name: "kl-coef", Value: 0.001, Usage: "KL loss coefficient"},
			&cli.StringFlag{Name: "entropy-loss-fn", Value: "default", Usage: "entropy loss `NAME`: " + strings.Join(entropy.Registry().Names(), ", ")},
			&cli.Float64Flag{Name: "entropy-coef", Value: 0, Usage: "entropy coefficient (the term is computed when the store has an entropy input)"},
			&cli.StringFlag{Name: "in", Required: true, Usage: "input store (`STORE`: file, directory or glob)"},
			&cli.StringSliceFlag{Name: "col", Usage: "read input `CANONICAL=COLUMN` (logprob, old_logprob, ref_logprob, advantages, action_mask, expert_mask, teacher_logprob, entropy, values; verl names accepted)"},
			&cli.Int64Flag{Name: "step", Value: -1, Usage: "training step of the batch (mix_chord's schedule)"},
			&cli.StringFlag{Name: "grad-out", Usage: "write grad_logprob list<float32> (+ id columns) aligned with the input rows to `FILE`"},
			deviceFlag(),
			formatFlag(),
		}, algorithmFlags()...),
		Action: runLoss,
	}
}

func runLoss(c *cli.Context) error {
	format := c.String("format")
	if format != "table" && format != "json" {
		return usagef("--format %q: want table or json", format)
	}
	var pl *loss.Loss
	var klFn *kl.Fn
	var entFn *entropy.Fn
	var mode agg.Mode
	var err error
	if isAlgorithmJob(c) {
		pl, klFn, entFn, mode, err = algorithmLossFns(c)
	} else {
		pl, klFn, entFn, mode, err = flagLossFns(c)
	}
	if err != nil {
		return err
	}
	ev, _, err := gpu.Select(c.String("device"), c.App.ErrWriter)
	if err != nil {
		return err
	}

	in := c.String("in")
	sb, err := readBatch(in, c.StringSlice("col"), c.Int64("step"))
	if err != nil {
		return err
	}
	defer sb.release()
	b := sb.batch

	grad := make([]float64, b.Rows.Tokens())
	pg, err := pl.EvalOn(ev, b, grad)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err) // e.g. a missing input: name the store
	}
	metrics := agg.Metrics{}
	metrics.Merge("actor", pg.Metrics)
	final := pg.Loss
	if klFn.Kind != kl.None {
		klGrad := make([]float64, len(grad))
		v, m, err := klFn.LossOn(ev, b, mode, klGrad)
		if err != nil {
			return err
		}
		for i, g := range klGrad {
			grad[i] += g
		}
		final += v
		metrics.Merge("actor", m)
	}
	if b.Has(tokens.Entropy) || entFn.Coef != 0 {
		v, m, err := entFn.LossOn(ev, b, mode, make([]float64, len(grad)))
		if err != nil {
			return err
		}
		final -= v // an entropy bonus
		metrics.Merge("actor", m)
	}
	metrics["actor/final_loss"] = final

	if out := c.String("grad-out"); out != "" {
		if err := writeGrad(out, in, sb, grad); err != nil {
			return err
		}
	}
	w := c.App.Writer
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(lossOutput{Fn: pl.Name(), Args: pl.Args, Rows: b.Rows.N(), Tokens: b.Rows.Tokens(), Loss: final, Metrics: metrics})
	}
	return lossTable(w, metrics)
}

// flagLossFns configures the policy, KL and entropy losses from --fn, --arg,
// --loss-agg-mode, --kl-loss-fn, --kl-coef, --entropy-loss-fn, --entropy-coef.
func flagLossFns(c *cli.Context) (*loss.Loss, *kl.Fn, *entropy.Fn, agg.Mode, error) {
	if !c.IsSet("fn") {
		return nil, nil, nil, 0, usagef("give --fn, --algorithm or --config")
	}
	def, err := loss.Default().Get(c.String("fn"))
	if err != nil {
		return nil, nil, nil, 0, err
	}
	user, err := def.Schema().ParseKV(c.StringSlice("arg"))
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("policy loss %s: %w", def.Name, err)
	}
	modeName := c.String("loss-agg-mode")
	if modeName == "" {
		modeName = "token-mean"
		if m, ok := user["loss_agg_mode"].(string); ok {
			modeName = m
		}
	}
	mode, err := agg.ParseMode(modeName)
	if err != nil {
		return nil, nil, nil, 0, schema.BadInputf("--loss-agg-mode: %v", err)
	}
	pl, err := def.FromConfig(args.Overlay(def.DefaultArgs(), user), modeName)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	klFn, err := kl.New(c.String("kl-loss-fn"), args.Values{"kl_coef": c.Float64("kl-coef")})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	entFn, err := entropy.New(c.String("entropy-loss-fn"), args.Values{"entropy_coef": c.Float64("entropy-coef")})
	if err != nil {
		return nil, nil, nil, 0, err
	}
	return pl, klFn, entFn, mode, nil
}

func lossTable(w io.Writer, m agg.Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE")
	for _, k := range m.Names() {
		fmt.Fprintf(tw, "%s\t%.10g\n", k, m[k])
	}
	return tw.Flush()
}

// storeBatch is a token batch read from a store, with the id columns of each
// record batch kept for --grad-out.
type storeBatch struct {
	batch  *tokens.Batch
	ids    *arrow.Schema
	chunks [][]arrow.Array // per record batch: the id columns
	rows   []int           // per record batch: its row count
}

func (s *storeBatch) release() {
	for _, ch := range s.chunks {
		for _, a := range ch {
			a.Release()
		}
	}
}

// inputColumns maps each input to its store column: the defaults present in
// the store, overridden by --col CANONICAL=COLUMN.
func inputColumns(file string, s *arrow.Schema, cols []string) (map[string]string, error) {
	has := func(c string) bool { return len(s.FieldIndices(c)) > 0 }
	out := map[string]string{}
	for _, d := range defaultColumns {
		for _, c := range d.columns {
			if has(c) {
				out[d.input] = c
				break
			}
		}
	}
	for _, kv := range cols {
		in, col, ok := strings.Cut(kv, "=")
		in = tokens.Canonical(in)
		if !ok || (!tokens.IsTokenInput(in) && in != tokens.ExpertMask) {
			return nil, usagef("--col %q: want CANONICAL=COLUMN with CANONICAL one of logprob, old_logprob, ref_logprob, advantages, action_mask, expert_mask, teacher_logprob, entropy, values", kv)
		}
		if !has(col) {
			return nil, schema.Errorf(file, -1, col, "no such column (--col %s)", kv)
		}
		out[in] = col
	}
	return out, nil
}

// readBatch reads every row of a store into one token batch.
func readBatch(path string, cols []string, step int64) (_ *storeBatch, err error) {
	r, err := store.Open(path)
	if err != nil {
		return nil, err
	}
	mapping, err := inputColumns(path, r.Schema(), cols)
	r.Close()
	if err != nil {
		return nil, err
	}
	if mapping[tokens.LogProb] == "" {
		return nil, schema.Errorf(path, -1, schema.Logprobs, "missing: the store has neither logprob nor logprobs (use --col logprob=COLUMN)")
	}
	var ids []arrow.Field
	project := append([]string(nil), idColumns...)
	for _, c := range mapping {
		project = append(project, c)
	}
	sb := &storeBatch{}
	defer func() {
		if err != nil {
			sb.release()
		}
	}()
	r, err = store.Open(path, store.Columns(project...))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	for _, c := range idColumns {
		if i := r.Schema().FieldIndices(c); len(i) > 0 {
			ids = append(ids, r.Schema().Field(i[0]))
		}
	}
	sb.ids = arrow.NewSchema(ids, nil)

	flat := map[string][]float64{}
	var lengths []int
	var expert []bool
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		_, _, row0 := r.Pos()
		n := int(rec.NumRows())
		base := len(lengths)
		lengths = append(lengths, make([]int, n)...)
		// logprob first: it defines each row's length, the others must match.
		for _, d := range defaultColumns {
			in := d.input
			col, ok := mapping[in]
			if !ok {
				continue
			}
			a := rec.Column(rec.Schema().FieldIndices(col)[0])
			if in == tokens.ExpertMask {
				if expert, err = appendFlags(expert, a, path, col, row0); err != nil {
					return nil, err
				}
				continue
			}
			if flat[in], err = appendList(flat[in], a, lengths[base:], in == tokens.LogProb, path, col, row0); err != nil {
				return nil, err
			}
		}
		ch := make([]arrow.Array, 0, len(ids))
		for _, f := range ids {
			a := rec.Column(rec.Schema().FieldIndices(f.Name)[0])
			a.Retain()
			ch = append(ch, a)
		}
		sb.chunks = append(sb.chunks, ch)
		sb.rows = append(sb.rows, n)
	}
	if len(lengths) == 0 {
		return nil, schema.Errorf(path, -1, "", "the store has no rows")
	}
	b := tokens.New(agg.NewRows(lengths))
	for in, v := range flat {
		if err := b.Set(in, v); err != nil {
			return nil, err
		}
	}
	if expert != nil {
		if err := b.SetExpertMask(expert); err != nil {
			return nil, err
		}
	}
	if step >= 0 {
		steps := make([]int64, len(lengths))
		for i := range steps {
			steps[i] = step
		}
		if err := b.SetStep(steps); err != nil {
			return nil, err
		}
	}
	sb.batch = b
	return sb, nil
}

// appendList appends the values of a list column to dst. With define, the
// row lengths are written into lengths; otherwise each row must match them.
func appendList(dst []float64, a arrow.Array, lengths []int, define bool, path, col string, row0 int64) ([]float64, error) {
	var offsets func(i int) (int64, int64)
	var values arrow.Array
	switch l := a.(type) {
	case *array.List:
		offsets, values = func(i int) (int64, int64) { return l.ValueOffsets(i) }, l.ListValues()
	case *array.LargeList:
		offsets, values = func(i int) (int64, int64) { return l.ValueOffsets(i) }, l.ListValues()
	default:
		return nil, schema.Errorf(path, -1, col, "has type %s, want a list of numbers", a.DataType())
	}
	var value func(j int) float64
	switch v := values.(type) {
	case *array.Float32:
		value = func(j int) float64 { return float64(v.Value(j)) }
	case *array.Float64:
		value = v.Value
	case *array.Boolean:
		value = func(j int) float64 { return b2f(v.Value(j)) }
	default:
		return nil, schema.Errorf(path, -1, col, "has type %s, want a list of float32, float64 or bool", a.DataType())
	}
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			return nil, schema.Errorf(path, row0+int64(i), col, "null list")
		}
		lo, hi := offsets(i)
		if define {
			lengths[i] = int(hi - lo)
		} else if int(hi-lo) != lengths[i] {
			return nil, schema.Errorf(path, row0+int64(i), col, "has %d tokens, the log-prob column has %d", hi-lo, lengths[i])
		}
		for j := int(lo); j < int(hi); j++ {
			if values.IsNull(j) {
				return nil, schema.Errorf(path, row0+int64(i), col, "null value at token %d", j-int(lo))
			}
			dst = append(dst, value(j))
		}
	}
	return dst, nil
}

// appendFlags appends a per-row bool (or integer 0/1) column.
func appendFlags(dst []bool, a arrow.Array, path, col string, row0 int64) ([]bool, error) {
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			return nil, schema.Errorf(path, row0+int64(i), col, "null flag")
		}
		switch v := a.(type) {
		case *array.Boolean:
			dst = append(dst, v.Value(i))
		case *array.Int32:
			dst = append(dst, v.Value(i) != 0)
		case *array.Int64:
			dst = append(dst, v.Value(i) != 0)
		default:
			return nil, schema.Errorf(path, -1, col, "has type %s, want bool", a.DataType())
		}
	}
	return dst, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// writeGrad writes the id columns and grad_logprob, record batch by record
// batch as read.
func writeGrad(out, in string, sb *storeBatch, grad []float64) (err error) {
	fields := append(append([]arrow.Field(nil), sb.ids.Fields()...),
		arrow.Field{Name: gradColumn, Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true})
	s := arrow.NewSchema(fields, nil)
	w, err := store.Create(out, s, store.NotOver(in))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			w.Abort()
		}
	}()
	rows := sb.batch.Split(grad)
	next := 0
	for k, ch := range sb.chunks {
		lb := array.NewListBuilder(memory.DefaultAllocator, arrow.PrimitiveTypes.Float32)
		vb := lb.ValueBuilder().(*array.Float32Builder)
		for _, row := range rows[next : next+sb.rows[k]] {
			lb.Append(true)
			for _, g := range row {
				vb.Append(float32(g))
			}
		}
		next += sb.rows[k]
		g := lb.NewArray()
		lb.Release()
		cols := append(append([]arrow.Array(nil), ch...), g)
		rec := array.NewRecord(s, cols, int64(sb.rows[k]))
		err := w.Write(rec)
		rec.Release()
		g.Release()
		if err != nil {
			return err
		}
	}
	return w.Commit()
}
