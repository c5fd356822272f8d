package store

// HeapLimit is the soft limit on the Go heap for a process that streams a
// store (the rftpipe commands that stream set it, unless GOMEMLIMIT sets
// another). The collector then works harder near it instead of letting the
// heap grow to twice its live size: the live heap of a run is the batches in
// flight plus a few bytes of statistics per row (package pipeline) (~0.35 GiB at 1M rows,
// ~0.55 GiB at 10M), so the limit keeps the RSS of a 10M-row GRPO run with
// duplication under 1 GiB, where it would reach ~1.8 GiB.
const HeapLimit = 768 << 20
