#!/bin/sh
# A sharded rftpipe run as a Slurm job array: task I writes out/part-I.parquet
# and out/_metrics/part-I.json. Keep the array size equal to --shards.
# sbatch slurm-array.sh; when every task is done:
# rftpipe merge-metrics out --prom out/metrics.prom
#SBATCH --job-name=rftpipe-grpo
#SBATCH --array=0-7
#SBATCH --cpus-per-task=2
#SBATCH --mem=2G
set -eu
rftpipe run --algorithm grpo --in rollouts --out out --shards 8 --shard "$SLURM_ARRAY_TASK_ID" --progress never
