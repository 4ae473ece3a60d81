#!/usr/bin/env bash
# Crafter at the benchmark's budget: configs/crafter_ppo.toml for 1M env steps, one quiet run per seed, then
# `fastrl bench crafter` on each run (the score, the 22 success rates, a bar chart) and Crafter alone against the
# engine (`--speed`). The machine's lscpu is kept beside the figures.
# usage: bench/crafter.sh [SEEDS...]   (default: 0 1; PRECISION=auto to let the CPU choose bf16)
set -euo pipefail
out=${OUT:-bench-out}/crafter
precision=${PRECISION:-fp32}
mkdir -p "$out"
lscpu > "$out/lscpu.txt"
seeds=("$@")
if [[ ${#seeds[@]} -eq 0 ]]; then seeds=(0 1); fi
fastrl bench crafter --speed configs/crafter_ppo.toml --seconds 10 | tee "$out/speed.json"
for s in "${seeds[@]}"; do
  fastrl train configs/crafter_ppo.toml --set run.seed="$s" --set model.precision="'$precision'" \
    --set run.progress=false --run-dir "$out/seed$s" > "$out/seed$s.train.json"
  fastrl bench crafter "$out/seed$s" --out "$out/seed$s.png" | tee "$out/seed$s.json"
done
echo "results: $out/seed*.json, $out/seed*.png, $out/speed.json" >&2
