-- A page of explore steps, of one experiment (? = '' takes any), sorted by
-- the column the page asks for.
SELECT experiment, batch, groups, rollouts, reward_mean, reward_std, adv_mean, entropy_mean, length_mean, dropped, dropped_groups
FROM steps
WHERE ? = '' OR experiment = ?
ORDER BY {{order}}
LIMIT ? OFFSET ?;
