-- The experiments of a store that is not an experience table, from the
-- index: each one's first and last explore step (batch) and rows.
SELECT experiment, min(batch_num) AS first_step, max(batch_num) AS last_step, sum(rollouts) AS rows
FROM steps
GROUP BY experiment
ORDER BY experiment;
