#!/usr/bin/env bash
# The engine's own speed: Atari sampling against the raw emulator on every core and ale-py's AtariVectorEnv
# (3 rounds, the engine's adapters alone too), HTS-RL's speed-up under variable step times, async's policy lag,
# gala's ring against allreduce with a straggling learner, and (where valgrind is installed) a step's work counted
# under cachegrind: raw emulator, adapters, engine. Each prints JSON lines.
set -euo pipefail
out=${OUT:-bench-out}/engine
mkdir -p "$out"
fastrl bench sampling configs/pong_hts.toml --policy random --adapter-loop | tee "$out/sampling.json"
fastrl bench hts-speedup | tee "$out/hts_speedup.jsonl"
fastrl bench policy-lag | tee "$out/policy_lag.jsonl"
fastrl bench gala-straggler --seconds 20 | tee "$out/gala_straggler.json"
if command -v valgrind >/dev/null; then
  fastrl bench instructions configs/pong_sync.toml | tee "$out/instructions.json"
else
  echo "valgrind not installed: the instruction counts are left out (apt install valgrind)" >&2
fi
