-- One source's scalars as the index's first pass reads them: its ids as
-- the store has them (groups_create.sql makes them text, per group;
-- text ids coalesced to '' here, as the index holds them), no row number
-- and no list. Go fills in the expressions as for rows_select.sql.
SELECT
    {{experiment}}      AS experiment,
    {{batch}}           AS batch,
    {{task}}            AS task,
    {{reward}}          AS reward,
    {{advantage}}       AS advantage,
    {{entropy}}         AS entropy,
    {{response_length}} AS response_length,
    {{drop_reason}}     AS drop_reason,
    {{dropped_by}}      AS dropped_by
FROM {{source}}
