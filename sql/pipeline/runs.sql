-- runs: per grouped experience (placeholder grouped, see tasks.sql: a finite
-- reward unless a stage keeps the invalid ones), in store order, the index of
-- its run group (rid = experiment, batch, task, run as in tasks.sql: the
-- experiment and the triple of renderings, never their concatenation;
-- numbered in first-appearance order)
-- and its eid.step. step_wise_grpo scores each run by the reward of its last
-- step: the last row of the run in input order (upstream, Q-28), or the row
-- with the largest step (last_by_eid_step).
WITH k AS (
    SELECT row_idx,
           CAST(step AS BIGINT) AS step,
           experiment AS re,
           CAST(batch AS VARCHAR) AS rb,
           CAST(task AS VARCHAR) AS rt,
           CAST(run AS VARCHAR) AS rr
    FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
    WHERE {{grouped}}
),
ids AS (
    SELECT re, rb, rt, rr, row_number() OVER (ORDER BY min(row_idx)) - 1 AS rid_id
    FROM k
    GROUP BY re, rb, rt, rr
)
SELECT ids.rid_id, k.step
FROM k JOIN ids USING (re, rb, rt, rr)
ORDER BY k.row_idx;
