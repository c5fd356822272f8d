-- tasks: per experience, in store order, its reward and the index of its
-- task group (tid = "batch/task" within its experiment), groups numbered 0, 1, … in
-- first-appearance order (spec README §EID: group order = order of each
-- group's first row; rows keep input order, hence ORDER BY min(row_idx)).
--
-- Ids are grouped by their string rendering, as upstream's keys are strings:
-- the integer 0 and the string "0" are one id. A group is the pair of
-- renderings, never their concatenation: batch "0", task "a/b" and batch
-- "0/a", task "b" are two groups whatever the ids hold. The experiment
-- (exps.experiment: the store's column, '' for a store without one) is a
-- third key column: groups never span experiments. A row whose reward is null,
-- NaN or infinite belongs to no group (tid_id -1): the pipeline reports it,
-- or drops it with --on-invalid-reward drop, before any group forms.
-- Placeholder grouped: which rows form groups — `valid`, or `TRUE` when a
-- stage filters the invalid rewards itself (invalid_reward_filter).
--
-- Why not the group statistics here: DuckDB would give mean/std in double
-- precision (avg, stddev_samp), while upstream computes float32 statistics
-- (aggregation.md §Numerics) and the advantage stage owns that arithmetic
-- (stages/advantage). The rewards come to Go as one column (read by columns,
-- not row by row), and Go computes the per-group float32 statistics from them.
WITH k AS (
    SELECT row_idx,
           reward,
           experiment AS te,
           CAST(batch AS VARCHAR) AS tb,
           CAST(task AS VARCHAR) AS tt,
           reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid
    FROM exps
),
ids AS (
    SELECT te, tb, tt, row_number() OVER (ORDER BY min(row_idx)) - 1 AS tid_id
    FROM k
    WHERE {{grouped}}
    GROUP BY te, tb, tt
)
-- (An equi-join on the key alone: an extra condition in a LEFT JOIN's ON
-- clause makes DuckDB fall back to a nested-loop join.)
-- The result has no nulls (it is read by columns): a null reward is NaN, a
-- row in no group has tid_id -1.
SELECT k.row_idx,
       coalesce(k.reward, 'NaN'::DOUBLE) AS reward,
       coalesce(CASE WHEN {{grouped}} THEN ids.tid_id END, -1) AS tid_id
FROM k LEFT JOIN ids USING (te, tb, tt)
ORDER BY k.row_idx;
