-- Response length drift per experiment: the mean response length (tokens) at each explore step, and its change since the experiment's first step.
-- The response length is len(action_mask) (one entry per response token);
-- model_version is the explore step; drift = mean_length minus the mean at
-- the experiment's first model_version.
-- requires: experiment, model_version, action_mask
WITH s AS (
    SELECT experiment, model_version, count(*) AS rows, avg(len(action_mask)) AS mean_length
    FROM experiences
    GROUP BY experiment, model_version
)
SELECT
    experiment,
    model_version,
    rows,
    mean_length,
    mean_length - first_value(mean_length) OVER (PARTITION BY experiment ORDER BY model_version) AS drift
FROM s
ORDER BY experiment, model_version;
