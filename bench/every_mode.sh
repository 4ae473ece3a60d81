#!/usr/bin/env bash
# Every mode's Pong config to a mean score of 18 within 30 minutes of training, one quiet run per seed.
# usage: bench/every_mode.sh [SEEDS...]   (default: 0 1; PRECISION=auto to let the CPU choose bf16)
set -euo pipefail
out=${OUT:-bench-out}/every_mode
precision=${PRECISION:-fp32}
mkdir -p "$out"
seeds=("$@")
if [[ ${#seeds[@]} -eq 0 ]]; then seeds=(0 1); fi
for config in pong_sync_a2c pong_hts_a2c pong_impala pong_gala; do
  for seed in "${seeds[@]}"; do
    fastrl bench time-to-score "configs/$config.toml" --target 18 --max-minutes 30 --set run.seed="$seed" \
      --set model.precision="'$precision'" --set run.progress=false --run-dir "$out/$config-seed$seed" \
      | tee "$out/$config-seed$seed.json"
  done
done
fastrl plot "$out"/*-seed0 --x seconds --out "$out/pong_modes.png"
echo "results: $out/*.json, figure: $out/pong_modes.png" >&2
