-- null_ids: the first row in store order (row_idx; -1 when there is none)
-- whose batch, task, run or step is null. The run grouping (runs.sql)
-- cannot place such a row: the pipeline locates it in its file and reports
-- its null id, as the streaming pass's validation would.
SELECT coalesce(min(row_idx), -1) AS row_idx
FROM exps
WHERE batch IS NULL OR task IS NULL OR run IS NULL OR step IS NULL;
