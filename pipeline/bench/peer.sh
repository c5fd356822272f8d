#!/usr/bin/env bash
# peer.sh — rftpipe against the reference, Trinity-RFT's own algorithm code,
# measured in the same run (these machines are noisy: only ratios measured
# minutes apart count). It runs the peer harness (PEERBENCH/bench_upstream.py,
# see its README) over the reference source in $RFT_UPSTREAM_SRC (a directory
# holding trinity/) for a small suite, runs rftpipe on the same work, and
# prints a Markdown table of the ratios (reference time ÷ rftpipe time):
#
#   - grpo, rloo, reinforceplusplus advantages, N experiences × 256 response
#     tokens (N = 100,000 unless PEER_N says otherwise). The reference's time
#     is one advantage call on data already in memory (upstream Experience
#     objects for grpo, verl's DataProto for the trainer-side two); rftpipe's
#     is `rftpipe run --advantage-fn FN` end to end: a store of the same
#     shape read (`rftpipe gen`, 8 runs a task, 64 prompt tokens, responses of
#     128 to 256 tokens), the output written and synced.
#   - ppo and m2po losses, forward + gradient over 1024 × 4096 tokens: the
#     reference's torch CPU forward + backward (float32) against `rftpipe
#     bench loss` (float64). The reference (Trinity-RFT 0.5) has no m2po:
#     its row is rftpipe's m2po against the reference's ppo.
#
# Each case runs PEER_REPEAT times (default 3; the reference's losses, 5)
# and the table gives the fastest run, the least disturbed on a shared
# machine: wall time, and for rftpipe's store jobs also CPU time (user +
# system, /usr/bin/time; the reference's calls give wall time alone).
# Ratios above 1 mean rftpipe is faster.
#
#   RFT_UPSTREAM_SRC=DIR pipeline/bench/peer.sh      (or: make bench)
#
# Needs Debian's /usr/bin/python3 with python3-torch and python3-pandas
# (PEER_PYTHON names another); without the source or torch it prints one
# line saying why and exits 0. RFTPIPE names the binary (default
# bin/rftpipe, built when missing); the store and outputs go to $PEER_DIR
# (default: /dev/shm where there is one, else the temp dir).
set -euo pipefail

bin=${RFTPIPE:-bin/rftpipe}
py=${PEER_PYTHON:-/usr/bin/python3}
harness=${PEERBENCH:-../shared/peerbench}/bench_upstream.py
n=${PEER_N:-100000}
repeat=${PEER_REPEAT:-3}

skip() {
	echo "peer: skipped, $*"
	exit 0
}
[[ -n ${RFT_UPSTREAM_SRC:-} ]] || skip "RFT_UPSTREAM_SRC is unset (the directory holding the reference's trinity/ source)"
[[ -d $RFT_UPSTREAM_SRC/trinity ]] || skip "$RFT_UPSTREAM_SRC holds no trinity/ directory"
[[ -f $harness ]] || skip "no peer harness at $harness (PEERBENCH names its directory)"
"$py" -c 'import torch, pandas' 2>/dev/null || skip "$py cannot import torch and pandas (apt-get install python3-torch python3-pandas)"

[[ -x $bin ]] || go build -o "$bin" ./cmd/rftpipe
if [[ -z ${PEER_DIR:-} ]]; then
	if [[ -d /dev/shm && -w /dev/shm ]]; then PEER_DIR=/dev/shm; else PEER_DIR=${TMPDIR:-/tmp}; fi
