-- Appends one source's rows to the index (rows_create.sql). Go fills in the
-- expressions for the columns the source has; the others are NULL.
INSERT INTO rows
SELECT
    {{src}},
    filename,
    file_row_number,
    coalesce({{batch}}::VARCHAR, ''),
    TRY_CAST({{batch}} AS BIGINT),
    coalesce({{task}}::VARCHAR, ''),
    TRY_CAST({{task}} AS BIGINT),
    {{run}},
    {{step}},
    {{reward}},
    {{advantage}},
    {{response_length}},
    {{drop_reason}},
    {{dropped_by}}
FROM {{source}};
