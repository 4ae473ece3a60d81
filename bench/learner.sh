#!/usr/bin/env bash
# The learner's training step and the actors' forward: eager vs compiled, fp32 vs bf16, by threads.
# usage: bench/learner.sh [CONFIG]   (default: the default job)
set -euo pipefail
out=${OUT:-bench-out}
mkdir -p "$out"
fastrl bench learner ${1:+"$1"} --seconds 4 | tee "$out/learner.json"
