#!/usr/bin/env bash
# The 2-hour soak of the default job (fastrl bench soak): every process's resident memory (slope in MiB/h per
# role), open fds and the run's segments sampled every 30 s, fastrl plot read every 5 min, a checkpoint every
# 3 min, kill -9 of the main process at a random time, then a resume from the newest exact checkpoint that is
# checked bit for bit. Run it on a quiet machine (nothing else beside it). Its folder keeps samples.jsonl,
# summary.json, memory.png and the machine's lscpu.
set -euo pipefail
minutes=${MINUTES:-120}
out=${OUT:-bench-out/soak-$(date +%Y%m%d-%H%M)}
mkdir -p "$(dirname "$out")"
fastrl bench soak "$@" --minutes "$minutes" --out "$out"
lscpu > "$out/lscpu.txt"
