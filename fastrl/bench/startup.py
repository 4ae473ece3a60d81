"""How long a run takes from ``fastrl.train`` called to returned when its workers are forked from the fork
server, against spawned: the first run of a Python process and the runs after it (a sweep, a notebook, a
test suite).

Each start method gets a fresh Python process of its own, which trains the config ``--runs`` times for two
rollouts and times each run (``run_s``) and its ``startup_s`` (planning, starting the workers, their first
resets: until every worker is ready). The reference is ``engine.start_method = "spawn"`` in the same
invocation on the same machine; the ratios are spawn's seconds over the fork server's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

from fastrl.config import ConfigError, load_config

METHODS = ("spawn", "forkserver")
_CHILD = (
    "import json, sys; from fastrl.bench.startup import time_runs; "
    "print(json.dumps(time_runs(*json.loads(sys.argv[1]))))"
)


def time_runs(config: str | None, overrides: list[str], runs: int) -> list[dict]:
    """``runs`` runs of the config in this process, each timed: the body of each start method's process."""
    import fastrl

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        summary = fastrl.train(config, overrides)
        times.append({"run_s": round(time.perf_counter() - start, 3), "startup_s": summary["startup_s"]})
    return times


def _overrides(config: str | None, overrides: list[str], method: str, workdir: str) -> list[str]:
    engine = load_config(config, overrides).engine  # bad input is refused here, before any process starts
    frames = 2 * engine.envs * engine.rollout
    return [
        *overrides,
        f"engine.start_method='{method}'",
        f"run.total_frames={frames}",
        "run.progress=false",
        f"run.dir='{workdir}'",
    ]


def _in_fresh_process(config: str | None, overrides: list[str], runs: int) -> list[dict]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps([config, overrides, runs])], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"the timed process exited with code {out.returncode}:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _summary(times: list[dict]) -> dict:
    later = times[1:]
    return {
        "first_run_s": times[0]["run_s"],
        "first_startup_s": times[0]["startup_s"],
        "later_run_s": round(statistics.median(t["run_s"] for t in later), 3) if later else None,
        "later_startup_s": round(statistics.median(t["startup_s"] for t in later), 3) if later else None,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a is not None and b else None


def measure(config: str | None, overrides: list[str], runs: int) -> dict:
    from fastrl.bench.machine import machine_info

    result: dict = {"bench": "startup", "config": config or "the default job", "overrides": overrides, "runs": runs}
    with tempfile.TemporaryDirectory() as workdir:
        for method in METHODS:
            result[method] = _summary(_in_fresh_process(config, _overrides(config, overrides, method, workdir), runs))
    spawn, fork = result["spawn"], result["forkserver"]
    for key in ("first_run_s", "later_run_s"):
        result[key.replace("_s", "_speedup")] = _ratio(spawn[key], fork[key])
    result["machine"] = machine_info()
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default job)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--runs", type=int, default=4, help="runs per start method, in one process (default 4)")


def run(args: argparse.Namespace) -> int:
    if args.runs < 1:
        print("fastrl: bad options: --runs must be >= 1", file=sys.stderr)
        return 2
    try:
        result = measure(args.config, args.set, args.runs)
    except ConfigError as exc:
        print(f"fastrl: bad config: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"fastrl bench startup: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0