fi
dir=$(mktemp -d "$PEER_DIR/rftpipe-peer.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "peer: the reference's suite (a few minutes; its log: $dir/reference.log while it runs)"
if ! "$py" "$harness" "$RFT_UPSTREAM_SRC" --suite adv,loss --adv-n "$n" --adv-l 256 \
	--adv-variants grpo,rloo,reinforceplusplus --losses ppo --loss-shapes 1024x4096 \
	--repeats "$repeat" --loss-repeats 5 --max-retries 1 --out "$dir/reference.json" >"$dir/reference.log" 2>&1; then
	cat "$dir/reference.log" >&2
	echo "peer: the reference's harness failed (log above)" >&2
	exit 1
fi

store=$dir/store.parquet
"$bin" gen --tasks $((n / 8)) --runs 8 --tasks-per-batch 256 --prompt-len 64 --resp-len 128:256 --seed 1 \
	--out "$store" --progress never >/dev/null 2>"$dir/err" || { cat "$dir/err" >&2; exit 1; }

# the least of the numbers on stdin
least() { sort -g | head -1; }

# Each line of $dir/rftpipe.tsv: case, wall seconds, CPU seconds ("-": not measured).
for fn in grpo rloo reinforceplusplus; do
	: >"$dir/wall" && : >"$dir/cpu"
	for ((i = 0; i < repeat; i++)); do
		rm -f "$dir/o.parquet"
		if ! /usr/bin/time -f '%e %U %S' -o "$dir/time" "$bin" run --advantage-fn "$fn" --in "$store" \
			--out "$dir/o.parquet" --progress never >/dev/null 2>"$dir/err"; then
			cat "$dir/err" >&2
			exit 1
		fi
		read -r w user sys <"$dir/time"
		echo "$w" >>"$dir/wall"
		awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }' >>"$dir/cpu"
	done
	printf '%s\t%s\t%s\n' "$fn" "$(least <"$dir/wall")" "$(least <"$dir/cpu")" >>"$dir/rftpipe.tsv"
done
# bench loss reports the median of its 5 runs in one process; the fastest
# of PEER_REPEAT processes counts.
for fn in ppo m2po; do
	for ((i = 0; i < repeat; i++)); do
		"$bin" bench loss --fn "$fn" --shape 1024x4096 --runs 5 --format json |
			"$py" -c 'import json, sys; print(json.load(sys.stdin)["median_ms"] / 1e3)'
	done >"$dir/wall"
	printf '%s\t%s\t-\n' "$fn" "$(least <"$dir/wall")" >>"$dir/rftpipe.tsv"
done

"$py" - "$dir/reference.json" "$dir/rftpipe.tsv" "$n" <<'EOF'
import json, sys

ref = json.load(open(sys.argv[1]))
ours = {}
for line in open(sys.argv[2]):
    case, wall, cpu = line.split("\t")
    ours[case] = (float(wall), None if cpu.strip() == "-" else float(cpu))
n = int(sys.argv[3])
adv = {r["variant"]: r["advantage_seconds"]["min"] for r in ref.get("advantage", []) if "error" not in r}
loss = {r["loss"]: r["fwdbwd"]["seconds"]["min"] for r in ref.get("loss", []) if "error" not in r}
m = ref.get("machine", {})
print(f"\nrftpipe against the reference (Trinity-RFT, torch {m.get('torch')}, {ref['args'].get('threads')} threads) "
      f"in one run, {m.get('nproc')} CPUs ({m.get('cpu_model')}), load {m.get('loadavg_start', [0])[0]:.1f}; "
      "fastest runs; ratio = reference ÷ rftpipe (above 1: rftpipe faster); advantages: the reference's call on "
      "data in memory against rftpipe's job from store to store; losses: forward + gradient\n")
print("| work | reference s | rftpipe wall s | rftpipe CPU s | ratio (wall) | ratio (CPU) |")
print("|---|---|---|---|---|---|")

def row(name, r, case):
    wall, cpu = ours[case]
    if r is None:
        print(f"| {name} | — | {wall:.3f} | | — | |")
        return
    c = f"{cpu:.3f}" if cpu is not None else ""
    rc = f"{r / cpu:.2f}×" if cpu is not None else ""
    print(f"| {name} | {r:.3f} | {wall:.3f} | {c} | {r / wall:.2f}× | {rc} |")

for fn in ("grpo", "rloo", "reinforceplusplus"):
    row(f"{fn} advantages, {n:,} × 256", adv.get(fn), fn)
row("ppo loss, 1024 × 4096", loss.get("ppo"), "ppo")
row("m2po loss, 1024 × 4096 (against the reference's ppo: it has no m2po)", loss.get("ppo"), "m2po")
EOF
