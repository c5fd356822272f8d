-- Rows a run dropped, per drop reason and explore batch, then per reason over every batch (batch 'all'): counts and reward summaries.
-- Reads the store of `rftpipe run --rejected FILE`: every dropped row as
-- read, with drop_reason (why) and dropped_by (the operator or fn that
-- dropped it). groups counts the (batch, task) groups the rows come from,
-- within an experiment where the store has one (one task id in two batches
-- is two groups). Null, NaN and infinite rewards are counted in rows but
-- left out of the statistics (rewarded = rows used).
-- requires: batch, task, reward, drop_reason, dropped_by
WITH r AS (
    SELECT drop_reason, dropped_by, {{group_key}}, CASE WHEN isfinite(reward) THEN reward END AS reward
    FROM experiences
)
SELECT
    drop_reason,
    dropped_by,
    CASE WHEN grouping(batch) = 1 THEN 'all' ELSE batch::VARCHAR END AS batch,
    count(*)             AS rows,
    count(DISTINCT ({{group_key}})) AS groups,
    count(reward)        AS rewarded,
    avg(reward)          AS reward_mean,
    stddev_samp(reward)  AS reward_std,
    min(reward)          AS reward_min,
    max(reward)          AS reward_max
FROM r
GROUP BY GROUPING SETS ((drop_reason, dropped_by, batch), (drop_reason, dropped_by))
ORDER BY drop_reason, dropped_by, grouping(batch), batch::VARCHAR;
