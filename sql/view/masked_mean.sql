-- The mean of a per-token list over the action-mask tokens: its elements
-- whose action_mask element is true (not false, not NULL), none past the
-- shorter of the two lists, NULL elements skipped, NULL when none is left.
-- The values of list_avg(list_filter(list, (a, k) -> action_mask[k])), the
-- same elements summed in the same order, without a lambda indexing
-- action_mask per element; a mask covering the list with no false or NULL
-- element (a single-turn response's) keeps it whole, read once.
CASE
    WHEN len(action_mask) >= len({{list}}) AND list_count(action_mask) = len(action_mask) AND NOT list_contains(action_mask, false)
        THEN list_avg({{list}})
    ELSE list_avg(list_transform(list_zip({{list}}, action_mask, true), p -> CASE WHEN p[2] THEN p[1] END))
END
