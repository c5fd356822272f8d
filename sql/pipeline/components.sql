-- components: per grouped experience (placeholder grouped, see tasks.sql), in
-- store order, its reward components: placeholder cols is the list of the
-- store's reward_<name> columns, each cast to DOUBLE with a null as NaN (gdpo;
-- the result has no nulls: it is read by columns).
SELECT {{cols}}
FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
WHERE {{grouped}}
ORDER BY row_idx;
