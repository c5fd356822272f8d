-- Share of rows filtered per experiment: rows with a drop_reason over all rows.
-- Over a table of a run's output and its rejected rows (`run --rejected`)
-- ingested together, or any store with experiment and drop_reason columns:
-- a row is filtered when its drop_reason is not null.
-- requires: experiment, drop_reason
SELECT
    experiment,
    count(*)                       AS rows,
    count(drop_reason)             AS filtered,
    count(drop_reason) / count(*)  AS filtered_share
FROM experiences
GROUP BY experiment
ORDER BY experiment;
