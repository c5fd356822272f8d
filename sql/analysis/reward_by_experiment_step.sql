-- Reward per explore step per experiment: rows and the reward's mean, std, min and max for each experiment and model_version.
-- Over an experience table (its experiment column), to compare experiments
-- step by step; model_version is the explore step. Null, NaN and infinite
-- rewards are left out of the statistics (rewarded = rows used).
-- requires: experiment, model_version, reward
WITH r AS (
    SELECT experiment, model_version, CASE WHEN isfinite(reward) THEN reward END AS reward
    FROM experiences
)
SELECT
    experiment,
    model_version,
    count(*)            AS rows,
    count(reward)       AS rewarded,
    avg(reward)         AS reward_mean,
    stddev_samp(reward) AS reward_std,
    min(reward)         AS reward_min,
    max(reward)         AS reward_max
FROM r
GROUP BY experiment, model_version
ORDER BY experiment, model_version;
