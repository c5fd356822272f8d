-- anchors: per grouped experience (placeholder grouped, see tasks.sql), in
-- store order, the index of its anchor state — the string rendering of its
-- info value at placeholder path (a JSON path literal, '$."key"'), so the
-- integer 7 and the string "7" are one state, as upstream's str(hash) —
-- numbered in first-appearance order over the whole experiment (gigpo's
-- anchors span every batch, Q-53, never experiments: the experiment, as in
-- tasks.sql, is a second key column); NULL where the key is absent or null.
WITH k AS (
    SELECT row_idx, experiment AS e, json_extract_string(info, {{path}}) AS h
    FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
    WHERE {{grouped}}
),
ids AS (
    SELECT e, h, row_number() OVER (ORDER BY min(row_idx)) - 1 AS id
    FROM k
    WHERE h IS NOT NULL
    GROUP BY e, h
)
SELECT ids.id
FROM k LEFT JOIN ids USING (e, h)
ORDER BY k.row_idx;
