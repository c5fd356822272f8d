-- Rows of one Parquet file of a source by row number, with the columns
-- asked for (* for all): the filter on file_row_number reaches the reader,
-- which decodes only the row groups holding them.
SELECT file_row_number, {{columns}}
FROM {{file}}
WHERE file_row_number BETWEEN ? AND ?;
