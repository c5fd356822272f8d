package pipeline

import (
	"context"
	dbsql "database/sql"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow/go/v17/arrow"

	"github.com/rftpipe/rftpipe/schema"
	rsql "github.com/rftpipe/rftpipe/sql"
	"github.com/rftpipe/rftpipe/sql/duckdb"
	"github.com/rftpipe/rftpipe/stages/advantage"
)

// componentPrefix starts the name of a reward-component column (gdpo).
const componentPrefix = "reward_"

// rewardComponents lists the store's reward-component columns: the numeric
// columns named reward_<name>, in store order.
func rewardComponents(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		id := f.Type.ID()
		if strings.HasPrefix(f.Name, componentPrefix) && len(f.Name) > len(componentPrefix) && (arrow.IsFloating(id) || arrow.IsInteger(id)) {
			out = append(out, f.Name)
		}
	}
	return out
}

// jsonPath returns the DuckDB literal of the JSON path of info key k.
func jsonPath(k string) (string, error) {
	if strings.ContainsAny(k, `"\`) {
		return "", schema.BadInputf("info key %q: quotes and backslashes are not supported", k)
	}
	return duckdb.QuoteString(`$."` + k + `"`), nil
}

// scanInfo reads what the stages need of the info column and of the reward
// components into g.Input, row for row with tasks.sql.
func scanInfo(ctx context.Context, db *dbsql.DB, g *Grouping, n GroupNeeds, vars map[string]string) error {
	in := g.Input
	if n.Components && len(n.ComponentColumns) > 0 {
		if err := scanComponents(ctx, db, in, n.ComponentColumns, vars); err != nil {
			return err
		}
	}
	if n.NoInfo {
		return noInfo(g, n)
	}
	if n.StepReward != "" {
		if err := scanStepRewards(ctx, db, in, n.StepReward, vars); err != nil {
			return err
		}
	}
	if n.Anchor != "" {
		if err := scanAnchors(ctx, db, in, n.Anchor, vars); err != nil {
			return err
		}
	}
	if n.CoD {
		return scanCoD(ctx, db, in, vars)
	}
	return nil
}

// withVar returns a copy of vars that also sets k to v, where vars does
// not.
func withVar(vars map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range vars {
		out[a] = b
	}
	return out
}

// scanComponents reads the reward component columns into in.Components, a
// null component as NaN.
func scanComponents(ctx context.Context, db *dbsql.DB, in *advantage.Input, columns []string, vars map[string]string) error {
	cols := make([]string, len(columns))
	in.Components = make([][]float64, len(cols))
	dst := make([]any, len(cols))
	for i, c := range columns {
		cols[i] = "coalesce(CAST(" + duckdb.QuoteIdent(c) + " AS DOUBLE), 'NaN'::DOUBLE)" // a null component is NaN
		dst[i] = &in.Components[i]
	}
	if err := duckdb.QueryColumns(ctx, db, rsql.Pipeline("components", withVar(vars, "cols", strings.Join(cols, ", "))), dst...); err != nil {
		return groupError(err)
	}
	return nil
}

// scanStepRewards reads info[key] into in.StepReward and whether each row
// has it into in.HasStepReward.
func scanStepRewards(ctx context.Context, db *dbsql.DB, in *advantage.Input, key string, vars map[string]string) error {
	rows := len(in.Reward)
	path, err := jsonPath(key)
	if err != nil {
		return err
	}
	in.StepReward, in.HasStepReward = make([]float64, 0, rows), make([]bool, 0, rows)
	err = query(ctx, db, rsql.Pipeline("step_rewards", withVar(vars, "path", path)), func(r *dbsql.Rows) error {
		var has dbsql.NullBool
		var v dbsql.NullFloat64
		var at int64 // the row in the store
		if err := r.Scan(&has, &v, &at); err != nil {
			return err
		}
		if has.Bool && !v.Valid {
			return schema.BadInputf("column %s: row %d: info.%s is not a number", schema.Info, at, key)
		}
		in.StepReward, in.HasStepReward = append(in.StepReward, nullNaN(v)), append(in.HasStepReward, has.Bool)
		return nil
	})
	return err
}

// scanAnchors reads the dense index of each row's info[key] into
// in.Anchor; -1: the row has none.
func scanAnchors(ctx context.Context, db *dbsql.DB, in *advantage.Input, key string, vars map[string]string) error {
	rows := len(in.Reward)
	path, err := jsonPath(key)
	if err != nil {
		return err
	}
	in.Anchor = make([]int32, 0, rows)
	err = query(ctx, db, rsql.Pipeline("anchors", withVar(vars, "path", path)), func(r *dbsql.Rows) error {
		var id dbsql.NullInt64
		if err := r.Scan(&id); err != nil {
			return err
		}
		a := int32(-1)
		if id.Valid {
			a = int32(id.Int64)
		}
		in.Anchor = append(in.Anchor, a)
		return nil
	})
	return err
}

// scanCoD reads the info keys of cod's iterative mode into in.CoD.
func scanCoD(ctx context.Context, db *dbsql.DB, in *advantage.Input, vars map[string]string) error {
	rows := len(in.Reward)
	in.CoD = make([]advantage.CoDInfo, 0, rows)
	return query(ctx, db, rsql.Pipeline("cod", vars), func(r *dbsql.Rows) error {
		var (
			exp, task, expType, taskIdx, hintIdx, rewards, taskset, judge, judgeTraj dbsql.NullString
			run, respLen                                                             dbsql.NullInt64
			row                                                                      int64 // in the store
		)
		if err := r.Scan(&exp, &task, &run, &respLen, &expType, &taskIdx, &hintIdx, &rewards, &taskset, &judge, &judgeTraj, &row); err != nil {
			return err
		}
		c := advantage.CoDInfo{Experiment: exp.String, Task: task.String, Run: run.Int64, RespLen: float64(respLen.Int64), Type: expType.String,
			TasksetID: taskset.String, Judge: truthy(judge.String) || truthy(judgeTraj.String)}
		idx := taskIdx
		if c.Type == "gen_hint" {
			idx = hintIdx
		}
		if idx.Valid {
			i, err := strconv.ParseFloat(idx.String, 64)
			if err != nil || i != math.Trunc(i) || math.Abs(i) > 1<<53 { // Trunc(±Inf) is ±Inf
				return schema.BadInputf("column %s: row %d: info task_idx/hint_idx %q is not an integer", schema.Info, row, idx.String)
			}
			c.Idx = int64(i)
		}
		if rewards.Valid {
			var tr []float64
			if err := json.Unmarshal([]byte(rewards.String), &tr); err != nil {
				return schema.BadInputf("column %s: row %d: info.task_rewards: %v", schema.Info, row, err)
			}
			c.TaskRewards = tr
		}
		in.CoD = append(in.CoD, c)
		return nil
	})
}

// noInfo fills in what the stages read of info for a store without the
// column: every key absent. cod's iterative mode cannot run without it.
func noInfo(g *Grouping, n GroupNeeds) error {
	in := g.Input
	rows := len(in.Reward)
	if n.StepReward != "" {
		in.StepReward, in.HasStepReward = make([]float64, rows), make([]bool, rows)
		for i := range in.StepReward {
			in.StepReward[i] = math.NaN()
		}
	}
	if n.Anchor != "" {
		in.Anchor = make([]int32, rows)
		for i := range in.Anchor {
			in.Anchor[i] = -1
		}
	}
	if n.CoD {
		return schema.BadInputf("column %q: missing; cod's iterative mode reads CoD's fields from it", schema.Info)
	}
	return nil
}

// truthy is Python's truth value of a JSON scalar's text.
func truthy(s string) bool {
	switch s {
	case "", "null", "false", "0", "0.0", `""`, "[]", "{}":
		return false
	}
	return true
}
