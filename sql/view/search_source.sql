-- The matches of one source, for search.sql: the match is a condition on
-- the response (text, regular expression or token-id sequence, with one
-- parameter), the snippet what the results show of it.
SELECT {{src}} AS src, filename, file_row_number, {{snippet}} AS snippet
FROM {{source}}
WHERE {{match}}
