-- The overview's key numbers, one row, computed once when the store is
-- indexed.
CREATE TEMP TABLE summary AS
SELECT
    (SELECT count(*) FROM rows)                                                  AS rollouts,
    (SELECT count(*) FROM steps)                                                 AS steps,
    (SELECT count(*) FROM groups)                                                AS groups,
    (SELECT count(*) FROM groups WHERE status <> 'kept')                         AS dropped_groups,
    (SELECT count(*) FROM rows WHERE drop_reason IS NOT NULL)                    AS dropped_rollouts,
    (SELECT count(*) FROM groups WHERE rollouts > 1 AND reward_std = 0)          AS zero_std_groups,
    (SELECT avg(reward) FROM rows WHERE isfinite(reward))                        AS reward_mean,
    (SELECT stddev_samp(reward) FROM rows WHERE isfinite(reward))                AS reward_std,
    (SELECT avg(advantage) FROM rows)                                            AS adv_mean,
    (SELECT avg(response_length) FROM rows)                                      AS length_mean;
