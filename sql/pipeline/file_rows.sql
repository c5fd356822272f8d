-- file_rows: the number of rows of each file of the store (from the Parquet
-- footers; no data is read). Placeholder files: the files, as a SQL list.
SELECT file_name, num_rows
FROM parquet_file_metadata({{files}});
