-- step_rewards: per grouped experience (placeholder grouped, see tasks.sql),
-- in store order, whether its info JSON has the key of placeholder path (a
-- JSON path literal, '$."key"') and the value there as a number: gigpo's
-- per-step reward, as upstream's float(value): a boolean is 1 or 0, a
-- string such as "nan" or "inf" its number. A present key whose value is not
-- a number (null included: float(None) raises) gives has = true and a NULL
-- value, which the pass reports at row_idx.
SELECT json_exists(info, {{path}}) AS has,
       CASE WHEN json_type(info, {{path}}) = 'BOOLEAN' THEN CAST(json_extract(info, {{path}}) AS BOOLEAN)::DOUBLE
            ELSE TRY_CAST(json_extract_string(info, {{path}}) AS DOUBLE) END AS v,
       row_idx
FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
WHERE {{grouped}}
ORDER BY row_idx;
