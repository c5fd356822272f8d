-- file: the rows of one Parquet file of the store, row_idx = the rows of the
-- files before it (placeholder offset) + the row's index in the file, and
-- the columns the group pass reads, under rftpipe's names (placeholder
-- columns: "score" AS "reward", … for a store naming them otherwise).
SELECT {{offset}} + file_row_number AS row_idx, {{columns}}
FROM read_parquet({{file}}, file_row_number = true)
