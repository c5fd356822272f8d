-- The rollouts of one group (an experiment's batch and task), in run and
-- step order, with where to read their text and tokens.
SELECT rowid AS id, src, file, file_row, run, step, reward, advantage, response_length, drop_reason, dropped_by
FROM rows
WHERE experiment = ? AND batch = ? AND task = ?
ORDER BY run NULLS LAST, step NULLS LAST, rowid;
