-- Advantage statistics after `rftpipe run`, per explore batch and for the whole store (last row).
-- A row's advantage is the mean of its advantages over the tokens whose
-- action_mask is set (for outcome-reward advantage functions: the row's
-- score). Token statistics cover every masked token. Rows without an
-- advantages list count in rows only.
-- requires: batch, advantages, action_mask
WITH r AS (
    SELECT batch, list_filter(
        list_transform(advantages, (a, i) -> CASE WHEN action_mask[i] THEN a END),
        a -> a IS NOT NULL) AS adv
    FROM experiences
), s AS (
    SELECT batch, adv, len(adv) AS tokens, list_avg(adv) AS row_adv
    FROM r
)
SELECT
    CASE WHEN grouping(batch) = 1 THEN 'all' ELSE batch::VARCHAR END AS batch,
    count(*)                                                        AS rows,
    count(row_adv)                                                  AS rows_with_advantages,
    sum(tokens)::BIGINT                                             AS tokens,
    sum(list_sum(adv)) / sum(tokens)                                AS token_mean,
    min(list_min(adv))                                              AS token_min,
    max(list_max(adv))                                              AS token_max,
    avg(row_adv)                                                    AS row_mean,
    stddev_samp(row_adv)                                            AS row_std,
    count(*) FILTER (WHERE row_adv = 0) / count(row_adv)            AS zero_share,
    count(*) FILTER (WHERE row_adv > 0) / count(row_adv)            AS positive_share,
    count(*) FILTER (WHERE row_adv < 0) / count(row_adv)            AS negative_share
FROM s
GROUP BY GROUPING SETS ((batch), ())
ORDER BY grouping(batch), s.batch;
