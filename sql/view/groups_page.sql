-- A page of one step's groups, of one experiment (? = '' takes any),
-- filtered by status (? = '' takes any) and by a drop reason or stage
-- containing the text given, sorted as asked.
SELECT experiment, task, rollouts, dropped, reward_mean, reward_std, adv_mean, adv_min, adv_max, length_mean, status, dropped_by, drop_reason
FROM groups
WHERE batch = ?
  AND (? = '' OR experiment = ?)
  AND (? = '' OR status = ?)
  AND (? = '' OR contains(drop_reason, ?) OR contains(dropped_by, ?))
ORDER BY {{order}}
LIMIT ? OFFSET ?;
