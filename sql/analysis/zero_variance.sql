-- Zero-variance tasks: the groups (tid = batch/task, within an experiment where the store has one) whose rewards are all equal, which GRPO gives a zero advantage.
-- One row per group of two or more rows whose finite rewards are all the
-- same: its runs, the common reward, and the rows left out for a null,
-- NaN or infinite reward (left out as `rftpipe run --on-invalid-reward
-- drop` does). Rewards compare as float32, as grpo's statistics do.
-- std_threshold = 0 drops exactly these groups (and singletons).
-- requires: batch, task, reward
WITH g AS (
    SELECT
        {{group_key}},
        count(*) FILTER (WHERE isfinite(reward))                   AS n,
        min(reward::FLOAT) FILTER (WHERE isfinite(reward))          AS lo,
        max(reward::FLOAT) FILTER (WHERE isfinite(reward))          AS hi,
        count(*) FILTER (WHERE reward IS NULL OR NOT isfinite(reward)) AS invalid_rewards
    FROM experiences
    GROUP BY {{group_key}}
)
SELECT {{group_key}}, n AS rows, lo::DOUBLE AS reward, invalid_rewards
FROM g
WHERE n > 1 AND lo = hi
ORDER BY {{group_key}};
