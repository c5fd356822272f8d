-- Zero-variance groups and what GRPO's std_threshold drops: groups, rows and their shares.
-- Groups are tid = batch/task, within an experiment where the store has one,
-- over all their rows, as grpo groups them.
-- Null, NaN and infinite rewards are left out (as `rftpipe run
-- --on-invalid-reward drop` does) and counted in invalid_rewards. The
-- default std_threshold NULL is what `rftpipe run --advantage-fn grpo` does
-- without the argument: no group is dropped. With std_threshold set, grpo
-- drops every singleton group and every group whose reward std (unbiased)
-- is <= std_threshold; 0.0 drops exactly the groups whose rewards are all
-- equal. The rewards stay doubles here (any finite reward counts; grpo's
-- float32 statistics can differ in their last digits); the std is taken of
-- the rewards divided by the group's largest magnitude and scaled back, so
-- rewards near the double range give a std (infinite past it), not an
-- error. The rule column says which rule applied.
-- requires: batch, task, reward
-- var: std_threshold = NULL in (-inf,inf): groups with reward std <= this are dropped (NULL: grpo's default, none)
WITH valid AS (
    SELECT {{group_key}}, reward, max(abs(reward)) OVER (PARTITION BY {{group_key}}) AS scale
    FROM experiences
    WHERE isfinite(reward)
), groups AS (
    SELECT count(*) AS n,
        any_value(scale) * stddev_samp(CASE WHEN scale = 0 THEN 0 ELSE reward / scale END) AS std
    FROM valid
    GROUP BY {{group_key}}
), g AS (
    SELECT n, std,
        CASE WHEN getvariable('std_threshold') IS NULL THEN false
            ELSE n = 1 OR std <= getvariable('std_threshold')::DOUBLE END AS dropped
    FROM groups
)
SELECT
    count(*)                                         AS groups,
    coalesce(sum(n), 0)::BIGINT                      AS rows,
    (SELECT count(*) FROM experiences WHERE reward IS NULL OR NOT isfinite(reward)) AS invalid_rewards,
    count(*) FILTER (WHERE n = 1)                    AS singleton_groups,
    count(*) FILTER (WHERE n > 1 AND std = 0)        AS zero_variance_groups,
    count(*) FILTER (WHERE n > 1 AND std = 0) / count(*) AS zero_variance_share,
    getvariable('std_threshold')::DOUBLE             AS std_threshold,
    CASE WHEN getvariable('std_threshold') IS NULL
        THEN 'std_threshold unset (grpo default): no group dropped'
        ELSE printf('singletons and groups with std <= %g dropped', getvariable('std_threshold')::DOUBLE)
    END                                              AS rule,
    count(*) FILTER (WHERE dropped)                  AS dropped_groups,
    count(*) FILTER (WHERE dropped) / count(*)       AS dropped_group_share,
    coalesce(sum(n) FILTER (WHERE dropped), 0)::BIGINT AS dropped_rows,
    coalesce(sum(n) FILTER (WHERE dropped), 0) / sum(n) AS dropped_row_share
FROM g;
