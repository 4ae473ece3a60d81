#!/usr/bin/env bash
# The default job's time and frames to a mean score of 18 on Pong, one quiet run per seed.
# usage: bench/default_job.sh [SEEDS...]   (default: 0 1 2; PRECISION=auto to let the CPU choose bf16)
set -euo pipefail
out=${OUT:-bench-out}/default_job
precision=${PRECISION:-fp32}
mkdir -p "$out"
seeds=("$@")
if [[ ${#seeds[@]} -eq 0 ]]; then seeds=(0 1 2); fi
for s in "${seeds[@]}"; do
  fastrl bench time-to-score --target 18 --max-minutes 15 --set run.seed="$s" \
    --set model.precision="'$precision'" --set run.progress=false --run-dir "$out/seed$s" | tee "$out/seed$s.json"
done
echo "results: $out/seed*.json" >&2
