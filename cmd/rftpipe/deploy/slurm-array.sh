#!/bin/sh
# A sharded rftpipe run as a Slurm job array on object storage: task I reads
# s3://rollouts/grpo/ and writes s3://rftpipe-runs/grpo/part-I.parquet and
# s3://rftpipe-runs/grpo/_metrics/part-I.json. Keep the array size equal to
# --shards. Credentials come from the environment sbatch passes on
# (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; AWS_ENDPOINT_URL and
# AWS_S3_FORCE_PATH_STYLE=true for MinIO or Ceph) or from ~/.aws/credentials
# (AWS_PROFILE). sbatch slurm-array.sh; when every task is done:
# rftpipe merge-metrics s3://rftpipe-runs/grpo --prom s3://rftpipe-runs/grpo/metrics.prom
#SBATCH --job-name=rftpipe-grpo
#SBATCH --array=0-7
#SBATCH --cpus-per-task=2
#SBATCH --mem=2G
#SBATCH --export=ALL
set -eu
rftpipe run --algorithm grpo --in s3://rollouts/grpo/ --out s3://rftpipe-runs/grpo --shards 8 --shard "$SLURM_ARRAY_TASK_ID" --progress never
