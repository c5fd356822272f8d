-- file: the rows of one Parquet file of the store, row_idx = the rows of the
-- files before it (placeholder offset) + the row's index in the file.
SELECT {{offset}} + file_row_number AS row_idx, *
FROM read_parquet({{file}}, file_row_number = true)
