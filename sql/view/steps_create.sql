-- One row per explore step (batch) of each experiment: its groups,
-- rollouts, mean reward, advantage, entropy and response length over its
-- rows, and how many of its groups and rows were dropped (the group counts
-- from groups, the rest in one pass over the rows read, as in
-- groups_create.sql).
CREATE OR REPLACE TABLE steps AS
SELECT r.experiment, r.batch, r.batch_num, g.groups, r.rollouts, r.reward_mean, r.reward_std, r.adv_mean, r.entropy_mean, r.length_mean, r.dropped, g.dropped_groups
FROM (
    SELECT
        coalesce(experiment, '')     AS experiment,
        coalesce(batch::VARCHAR, '') AS batch,
        TRY_CAST(batch AS BIGINT)    AS batch_num,
        * EXCLUDE (experiment, batch)
    FROM (
        SELECT
            experiment,
            batch,
            count(*)                                            AS rollouts,
            avg(reward) FILTER (WHERE isfinite(reward))         AS reward_mean,
            stddev_samp(reward) FILTER (WHERE isfinite(reward)) AS reward_std,
            avg(advantage)                                      AS adv_mean,
            avg(entropy)                                        AS entropy_mean,
            avg(response_length)                                AS length_mean,
            count(drop_reason)                                  AS dropped
        FROM {{rows}}
        GROUP BY experiment, batch
    )
) r
JOIN (
    SELECT experiment, batch, count(*) AS groups, count(*) FILTER (WHERE status <> 'kept') AS dropped_groups
    FROM groups
    GROUP BY experiment, batch
) g USING (experiment, batch);
