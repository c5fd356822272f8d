-- Zero-variance groups and what GRPO's std_threshold would drop: groups, rows and their shares.
-- Groups are tid = batch/task over all their rows, as grpo groups them. grpo
-- with std_threshold set drops every singleton group and every group whose
-- reward std (unbiased, of the float32 rewards) is <= std_threshold; the
-- default 0.0 drops exactly the groups whose rewards are all equal.
-- requires: batch, task, reward
-- var: std_threshold = 0.0: groups with reward std <= this are dropped
WITH groups AS (
    SELECT count(*) AS n, stddev_samp(reward::FLOAT) AS std
    FROM experiences
    GROUP BY batch, task
), g AS (
    SELECT n, std, n = 1 OR std <= getvariable('std_threshold')::DOUBLE AS dropped
    FROM groups
)
SELECT
    count(*)                                         AS groups,
    sum(n)::BIGINT                                   AS rows,
    count(*) FILTER (WHERE n = 1)                    AS singleton_groups,
    count(*) FILTER (WHERE n > 1 AND std = 0)        AS zero_variance_groups,
    count(*) FILTER (WHERE n > 1 AND std = 0) / count(*) AS zero_variance_share,
    getvariable('std_threshold')::DOUBLE                     AS std_threshold,
    count(*) FILTER (WHERE dropped)                  AS dropped_groups,
    count(*) FILTER (WHERE dropped) / count(*)       AS dropped_group_share,
    coalesce(sum(n) FILTER (WHERE dropped), 0)::BIGINT AS dropped_rows,
    coalesce(sum(n) FILTER (WHERE dropped), 0) / sum(n) AS dropped_row_share
FROM g;
