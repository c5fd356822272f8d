-- The viewer's index: one row per experience of the store (src 0) and of its
-- rejected-rows store (src 1), in store order, so that rowid is the
-- experience's id in the page's links. Only scalars: the text and the
-- per-token lists are read from the store's files when a page shows them
-- (file and file_row find the row). Filled in the background after the
-- viewer starts (rows_insert.sql).
CREATE TABLE rows (
    src             TINYINT,  -- 0: the store, 1: the --rejected store
    file            INTEGER,  -- the Parquet file holding the row: its number among the source's files, from 0
    file_row        BIGINT,   -- its row number in the file
    experiment      VARCHAR,  -- the experiment of an experience table ('' when absent)
    batch           VARCHAR,  -- the explore step ('' when absent)
    batch_num       BIGINT,   -- batch as a number, when it is one (order)
    task            VARCHAR,
    task_num        BIGINT,
    run             BIGINT,
    step            BIGINT,
    reward          DOUBLE,
    advantage       DOUBLE,   -- the mean over the response's action-mask tokens
    entropy         DOUBLE,   -- the mean entropy over them
    response_length BIGINT,
    drop_reason     VARCHAR,  -- why the row was dropped (null: kept)
    dropped_by      VARCHAR   -- the operator or advantage fn that dropped it
);
