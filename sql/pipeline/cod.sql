-- cod: per grouped experience (placeholder grouped, see tasks.sql), in store
-- order, what cod's iterative mode reads: the experiment (a key column of
-- every cod key, as in tasks.sql), str(eid.task), eid.run, the number
-- of true action_mask positions, and the info fields CoD's workflow writes
-- (task_rewards and the judge flags as JSON text, decoded by the pass).
SELECT experiment,
       CAST(task AS VARCHAR) AS task,
       CAST(run AS BIGINT) AS run,
       coalesce(len(list_filter(action_mask, x -> x)), 0) AS resp_len,
       json_extract_string(info, '$.exp_type') AS exp_type,
       json_extract_string(info, '$.task_idx') AS task_idx,
       json_extract_string(info, '$.hint_idx') AS hint_idx,
       CAST(json_extract(info, '$.task_rewards') AS VARCHAR) AS task_rewards,
       json_extract_string(info, '$.taskset_id') AS taskset_id,
       CAST(json_extract(info, '$.judge_format_error') AS VARCHAR) AS judge,
       CAST(json_extract(info, '$.judge_format_error_in_trajectory') AS VARCHAR) AS judge_traj,
       row_idx
FROM (SELECT *, reward IS NOT NULL AND NOT isnan(reward) AND NOT isinf(reward) AS valid FROM exps)
WHERE {{grouped}}
ORDER BY row_idx;
