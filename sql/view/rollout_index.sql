-- One rollout of the index by id.
SELECT src, file, file_row, experiment, batch, task, run, step, reward, advantage, response_length, drop_reason, dropped_by
FROM rows
WHERE rowid = ?;
