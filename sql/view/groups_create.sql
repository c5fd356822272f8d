-- One row per group (tid = batch/task, as GRPO groups rollouts, within an
-- experiment of an experience table): its reward and advantage statistics,
-- and whether it was kept or dropped (a row is dropped when it has a
-- drop_reason: the rows of a --rejected store, or a rejected-rows store
-- viewed itself) and by what. The stages and reasons are listed over the
-- dropped rows only (DISTINCT aggregates are slow over every group), of
-- none when no store has the columns (drops: an empty relation). The rows
-- read are the stores' scalars (scan_select.sql) at start, the index rows
-- once it is filled; the ids are made text per group, not per row.
CREATE OR REPLACE TABLE groups AS
SELECT g.*, coalesce(d.dropped_by, '') AS dropped_by, coalesce(d.drop_reason, '') AS drop_reason
FROM (
    SELECT
        coalesce(experiment, '')     AS experiment,
        coalesce(batch::VARCHAR, '') AS batch,
        TRY_CAST(batch AS BIGINT)    AS batch_num,
        coalesce(task::VARCHAR, '')  AS task,
        TRY_CAST(task AS BIGINT)     AS task_num,
        * EXCLUDE (experiment, batch, task)
    FROM (
        SELECT
            experiment,
            batch,
            task,
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
    )
) g
LEFT JOIN (
    SELECT
        coalesce(experiment, '')                                    AS experiment,
        coalesce(batch::VARCHAR, '')                                AS batch,
        coalesce(task::VARCHAR, '')                                 AS task,
        string_agg(DISTINCT dropped_by, ', ' ORDER BY dropped_by)   AS dropped_by,
        string_agg(DISTINCT drop_reason, ', ' ORDER BY drop_reason) AS drop_reason
    FROM {{drops}}
    WHERE drop_reason IS NOT NULL OR dropped_by IS NOT NULL
    GROUP BY ALL
) d USING (experiment, batch, task);
