#!/usr/bin/env bash
# Every GPU measurement of docs/gpu.md in one run that fits a 15-minute window on a borrowed GPU machine:
# the CUDA tests, the GPU forward's batch invariance, sampling at 1-14 executors against the raw emulator
# and AtariVectorEnv, the learner's step, sampling with the CNN on the GPU actors, and the default job's
# time to Pong 18. Each step's JSON line lands in $OUT/device_check.jsonl as soon as it finishes.
# usage: bench/device_check.sh [--dry-run] [--budget-s 540]
#   on a machine with fastrl installed: as it is; on a bare offline one: first bench/device_wheels.sh where
#   PyPI answers, carry .whl/ beside the checkout, and this script installs the wheels into /tmp/site.
#   --dry-run: every step on the CPU at toy sizes (prove the script before spending device time on it).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench-out/device_check}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
if ! "$py" -c "import ale_py, gymnasium, faster_fifo, pytest" 2>/dev/null; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$py" -m pip install --quiet --no-index --no-deps --no-compile --target /tmp/site \
      $(ls .whl/*.whl | grep -v '/numpy-') 2>&1 | tail -3
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
  else
    echo "fastrl's dependencies are missing and there is no .whl/: run bench/device_wheels.sh where PyPI answers" >&2
    exit 2
  fi
fi
if ! "$py" -c "import numba" 2>/dev/null && compgen -G ".whl/numpy-*.whl" >/dev/null; then
  "$py" -m pip install --quiet --no-index --no-deps --no-compile --target /tmp/site .whl/numpy-*.whl 2>&1 | tail -3
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
"$py" -m fastrl bench device-check --out "$out" "$@" 2>&1 | tee "$out/log.txt"
