-- The statistics of every group (tid = batch/task, as GRPO groups rollouts,
-- within an experiment of an experience table), of every explore step and
-- of all rows, in one pass over the rows read (GROUPING SETS; level is
-- grouping(experiment, batch, task): 0 a group, 1 a step, 7 all rows).
-- The rows read are the stores' scalars (scan_select.sql) at start, the
-- index rows once it is filled; the ids are made text here, per group, not
-- per row. groups_create.sql, steps_create.sql and summary_create.sql read
-- them.
CREATE OR REPLACE TABLE aggregates AS
SELECT
    grouping(experiment, batch, task)                   AS level,
    coalesce(experiment, '')                            AS experiment,
    coalesce(batch::VARCHAR, '')                        AS batch,
    TRY_CAST(batch AS BIGINT)                           AS batch_num,
    coalesce(task::VARCHAR, '')                         AS task,
    TRY_CAST(task AS BIGINT)                            AS task_num,
    count(*)                                            AS rollouts,
    count(drop_reason)                                  AS dropped,
    avg(reward) FILTER (WHERE isfinite(reward))         AS reward_mean,
    stddev_samp(reward) FILTER (WHERE isfinite(reward)) AS reward_std,
    avg(advantage)                                      AS adv_mean,
    min(advantage)                                      AS adv_min,
    max(advantage)                                      AS adv_max,
    avg(entropy)                                        AS entropy_mean,
    avg(response_length)                                AS length_mean
FROM {{rows}}
GROUP BY GROUPING SETS ((experiment, batch, task), (experiment, batch), ());
