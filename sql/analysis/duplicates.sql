-- Duplicated rows (written by grpo's duplicate_experiences) per explore batch, with a final row for the whole store.
-- A duplicated row has duplicate_of set: the input row index it copies.
-- groups counts tids (batch/task, within an experiment where the store has
-- one); duplicated_groups the tids holding at least one duplicated row;
-- sources the distinct rows that were copied.
-- requires: batch, task, duplicate_of
SELECT
    CASE WHEN grouping(batch) = 1 THEN 'all' ELSE batch::VARCHAR END         AS batch,
    count(*)                                                                AS rows,
    count(duplicate_of)                                                     AS duplicated_rows,
    count(duplicate_of) / count(*)                                          AS duplicated_share,
    count(DISTINCT ({{group_key}}))                                         AS groups,
    count(DISTINCT ({{group_key}})) FILTER (WHERE duplicate_of IS NOT NULL) AS duplicated_groups,
    count(DISTINCT duplicate_of)                                            AS sources
FROM experiences
GROUP BY GROUPING SETS ((batch), ())
ORDER BY grouping(batch), experiences.batch;
