#!/usr/bin/env bash
# Connect Four by self-play (docs/multi-agent.md): 15 minutes of training, then 1,000 games against a uniformly
# random legal player and 1,000 against the one-step look-ahead heuristic, the policy in each seat half the time.
# One quiet run per seed. usage: bench/connect_four.sh [SEEDS...]   (default: 0; SET="--set k=v ..." to vary)
set -euo pipefail
out=${OUT:-bench-out}/connect_four
mkdir -p "$out"
seeds=("$@")
if [[ ${#seeds[@]} -eq 0 ]]; then seeds=(0); fi
for s in "${seeds[@]}"; do
  # shellcheck disable=SC2086  # SET holds several --set words
  fastrl bench matches connect_four_selfplay --minutes 15 --set run.seed="$s" --set run.progress=false \
    --set run.total_frames=100_000_000 ${SET:-} --run-dir "$out/seed$s" | tee "$out/seed$s.json"
done
echo "results: $out/seed*.json" >&2
