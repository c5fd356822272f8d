-- exps: the input store as DuckDB sees it, one row per experience, with
-- row_idx = the row's index in the whole store (files in reading order, rows
-- in file order), and experiment = the row's experiment as text ('' for a
-- store without the column, or a null): the key column that keeps groups
-- within one experiment. Everything else in this folder reads this view.
--
-- Placeholder files: the store's files as a SQL UNION ALL of file.sql, one per file,
-- each with its row offset. (A join of read_parquet's filename column with
-- the offsets defeats DuckDB's projection pushdown: it then reads every
-- column, token lists included — 100× slower.)
CREATE OR REPLACE TEMP VIEW exps AS
{{files}};
