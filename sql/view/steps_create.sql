-- One row per explore step (batch) of each experiment
-- (aggregates_create.sql): its groups, rollouts, mean reward, advantage,
-- entropy and response length over its rows, and how many of its groups
-- and rows were dropped.
CREATE OR REPLACE TABLE steps AS
SELECT r.experiment, r.batch, r.batch_num, g.groups, r.rollouts, r.reward_mean, r.reward_std, r.adv_mean, r.entropy_mean, r.length_mean, r.dropped, g.dropped_groups
FROM (SELECT * FROM aggregates WHERE level = 1) r
JOIN (
    SELECT experiment, batch, count(*) AS groups, count(*) FILTER (WHERE status <> 'kept') AS dropped_groups
    FROM groups
    GROUP BY experiment, batch
) g USING (experiment, batch);
