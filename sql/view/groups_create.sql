-- One row per group (tid = batch/task, as GRPO groups rollouts, within an
-- experiment of an experience table): its reward
-- and advantage statistics, and whether it was kept or dropped (a row is
-- dropped when it has a drop_reason: the rows of a --rejected store, or a
-- rejected-rows store viewed itself) and by what. The stages and reasons
-- are listed over the dropped rows only (DISTINCT aggregates are slow over
-- every group). The rows read are the stores' (rows_select.sql over their
-- files) at start, the index rows once it is filled.
CREATE OR REPLACE TABLE groups AS
SELECT g.*, coalesce(d.dropped_by, '') AS dropped_by, coalesce(d.drop_reason, '') AS drop_reason
FROM (
    SELECT
        experiment,
        batch,
        any_value(batch_num)                                             AS batch_num,
        task,
        any_value(task_num)                                              AS task_num,
        count(*)                                                         AS rollouts,
        count(drop_reason)                                               AS dropped,
        avg(reward) FILTER (WHERE isfinite(reward))                      AS reward_mean,
        coalesce(stddev_samp(reward) FILTER (WHERE isfinite(reward)), 0) AS reward_std,
        avg(advantage)                                                   AS adv_mean,
        min(advantage)                                                   AS adv_min,
        max(advantage)                                                   AS adv_max,
        avg(response_length)                                             AS length_mean,
        CASE
            WHEN count(drop_reason) = 0 THEN 'kept'
            WHEN count(drop_reason) = count(*) THEN 'dropped'
            ELSE 'partly dropped'
        END                                                              AS status
    FROM {{rows}}
    GROUP BY experiment, batch, task
) g
LEFT JOIN (
    SELECT
        experiment,
        batch,
        task,
        string_agg(DISTINCT dropped_by, ', ' ORDER BY dropped_by)   AS dropped_by,
        string_agg(DISTINCT drop_reason, ', ' ORDER BY drop_reason) AS drop_reason
    FROM {{rows}}
    WHERE drop_reason IS NOT NULL OR dropped_by IS NOT NULL
    GROUP BY experiment, batch, task
) d USING (experiment, batch, task);
