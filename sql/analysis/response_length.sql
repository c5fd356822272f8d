-- Response length (tokens) and truncation rates per explore batch, with a final row for the whole store.
-- The response length is len(action_mask) (one entry per response token).
-- truncated rows are those whose truncate_status is 'response_truncated'
-- (the response hit the generation limit) or 'prompt_truncated'.
-- Percentiles are discrete (an observed length).
-- requires: batch, action_mask, truncate_status
WITH r AS (
    SELECT batch, len(action_mask) AS len, truncate_status AS ts
    FROM experiences
)
SELECT
    CASE WHEN grouping(batch) = 1 THEN 'all' ELSE batch::VARCHAR END   AS batch,
    count(*)                                                          AS rows,
    avg(len)                                                          AS mean_length,
    min(len)                                                          AS min_length,
    quantile_disc(len, 0.5)                                           AS p50_length,
    quantile_disc(len, 0.95)                                          AS p95_length,
    max(len)                                                          AS max_length,
    count(*) FILTER (WHERE ts = 'response_truncated')                 AS response_truncated,
    count(*) FILTER (WHERE ts = 'response_truncated') / count(*)      AS response_truncation_rate,
    count(*) FILTER (WHERE ts = 'prompt_truncated')                   AS prompt_truncated,
    count(*) FILTER (WHERE ts = 'prompt_truncated') / count(*)        AS prompt_truncation_rate
FROM r
GROUP BY GROUPING SETS ((batch), ())
ORDER BY grouping(batch), r.batch;
