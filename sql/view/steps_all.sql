-- Every explore step in step order: the overview's curves.
SELECT batch, coalesce(batch_num, row_number() OVER (ORDER BY batch) - 1) AS x, reward_mean, reward_std, adv_mean, length_mean, dropped_groups
FROM steps
ORDER BY batch_num NULLS LAST, batch;
