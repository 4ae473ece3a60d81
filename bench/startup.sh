#!/usr/bin/env bash
# A run's seconds from train() to return: workers forked from the fork server vs spawned, first and later
# runs of a process; on CartPole (start-up is most of the run) and on the default job.
# usage: bench/startup.sh [RUNS]   (default 4)
set -euo pipefail
out=${OUT:-bench-out}
mkdir -p "$out"
runs=${1:-4}
fastrl bench startup configs/cartpole_ppo.toml --runs "$runs" | tee "$out/startup-cartpole.json"
fastrl bench startup --runs "$runs" | tee "$out/startup-default-job.json"
