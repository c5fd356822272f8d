// Package rollout is verl's rollout–training mismatch correction
// (verl/trainer/ppo/rollout_corr_helper.py at verl 1dda039b), exact to its
// numbers: importance-sampling weights per token or per sequence, truncated
// at a cap (TIS) or set to 0 outside "lower_upper" bounds (IcePop), with
// optional batch normalisation, the eleven rejection-sampling options (Options) and their
// combinations, the off-policy diagnostics, and the assembled call with its
// metrics under verl's names ("rollout_corr/…"). The f32 fraction metrics
// are float32(k)/float32(n) exactly, as verl's bool.float().mean().
//
// # Configuration
//
// Config is the algorithm.rollout_correction section (Parse reads verl's
// keys; Presets are verl's class-method presets, selected by the key
// "preset"). Defaults match verl's YAML: no weights, no rejection, metrics
// only. Two quirks are reproduced by default and fixed on request:
// ratio_bounds (RC-01, k1 bounds on old/rollout instead of rollout/old) and
// zero_masked_weights (RC-06, weight 0 instead of NaN at masked positions
// whose log ratio is NaN).
//
// # Streaming
//
// The stage runs over record batches (Input: flat per-token old and rollout
// log-probs and the mask, rows laid out by agg.Rows) without holding the
// store:
//
//   - first pass, only when NeedsFirstPass (rollout_is_batch_normalize):
//     Observe adds each batch's applied-weight sums to a Norm — the batch
//     mean that divides every weight is a whole-store statistic;
//   - second pass: Apply writes each batch's weights and rejection-sampled
//     mask and adds its metric sums to an Acc; everything it writes is
//     per-row work (a sequence weight or a row rejection depends on its own
//     row only);
//   - Metrics turns the Acc (and Norm) into the metrics of the whole store:
//     every metric is a sum, a count, an extremum or a mergeable variance,
//     so the streamed metrics are those of the store taken as one batch.
//     A store without any valid token is verl's error, reported here.
//
// Correct does both passes on one in-memory batch (verl's
// compute_rollout_correction_and_rejection_mask); OffPolicyMetrics is
// compute_offpolicy_metrics.
//
// # Output columns
//
// In decoupled mode (bypass_mode false) a job writes the weights as the
// column rollout_is_weights, list<float32> aligned with the response
// (only when weights are computed), and the rejection-sampled mask in place
// of action_mask, as verl replaces response_mask before advantages are
// computed; the policy losses of package loss then read both. In bypass
// mode nothing is written: the bypass_mode loss runs the correction itself
// on the current log-prob versus the rollout log-prob, record batch by
// record batch after a statistics pass (stages/loss Stream).
package rollout
