#!/usr/bin/env bash
# The gradient all-reduce's share of an update (after backward, and overlapped with it), 1 and 2 gloo ranks on
# this machine, projected to 8 and 64 nodes. Give your network's numbers to project it instead of loopback:
#   ALPHA_US=25 BANDWIDTH_GBPS=10 bench/multinode.sh
set -euo pipefail
out=${OUT:-bench-out}
mkdir -p "$out"
network=()
if [[ -n "${ALPHA_US:-}" ]]; then network+=(--alpha-us "$ALPHA_US"); fi
if [[ -n "${BANDWIDTH_GBPS:-}" ]]; then network+=(--bandwidth-gbps "$BANDWIDTH_GBPS"); fi
fastrl bench multinode "${network[@]}" | tee "$out/multinode.json"
