-- A page of explore steps, sorted by the column the page asks for.
SELECT batch, groups, rollouts, reward_mean, reward_std, adv_mean, length_mean, dropped, dropped_groups
FROM steps
ORDER BY {{order}}
LIMIT ? OFFSET ?;
