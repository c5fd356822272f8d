-- Appends the rows of one Parquet file of a source to the index
-- (rows_select.sql over the file).
INSERT INTO rows
{{select}};
