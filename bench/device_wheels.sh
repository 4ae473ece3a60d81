#!/usr/bin/env bash
# Fetch, here (where PyPI answers), the cp312 wheels fastrl needs on a bare, offline GPU machine whose Python
# already has torch, numpy and numba (../shared/DEVICE.md lists what such a machine has). They go to .whl/,
# which git ignores and the device tool carries beside the checkout; bench/device_check.sh installs them there.
# usage: bench/device_wheels.sh   (PYTHON_VERSION=3.12 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "${PYTHON_VERSION:-3.12}" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  ale-py==0.12.1 gymnasium==1.4.0 faster-fifo==1.5.2 tensorboardX==2.6.5 farama-notifications==0.0.6 \
  pytest pytest-timeout pluggy iniconfig packaging \
  numpy==2.4.6  # installed there only if its numba refuses its numpy (numba <= 0.66 stops at numpy 2.4)
du -sh .whl >&2
