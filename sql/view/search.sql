-- A page of the rollouts whose response matches: the matches are those of
-- search_source.sql for each source searched, joined by UNION ALL.
SELECT r.rowid AS id, r.batch, r.task, r.run, r.step, r.reward, r.drop_reason, m.snippet
FROM ({{matches}}) m
JOIN rows r ON r.src = m.src AND r.file = m.filename AND r.file_row = m.file_row_number
ORDER BY r.rowid
LIMIT ? OFFSET ?;
