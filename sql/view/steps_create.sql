-- One row per explore step (batch): its groups, rollouts, mean reward and
-- advantage over its rows, and how many of its groups and rows were dropped.
CREATE TEMP TABLE steps AS
SELECT
    r.batch,
    any_value(r.batch_num)                                  AS batch_num,
    count(DISTINCT r.task)                                  AS groups,
    count(*)                                                AS rollouts,
    avg(r.reward) FILTER (WHERE isfinite(r.reward))         AS reward_mean,
    stddev_samp(r.reward) FILTER (WHERE isfinite(r.reward)) AS reward_std,
    avg(r.advantage)                                        AS adv_mean,
    avg(r.response_length)                                  AS length_mean,
    count(*) FILTER (WHERE r.drop_reason IS NOT NULL)       AS dropped,
    any_value(g.dropped_groups)                             AS dropped_groups
FROM rows r
JOIN (
    SELECT batch, count(*) FILTER (WHERE status <> 'kept') AS dropped_groups FROM groups GROUP BY batch
) g USING (batch)
GROUP BY r.batch;
