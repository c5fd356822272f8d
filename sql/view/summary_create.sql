-- The overview's key numbers, one row: all rows' statistics
-- (aggregates_create.sql) and the groups'.
CREATE OR REPLACE TABLE summary AS
SELECT r.rollouts, (SELECT count(*) FROM steps) AS steps, g.groups, g.dropped_groups, r.dropped AS dropped_rollouts, g.zero_std_groups,
       r.reward_mean, r.reward_std, r.adv_mean, r.length_mean
FROM (SELECT * FROM aggregates WHERE level = 7) r, (
    SELECT
        count(*)                                                   AS groups,
        count(*) FILTER (WHERE status <> 'kept')                   AS dropped_groups,
        count(*) FILTER (WHERE rollouts > 1 AND reward_std = 0)    AS zero_std_groups
    FROM groups
) g;
