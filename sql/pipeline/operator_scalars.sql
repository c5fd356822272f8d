-- operator_scalars: per grouped experience (placeholder grouped, see
-- tasks.sql), in store order, what the experience operators read: whether
-- the metrics JSON has the key of placeholder metric (a JSON path literal,
-- '$."key"'; FALSE when the operators read none or the store has no metrics
-- column) and its value as a number, whether truncate_status is
-- 'response_truncated' (placeholder truncated: the expression, FALSE without
-- the column), the response length (placeholder resp_len: the number of
-- action_mask positions, else 0), and info.returns_norm (placeholder info:
-- the info column, NULL without it) and the model version (placeholder
-- model_version: the column, else NULL); row_idx locates a bad value.
-- The result has no nulls (it is read by columns): an absent or non-numeric
-- value is NaN (a model version -1), and bad_m, bad_rn say a value is there
-- but not a number.
WITH s AS (
    SELECT coalesce({{has_metric}}, FALSE) AS has_m,
           {{metric}} AS m,
           coalesce({{truncated}}, FALSE) AS truncated,
           {{resp_len}} AS resp_len,
           coalesce(json_exists({{info}}, '$.returns_norm'), FALSE) AS has_rn,
           TRY_CAST(json_extract_string({{info}}, '$.returns_norm') AS DOUBLE) AS rn,
           CAST({{model_version}} AS BIGINT) AS mv,
           row_idx
    FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
    WHERE {{grouped}}
)
SELECT has_m,
       coalesce(m, 'NaN'::DOUBLE) AS m,
       has_m AND m IS NULL AS bad_m,
       truncated,
       CAST(resp_len AS BIGINT) AS resp_len,
       has_rn,
       coalesce(rn, 'NaN'::DOUBLE) AS rn,
       has_rn AND rn IS NULL AS bad_rn,
       coalesce(mv, -1) AS mv,
       row_idx
FROM s
ORDER BY row_idx;
