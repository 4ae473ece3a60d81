#!/usr/bin/env bash
# engine.keep_freed_memory: the default job's frames/s with and without, in alternating 90-s runs (a VM's
# speed drifts over minutes, so pairs run back to back); each run's time_to_score.json under $OUT.
# usage: bench/keep_freed_memory.sh [PAIRS]   (default 5; a quiet machine)
set -euo pipefail
out=${OUT:-bench-out}/keep_freed_memory
mkdir -p "$out"
for pair in $(seq "${1:-5}"); do
  for keep in false true; do
    # a target no run reaches in 90 s: time-to-score as a capped run whose time_to_score.json has its frames/s
    fastrl bench time-to-score --target 21 --max-minutes 1.5 --run-dir "$out/run-$keep-$pair" \
      --set model.precision="'fp32'" --set engine.keep_freed_memory=$keep > /dev/null
    cp "$out/run-$keep-$pair/time_to_score.json" "$out/summary-$keep-$pair.json"
  done
done
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
fps = {k: [json.loads(p.read_text())["fps"] for p in sorted(out.glob(f"summary-{k}-*.json"))] for k in ("false", "true")}
print(json.dumps({"fps": fps, "ratios": [round(t / f, 3) for f, t in zip(fps["false"], fps["true"])]}))
PY
