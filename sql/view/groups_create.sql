-- One row per group (aggregates_create.sql): its reward and advantage
-- statistics, and whether it was kept or dropped (a row is dropped when it
-- has a drop_reason: the rows of a --rejected store, or a rejected-rows
-- store viewed itself) and by what. The stages and reasons are listed over
-- the dropped rows only (DISTINCT aggregates are slow over every group),
-- of the rows read as aggregates_create.sql reads them, or of none when no
-- store has the columns (drops: an empty relation; the rows read are not
-- scanned again).
CREATE OR REPLACE TABLE groups AS
SELECT g.*, coalesce(d.dropped_by, '') AS dropped_by, coalesce(d.drop_reason, '') AS drop_reason
FROM (
    SELECT
        experiment, batch, batch_num, task, task_num, rollouts, dropped, reward_mean,
        coalesce(reward_std, 0) AS reward_std, adv_mean, adv_min, adv_max, length_mean,
        CASE
            WHEN dropped = 0 THEN 'kept'
            WHEN dropped = rollouts THEN 'dropped'
            ELSE 'partly dropped'
        END                     AS status
    FROM aggregates
    WHERE level = 0
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
