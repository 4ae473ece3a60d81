#!/usr/bin/env bash
# The default job on Atari-5 (Battle Zone, Double Dunk, Name This Game, Phoenix, Q*bert), scored as papers score.
# usage: bench/atari5.sh [SEEDS] [MINUTES]   (default: 1 seed, 15 minutes of training per game)
# With 16+ cores or a GPU, the papers' budget: SEEDS=3 and FRAMES=10000000 instead of minutes.
set -euo pipefail
out=${OUT:-bench-out}/atari5
seeds=${1:-1}
budget=(--minutes "${2:-15}")
if [[ -n "${FRAMES:-}" ]]; then budget=(--frames "$FRAMES"); fi
fastrl bench suite --games atari5 --seeds "$seeds" "${budget[@]}" --out "$out" \
  --set model.precision="'${PRECISION:-fp32}'" --set run.progress=false
echo "table: $out/suite.md, figure: $out/suite.png (the same command resumes an interrupted suite)" >&2
