-- Rows of one Parquet file of a source by row number, every column: the
-- filter on file_row_number reaches the reader, which decodes only the row
-- groups holding them.
SELECT *
FROM {{file}}
WHERE file_row_number BETWEEN ? AND ?;
