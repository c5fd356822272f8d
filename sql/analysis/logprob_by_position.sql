-- Token-level rollout log-probabilities by response position bucket: tokens, mean logprob, mean probability, low-confidence share.
-- Only tokens whose action_mask is set count (tool and environment tokens of
-- multi-turn rows do not). Positions are 0-based response positions;
-- bucket b holds positions [b * bucket, (b + 1) * bucket). low_share is the
-- share of tokens with logprob < ln(0.1) (probability under 10 %).
-- requires: logprobs, action_mask
-- var: bucket = 32 integer in [1,1000000]: width of a position bucket, in tokens
WITH t AS (
    SELECT
        unnest(logprobs)              AS lp,
        unnest(action_mask)           AS m,
        unnest(range(len(logprobs)))  AS pos
    FROM experiences
), b AS (
    SELECT lp, pos // getvariable('bucket')::BIGINT AS bucket, getvariable('bucket')::BIGINT AS w
    FROM t
    WHERE m AND lp IS NOT NULL
)
SELECT
    bucket * any_value(w)                           AS pos_from,
    (bucket + 1) * any_value(w) - 1                 AS pos_to,
    count(*)                                        AS tokens,
    avg(lp)                                         AS mean_logprob,
    avg(exp(lp))                                    AS mean_prob,
    count(*) FILTER (WHERE lp < ln(0.1)) / count(*) AS low_share
FROM b
GROUP BY bucket
ORDER BY bucket;
