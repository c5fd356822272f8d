#!/usr/bin/env bash
# scaling.sh — how each job scales with cores: generates one store with
# `rftpipe gen`, runs every job over it at GOMAXPROCS 1, 2, 4, 8, 16 (those
# the machine has; one process per setting, the page cache warm) and prints
# a Markdown table: per setting the wall time, the speedup over
# GOMAXPROCS=1, the CPU time (user + system) and the peak RSS; and whether
# the output bytes equal those written at GOMAXPROCS=1. SCALING_REPEAT=N
# runs each setting N times and keeps the fastest (for a loaded machine);
# SCALING_PROCS="1 4 16" names the settings instead (more than the machine's
# cores: the peak RSS and "same bytes" columns still count, not the times).
#
#   pipeline/bench/scaling.sh [TASKS]      (or: make scaling)
#
# TASKS × 8 rows of 256 response tokens with every trainer column (default
# 12500: 100,000 rows, about 0.8 GB); the store and the outputs go to
# $SCALING_DIR (default: /dev/shm where there is one, else the temp dir)
# and are removed at the end. RFTPIPE names the binary (default
# bin/rftpipe, built when missing). The default size finishes within five
# minutes on a 2-core machine.
set -euo pipefail

tasks=${1:-12500}
repeat=${SCALING_REPEAT:-1}
bin=${RFTPIPE:-bin/rftpipe}
[[ -x $bin ]] || go build -o "$bin" ./cmd/rftpipe
if [[ -z ${SCALING_DIR:-} ]]; then
	if [[ -d /dev/shm && -w /dev/shm ]]; then SCALING_DIR=/dev/shm; else SCALING_DIR=${TMPDIR:-/tmp}; fi
fi
dir=$(mktemp -d "$SCALING_DIR/rftpipe-scaling.XXXXXX")
trap 'rm -rf "$dir"' EXIT
store=$dir/store.parquet

cores=$(nproc)
settings=()
if [[ -n ${SCALING_PROCS:-} ]]; then
	read -r -a settings <<<"$SCALING_PROCS"
else
	for p in 1 2 4 8 16 32 64; do
		((p <= cores)) && settings+=("$p")
	done
fi

"$bin" gen --tasks "$tasks" --runs 8 --tasks-per-batch 256 --resp-len 256 --with all --seed 1 \
	--out "$store" --progress never >/dev/null 2>"$dir/err" || { cat "$dir/err" >&2; exit 1; }

# job NAME OUTPUT ARGS...: OUTPUT is the file whose bytes are compared
# across settings ("-" for none: inspect prints, report renders a page).
jobs=(
	"grpo|o.parquet|run --advantage-fn grpo --in $store --out $dir/o.parquet --progress never"
	"grpo+duplication|o.parquet|run --advantage-fn grpo --arg std_threshold=0 --arg duplicate_experiences=true --seed 1 --in $store --out $dir/o.parquet --progress never"
	"rloo|o.parquet|run --advantage-fn rloo --in $store --out $dir/o.parquet --progress never"
	"reinforceplusplus|o.parquet|run --advantage-fn reinforceplusplus --in $store --out $dir/o.parquet --progress never"
	"inspect|-|inspect $store"
	"convert|o.arrow|convert --progress never $store $dir/o.arrow"
	"report|-|report --progress never --in $store --out $dir/r.html"
	"loss --fn ppo|g.parquet|loss --fn ppo --in $store --grad-out $dir/g.parquet"
)

rows=$((tasks * 8))
echo "rftpipe scaling: $rows rows × 256 tokens, $(du -h "$store" | cut -f1) store, $cores CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
echo
header="| job |"
rule="|---|"
for p in "${settings[@]}"; do
	header+=" GOMAXPROCS=$p |"
	rule+="---|"
done
echo "$header same bytes |"
echo "$rule---|"

for spec in "${jobs[@]}"; do
	IFS='|' read -r name out cmd <<<"$spec"
	line="| $name |"
	t1="" same=yes sum1=""
	for p in "${settings[@]}"; do
		wall=""
		for ((i = 0; i < repeat; i++)); do
			rm -f "$dir/o.parquet" "$dir/o.arrow" "$dir/g.parquet" "$dir/r.html"
			# shellcheck disable=SC2086 # cmd is split into words on purpose
			if ! GOMAXPROCS=$p /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$bin" $cmd >/dev/null 2>"$dir/err"; then
				echo "scaling: $name at GOMAXPROCS=$p failed:" >&2
				cat "$dir/err" >&2
				exit 1
			fi
			read -r w user sys kb <"$dir/time"
			if [[ -z $wall ]] || awk -v a="$w" -v b="$wall" 'BEGIN { exit !(a < b) }'; then
				wall=$w cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }') rss=$((kb / 1024))
			fi
		done
		[[ -n $t1 ]] || t1=$wall
		line+=" $wall s $(awk -v a="$t1" -v b="$wall" 'BEGIN { printf "%.2f×", a / b }'), $cpu CPU-s, $rss MiB |"
		if [[ $out != - ]]; then
			sum=$(sha256sum "$dir/$out" | cut -d' ' -f1)
			[[ -z $sum1 ]] && sum1=$sum
			[[ $sum == "$sum1" ]] || same=NO
		fi
	done
	[[ $out == - ]] && same="(no file)"
	echo "$line $same |"
done
