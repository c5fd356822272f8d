-- The rollouts of one Parquet file of a source whose row number lies in
-- [?, ?] and whose response matches, in id order, at most ? of them. The
-- match is a condition on the response (text, regular expression or
-- token-id sequence, with its parameters), the snippet what the results
-- show of it; Go adds the id of the file's row 0 to its row number. The
-- index rows joined are those of the same ids, [?, ?].
SELECT id, r.experiment, r.batch, r.task, r.run, r.step, r.reward, r.drop_reason, m.snippet
FROM (
    SELECT {{first}} + file_row_number AS id, {{snippet}} AS snippet
    FROM {{source}}
    WHERE file_row_number BETWEEN ? AND ? AND {{match}}
) m
JOIN (SELECT rowid AS id, * FROM rows WHERE rowid BETWEEN ? AND ?) r USING (id)
ORDER BY id
LIMIT ?;
