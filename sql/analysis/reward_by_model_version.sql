-- Reward per model version (policy staleness): rows, batches and the reward's mean, std, min and max.
-- model_version is the version of the policy that generated the rollout
-- (info.model_version upstream). Null, NaN and infinite rewards are left out
-- of the statistics, as in reward_by_batch.
-- requires: model_version, batch, reward
WITH r AS (
    SELECT model_version, batch, CASE WHEN isfinite(reward) THEN reward END AS reward
    FROM experiences
)
SELECT
    model_version,
    count(*)              AS rows,
    count(DISTINCT batch) AS batches,
    min(batch)            AS first_batch,
    max(batch)            AS last_batch,
    count(reward)         AS rewarded,
    avg(reward)           AS reward_mean,
    stddev_samp(reward)   AS reward_std,
    min(reward)           AS reward_min,
    max(reward)           AS reward_max
FROM r
GROUP BY model_version
ORDER BY model_version;
