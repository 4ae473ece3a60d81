#!/usr/bin/env bash
# Two-player Pong by self-play (docs/multi-agent.md): the engine's speed on the two-player game against the one-player
# game; then per seed 60 minutes of self-play (a checkpoint every 5 minutes), 20 games against a uniformly random
# paddle (the mean margin), and 10 episodes as the one player of PongNoFrameskip-v4 against the game's own
# opponent; then each kept checkpoint (the curve): 4 games and 2 episodes. One quiet run at a time.
# usage: bench/pong_selfplay.sh [SEEDS...]   (default: 0; MINUTES=60)
set -euo pipefail
out=${OUT:-bench-out}/pong_selfplay
mkdir -p "$out"
seeds=("$@")
if [[ ${#seeds[@]} -eq 0 ]]; then seeds=(0); fi
fastrl bench two-player --seconds 20 --rounds 3 --bare | tee "$out/two_player.json"
for s in "${seeds[@]}"; do
  run="$out/seed$s"
  fastrl bench matches pong_selfplay --minutes "${MINUTES:-60}" --opponent random --games 20 \
    --set run.seed="$s" --set model.precision="'fp32'" --set run.progress=false \
    --set run.checkpoint_interval_s=300 --set run.keep_checkpoints=13 --run-dir "$run" | tee "$out/seed$s.json"
  fastrl eval "$run" --env PongNoFrameskip-v4 --episodes 10 | tee "$out/seed$s-one_player.json"
  for ckpt in "$run"/checkpoints/ckpt-*.pt; do  # the curve: each kept checkpoint, briefly
    name=$(basename "$ckpt" .pt)
    fastrl eval "$ckpt" --opponent random --episodes 4 > "$out/seed$s-$name-random.json"
    fastrl eval "$ckpt" --env PongNoFrameskip-v4 --episodes 2 > "$out/seed$s-$name-one_player.json"
  done
done
echo "results: $out/" >&2
