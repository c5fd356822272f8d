-- Reward per explore batch: rows, tasks, rewarded rows and the reward's mean, std, min and max.
-- A batch is one explore step (eid.batch); tasks counts its task groups,
-- within an experiment where the store has one. Null, NaN and infinite
-- rewards are counted in rows but left out of the statistics (rewarded =
-- rows used).
-- requires: batch, task, reward
WITH r AS (
    SELECT {{group_key}}, CASE WHEN isfinite(reward) THEN reward END AS reward
    FROM experiences
)
SELECT
    batch,
    count(*)             AS rows,
    count(DISTINCT ({{group_key}})) FILTER (WHERE task IS NOT NULL) AS tasks,
    count(reward)        AS rewarded,
    avg(reward)          AS reward_mean,
    stddev_samp(reward)  AS reward_std,
    min(reward)          AS reward_min,
    max(reward)          AS reward_max
FROM r
GROUP BY batch
ORDER BY batch;
