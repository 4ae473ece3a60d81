#!/usr/bin/env bash
# Every GPU measurement of docs/gpu.md in one run capped at 9 minutes:
# the CUDA tests, the GPU forward's batch invariance, sampling at 1-14 executors against the raw emulator
# and AtariVectorEnv, the learner's step, sampling with the CNN on the GPU actors, and the default job's
# time to Pong 18. Each step's JSON line lands in $OUT/device_check.jsonl as soon as it finishes.
# usage: bench/device_check.sh [--dry-run] [--budget-s 540]
#        bench/device_check.sh --fetch-wheels
#   On a machine with fastrl installed: as it is. For a bare offline one: first, where PyPI answers,
#   --fetch-wheels puts the cp312 wheels it lacks into .whl/ (git ignores it; carry it beside the checkout),
#   and there this script installs them into /tmp/site when the imports fail.
#   --dry-run: every step on the CPU at toy sizes (prove the script before spending device time on it).
set -uo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
if [[ "${1:-}" == "--fetch-wheels" ]]; then
  # ale-py bundles the ROMs; numpy 2.4.6 only for a numba that refuses the machine's numpy (<= 0.66: numpy <= 2.4)
  exec "$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    ale-py==0.12.1 gymnasium==1.4.0 faster-fifo==1.5.2 tensorboardX==2.6.5 farama-notifications==0.0.6 \
    pytest pytest-timeout pluggy iniconfig packaging numpy==2.4.6
fi
out=${OUT:-bench-out/device_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! "$py" -c "import ale_py, gymnasium, faster_fifo, pytest" 2>/dev/null; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$py" -m pip install --quiet --no-index --no-deps --no-compile --target /tmp/site \
      $(ls .whl/*.whl | grep -v '/numpy-') 2>&1 | tail -3
    export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
  else
    echo "fastrl's dependencies are missing and there is no .whl/: run bench/device_check.sh --fetch-wheels where PyPI answers" >&2
    exit 2
  fi
fi
if ! "$py" -c "import numba" 2>/dev/null && compgen -G ".whl/numpy-*.whl" >/dev/null; then
  "$py" -m pip install --quiet --no-index --no-deps --no-compile --target /tmp/site .whl/numpy-*.whl 2>&1 | tail -3
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-}
"$py" -m fastrl bench device-check --out "$out" "$@" 2>&1 | tee "$out/log.txt"
