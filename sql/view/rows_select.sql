-- One source's rows as the index holds them (rows_create.sql), from a
-- read_parquet call with file_row_number. Go fills in the
-- expressions for the columns the source has; the others are typed NULLs.
-- Read before the index is built, with the file and the per-token lists'
-- advantage, entropy and response_length NULL, it reads no list and is quick.
SELECT
    {{src}}                           AS src,
    {{file}}                          AS file,
    file_row_number                   AS file_row,
    coalesce({{experiment}}, '')      AS experiment,
    coalesce({{batch}}::VARCHAR, '')  AS batch,
    TRY_CAST({{batch}} AS BIGINT)     AS batch_num,
    coalesce({{task}}::VARCHAR, '')   AS task,
    TRY_CAST({{task}} AS BIGINT)      AS task_num,
    {{run}}                           AS run,
    {{step}}                          AS step,
    {{reward}}                        AS reward,
    {{advantage}}                     AS advantage,
    {{entropy}}                       AS entropy,
    {{response_length}}               AS response_length,
    {{drop_reason}}                   AS drop_reason,
    {{dropped_by}}                    AS dropped_by
FROM {{source}}
