-- The overview's key numbers, one row: one pass over the rows read (as in
-- groups_create.sql), one over groups.
CREATE OR REPLACE TABLE summary AS
SELECT r.rollouts, (SELECT count(*) FROM steps) AS steps, g.groups, g.dropped_groups, r.dropped_rollouts, g.zero_std_groups,
       r.reward_mean, r.reward_std, r.adv_mean, r.length_mean
FROM (
    SELECT
        count(*)                                            AS rollouts,
        count(drop_reason)                                  AS dropped_rollouts,
        avg(reward) FILTER (WHERE isfinite(reward))         AS reward_mean,
        stddev_samp(reward) FILTER (WHERE isfinite(reward)) AS reward_std,
        avg(advantage)                                      AS adv_mean,
        avg(response_length)                                AS length_mean
    FROM {{rows}}
) r, (
    SELECT
        count(*)                                                   AS groups,
        count(*) FILTER (WHERE status <> 'kept')                   AS dropped_groups,
        count(*) FILTER (WHERE rollouts > 1 AND reward_std = 0)    AS zero_std_groups
    FROM groups
) g;
