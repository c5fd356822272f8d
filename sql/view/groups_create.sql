-- One row per group (tid = batch/task, as GRPO groups rollouts): its reward
-- and advantage statistics, and whether it was kept or dropped (a row is
-- dropped when it has a drop_reason: the rows of a --rejected store, or a
-- rejected-rows store viewed itself) and by what.
CREATE TEMP TABLE groups AS
SELECT
    batch,
    any_value(batch_num)                                                AS batch_num,
    task,
    any_value(task_num)                                                 AS task_num,
    count(*)                                                            AS rollouts,
    count(*) FILTER (WHERE drop_reason IS NOT NULL)                     AS dropped,
    avg(reward) FILTER (WHERE isfinite(reward))                         AS reward_mean,
    coalesce(stddev_samp(reward) FILTER (WHERE isfinite(reward)), 0)    AS reward_std,
    avg(advantage)                                                      AS adv_mean,
    min(advantage)                                                      AS adv_min,
    max(advantage)                                                      AS adv_max,
    avg(response_length)                                                AS length_mean,
    CASE
        WHEN count(drop_reason) = 0 THEN 'kept'
        WHEN count(drop_reason) = count(*) THEN 'dropped'
        ELSE 'partly dropped'
    END                                                                 AS status,
    coalesce(string_agg(DISTINCT dropped_by, ', ' ORDER BY dropped_by), '')   AS dropped_by,
    coalesce(string_agg(DISTINCT drop_reason, ', ' ORDER BY drop_reason), '') AS drop_reason
FROM rows
GROUP BY batch, task;
