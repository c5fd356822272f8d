// Package advantage computes the advantage functions of Trinity-RFT
// in memory, without I/O, in the shape the
// streaming pipeline needs.
//
// # Two families
//
// Pipeline-side fns (grpo, step_wise_grpo, opmd, asymre, rec, reinforce, and
// the 0.6 line's gigpo and cod, and gdpo) and the filters
// (reward_std_filter, invalid_reward_filter) only read per-row scalars: the
// reward, the grouping of rows by tid (and rid), and what a fn needs besides
// (the mean log-prob for the rank penalty, eid.step, gigpo's info step
// rewards and anchor states, gdpo's reward components, CoD's info fields:
// Needs). They
// return a Plan: per input row a keep flag and a float32 score, plus the
// duplicate blocks to append. The token columns are never touched: the
// pipeline writes advantages = returns = Score[row] × action_mask while it
// streams the rows (Broadcast; cod's iterative mode has returns of its own,
// Plan.Return). This split keeps the per-experience work of
// the stage to a handful of scalar operations.
//
// Trainer-side fns (ppo, grpo_verl, reinforceplusplus, remax, rloo,
// opmd_verl, asymre_verl, on_policy_distill, jsd, clipb, clipv) work on a
// ragged token batch (TokenBatch: flat columns + agg.Rows) and return token
// columns (TokenResult).
//
// # Grouping and order
//
// Groups is a CSR partition of the input rows: group g holds input row indices
// Rows[Off[g]:Off[g+1]], ascending; groups are numbered in first-appearance
// order. GroupBy builds it from rendered keys (TID, RID, SID render ids as
// strings, so task 0 and task "0" are one group); GroupByIDs builds it from
// dense group ids, e.g. computed by DuckDB. Plan.Output lists the rows in
// upstream's output order (groups in first-appearance order, rows in input
// order inside a group, duplicates last); a streaming writer may instead keep
// input order and use Keep/Score directly.
//
// # Randomness
//
// Upstream draws from unseeded global RNGs (duplication, REC's balance drop,
// the old duplicate_informative refill). Here every draw comes from RNG, a
// SplitMix64 generator seeded by Input.Seed, so a rerun with the same input
// and seed produces the same Plan on every platform and Go version.
//
// # Args and registry
//
// Fns are looked up by name in a Registry (Default: every built-in fn and
// filter, one table in registry.go, built once). Args use stages/args with
// upstream's two layers: no dict means default_args(), a dict falls back to
// the constructor defaults for the keys it omits (clipv mu: 8.5 vs 2.0,
// Unknown names and bad values are errors wrapping schema.ErrBadInput
// that list what is valid.
//
// # Quirks
//
// Upstream behaviour is matched by default (quirks.md); fixes are opt-in
// args: rank_penalty_adjusted_score, singleton_group_policy (Q-02,
// Q-03), last_by_eid_step, true_reward_mean, dr_grpo (no std
// normalisation, which upstream lacks). REC on a one-experience group is an
// error by default, as upstream fails there; singleton_group_policy=unit gives
// the recommended defined behaviour.
package advantage
