-- pass@k and mean@k per task (tid = batch/task, within an experiment where the store has one): runs, successful runs, mean reward and the unbiased pass@k.
-- A run (batch/task/run) is scored by the reward of its last step, so
-- multi-step episodes count once. A run succeeds when that reward is >=
-- pass_reward. pass@k = 1 - C(n-c, k) / C(n, k) for n runs of which c
-- succeeded (the unbiased estimator of Chen et al. 2021), NULL when k > n;
-- mean@k, the expected mean reward of k runs, is the mean over all n runs.
-- A run whose reward is null, NaN or infinite is left out (invalid_runs).
-- requires: batch, task, run, step, reward
-- var: k = NULL integer in [1,1000000]: k of pass@k (NULL: each task's number of runs)
-- var: pass_reward = 1.0: a run whose reward is at least this succeeds
WITH runs AS (
    SELECT {{group_key}}, run, arg_max(reward, step) AS reward
    FROM experiences
    GROUP BY {{group_key}}, run
), tasks AS (
    SELECT
        {{group_key}},
        count(*) FILTER (WHERE isfinite(reward))                  AS n,
        count(*) FILTER (WHERE reward IS NULL OR NOT isfinite(reward)) AS invalid_runs,
        count(*) FILTER (WHERE isfinite(reward) AND reward >= getvariable('pass_reward')::DOUBLE) AS c,
        avg(reward) FILTER (WHERE isfinite(reward))               AS mean_reward,
        coalesce(getvariable('k')::BIGINT, count(*) FILTER (WHERE isfinite(reward))) AS k
    FROM runs
    GROUP BY {{group_key}}
)
SELECT
    {{group_key}},
    n           AS runs,
    c           AS successes,
    invalid_runs,
    k,
    mean_reward AS mean_at_k,
    CASE
        WHEN k < 1 OR k > n THEN NULL
        WHEN c = 0 THEN 0.0
        WHEN n - c < k THEN 1.0
        -- C(n-c, k) / C(n, k) = prod over i in (n-c, n] of (1 - k / i)
        ELSE 1.0 - list_product(list_transform(range(n - c + 1, n + 1), i -> 1.0 - k / i))
    END         AS pass_at_k
FROM tasks
ORDER BY {{group_key}};
