-- Appends the rows of one Parquet file of a source whose row numbers lie
-- in [?, ?] to the index: the filter on file_row_number reaches the reader,
-- which decodes only the row groups holding them.
INSERT INTO rows
{{select}}
WHERE file_row_number BETWEEN ? AND ?;
