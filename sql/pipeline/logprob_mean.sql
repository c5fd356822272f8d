-- logprob_mean: per grouped experience (placeholder grouped, see tasks.sql),
-- in store order, the
-- mean of its logprobs over ALL positions (action_mask not applied), as
-- float32 like upstream's torch mean: the quantity grpo's rank_penalty (and
-- the correct_bias strategy) rank the rows of a group by. A null list gives
-- NaN (ranked as NaN).
SELECT coalesce(CAST(list_avg(logprobs) AS FLOAT), 'NaN'::FLOAT) AS q
FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
WHERE {{grouped}}
ORDER BY row_idx;
