-- Dropped rows per reason and dropping stage, most first.
SELECT drop_reason, dropped_by, count(*) AS rows, count(DISTINCT (batch, task)) AS groups
FROM rows
WHERE drop_reason IS NOT NULL
GROUP BY ALL
ORDER BY rows DESC, drop_reason, dropped_by;
