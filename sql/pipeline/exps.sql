-- exps: the input store as DuckDB sees it, one row per experience, with
-- row_idx = the row's index in the whole store (files in reading order, rows
-- in file order). Everything else in this folder reads this view.
--
-- {{files}}: the store's Parquet files, in reading order, as a SQL list.
-- read_parquet's file_row_number is per file; parquet_file_metadata gives
-- each file's row count, so a file's offset is the rows of the files before
-- it. Only the columns a later query names are read (projection pushdown).
CREATE OR REPLACE TEMP VIEW exps AS
WITH files AS (
    SELECT file_name,
           coalesce(sum(num_rows) OVER (ORDER BY list_position({{files}}, file_name)
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS row_offset
    FROM parquet_file_metadata({{files}})
)
SELECT f.row_offset + e.file_row_number AS row_idx, e.*
FROM read_parquet({{files}}, filename = true, file_row_number = true) AS e
JOIN files AS f ON e.filename = f.file_name;
