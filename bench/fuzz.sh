#!/usr/bin/env bash
# The full fuzz of generated bad input (tests/fuzz, docs/faults-and-resume.md#generated-bad-input): >= 10,000
# cases in five families under the Hypothesis profile fuzz-full (random, not the default tier's seeded sample),
# then one line per family: cases, how they ended (refused, exit codes, runs), failures, tracebacks, leftovers.
# usage: bench/fuzz.sh [pytest options, e.g. -n 2 or -x]
set -uo pipefail
out=${OUT:-bench-out/fuzz-$(date +%Y%m%d-%H%M)}
mkdir -p "$out"
rm -f "$out"/counts-*.json
start=$(date +%s)
FASTRL_FUZZ=full FASTRL_FUZZ_COUNTS="$out" python -m pytest tests/fuzz -q -p no:cacheprovider -o addopts="" --timeout 0 \
    -m "unit or engine" "$@" 2>&1 | tee "$out/pytest.log"
status=${PIPESTATUS[0]}
lscpu > "$out/lscpu.txt"
python - "$out" "$status" "$(( $(date +%s) - start ))" <<'PY'
import collections, glob, json, sys
out, status, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
families = ("configs", "cli", "run_dirs", "env_outputs", "plugins")
breaches = ("traceback", "leftover", "damaged", "unnamed", "accepted_bad", "did_not_run", "round_trip", "exit")
total = collections.defaultdict(collections.Counter)
for path in glob.glob(f"{out}/counts-*.json"):
    for family, counts in json.load(open(path)).items():
        total[family].update(counts)
rows = []
for family in families:
    counts = total[family]
    failures = {k: v for k, v in counts.items() if k in breaches}
    rows.append({"family": family, "cases": sum(counts.values()), "outcomes": dict(counts),
                 "failures": sum(failures.values()), "tracebacks": counts["traceback"], "leftovers": counts["leftover"]})
    print(f"{family:12s} cases {rows[-1]['cases']:6d}  failures {rows[-1]['failures']}  tracebacks "
          f"{rows[-1]['tracebacks']}  leftovers {rows[-1]['leftovers']}  {dict(sorted(counts.items()))}")
print(f"{'all':12s} cases {sum(r['cases'] for r in rows):6d}  failures {sum(r['failures'] for r in rows)}  "
      f"pytest exit {status}  {seconds} s")
json.dump({"families": rows, "pytest_exit": status, "seconds": seconds}, open(f"{out}/fuzz.json", "w"), indent=1)
PY
echo "wrote $out"
exit "$status"
