-- Entropy drift per experiment: the mean per-token entropy of the response tokens at each explore step, and its change since the experiment's first step.
-- The mean is over every response token whose action_mask is true (a token
-- mean, as loss_agg_mode token-mean weighs them), of the entropy column;
-- model_version is the explore step; drift = mean_entropy minus the mean at
-- the experiment's first model_version.
-- requires: experiment, model_version, action_mask, entropy
WITH t AS (
    SELECT
        experiment,
        model_version,
        list_sum(list_transform(range(1, len(entropy) + 1), i -> CASE WHEN action_mask[i] THEN entropy[i] ELSE 0 END)) AS total,
        len(list_filter(action_mask, m -> m)) AS tokens
    FROM experiences
), s AS (
    SELECT experiment, model_version, count(*) AS rows, sum(tokens) AS tokens, sum(total) / sum(tokens) AS mean_entropy
    FROM t
    GROUP BY experiment, model_version
)
SELECT
    experiment,
    model_version,
    rows,
    tokens,
    mean_entropy,
    mean_entropy - first_value(mean_entropy) OVER (PARTITION BY experiment ORDER BY model_version) AS drift
FROM s
ORDER BY experiment, model_version;
