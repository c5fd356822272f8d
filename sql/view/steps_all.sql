-- Every explore step of every experiment in step order: the overview's
-- curves, one series per experiment.
SELECT experiment, batch, coalesce(batch_num, dense_rank() OVER (ORDER BY batch) - 1) AS x,
       reward_mean, reward_std, adv_mean, entropy_mean, length_mean, dropped / rollouts AS filtered_share, dropped_groups
FROM steps
ORDER BY experiment, batch_num NULLS LAST, batch;
