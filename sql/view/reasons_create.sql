-- Dropped rows per reason and dropping stage, computed once at start over
-- the rows read (as in groups_create.sql).
CREATE TABLE reasons AS
SELECT drop_reason, dropped_by, count(*) AS rows, count(DISTINCT (experiment, batch, task)) AS groups
FROM {{rows}}
WHERE drop_reason IS NOT NULL
GROUP BY ALL;
