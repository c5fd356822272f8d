-- Dropped rows per reason and dropping stage, computed once when the store
-- is indexed.
CREATE TEMP TABLE reasons AS
SELECT drop_reason, dropped_by, count(*) AS rows, count(DISTINCT (batch, task)) AS groups
FROM rows
WHERE drop_reason IS NOT NULL
GROUP BY ALL;
