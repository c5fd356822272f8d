-- Distribution of the per-group reward std (groups = tid = batch/task, within an experiment where the store has one, as GRPO groups them), in buckets.
-- One row for groups whose rewards are all equal (std = 0: GRPO gives them a
-- zero advantage, std_threshold = 0 drops them), one per std bucket of width
-- `bucket`, and one for singleton groups (one row: no std; any std_threshold
-- drops them). std is the unbiased sample std of the float32 rewards.
-- Null, NaN and infinite rewards are left out (as `rftpipe run
-- --on-invalid-reward drop` does); a group without a finite reward is not
-- counted, and the last row counts the rows left out.
-- requires: batch, task, reward
-- var: bucket = 0.1 in (0,inf): width of a std bucket
WITH params AS (
    SELECT getvariable('bucket')::DOUBLE AS w
), groups AS (
    SELECT count(*) AS n, stddev_samp(reward::FLOAT) AS std
    FROM experiences
    WHERE isfinite(reward)
    GROUP BY {{group_key}}
), b AS (
    SELECT
        CASE WHEN n = 1 THEN 2 WHEN std = 0 THEN 0 ELSE 1 END   AS kind,
        CASE WHEN n > 1 AND std > 0 THEN floor(std / w) END     AS bucket,
        w
    FROM groups, params
)
SELECT std_range, std_from, std_to, groups, share
FROM (
    SELECT
        kind,
        bucket,
        CASE kind
            WHEN 0 THEN 'std = 0'
            WHEN 2 THEN 'singleton'
            ELSE printf('[%.3g, %.3g)', bucket * any_value(w), (bucket + 1) * any_value(w))
        END                                                             AS std_range,
        CASE kind WHEN 0 THEN 0.0 WHEN 1 THEN bucket * any_value(w) END       AS std_from,
        CASE kind WHEN 0 THEN 0.0 WHEN 1 THEN (bucket + 1) * any_value(w) END AS std_to,
        count(*)                                                        AS groups,
        count(*) / sum(count(*)) OVER ()                                AS share
    FROM b
    GROUP BY kind, bucket
    UNION ALL
    SELECT 3, NULL, 'invalid rewards (rows)', NULL, NULL, count(*), NULL
    FROM experiences
    WHERE reward IS NULL OR NOT isfinite(reward)
    HAVING count(*) > 0
)
ORDER BY kind, bucket;
