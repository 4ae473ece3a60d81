"""Crafter score of a run's episodes up to each cut (frames), the way the curve pages give it."""
import json, sys
from fastrl.bench.crafter import score
from fastrl.envs.crafter import achievements
from fastrl.telemetry.episode_stats import run_totals
from fastrl.telemetry.plot import load_run

run = sys.argv[1]
cuts = [int(c) for c in sys.argv[2:]] or [250_000, 500_000, 750_000, 10**9]
lines = load_run(run).lines
out = {}
for cut in cuts:
    t = run_totals([l for l in lines if (l.get("frames") or 0) <= cut])
    if not t.episodes:
        continue
    rates = {n: 100.0 * t.sums.get(n, 0.0) / t.episodes for n in achievements()}
    out[cut] = {"score": round(score(rates), 2), "episodes": t.episodes}
print(json.dumps({"run": run, "curve": out}))
