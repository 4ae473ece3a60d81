"""Time to a score: train until the mean raw score over the last W episodes first reaches R, or M minutes.

    fastrl bench time-to-score [CONFIG] --target 18 --max-minutes 60 [--window 20] [--set k=v] [--run-dir DIR]

An ordinary training run (``fastrl.train``) with three keys set from the options:
``run.target_return = R`` and ``run.max_seconds = 60 M`` stop it, and ``run.return_window = W``
makes every ``metrics.jsonl`` line's ``return_mean`` the mean over the same last W episodes the
target is tested on. ``run.total_frames`` still applies (it may also be a learning-rate
schedule's horizon, so it is not lifted here): raise it with ``--set`` when it would end the
run first; ``stopped_by`` says what ended it.

The crossing is read from ``metrics.jsonl`` (one line per ``run.log_interval_s``): the first line
whose mean reaches R with at least ``min(W, 10)`` episodes finished, the rule the engine stops
on (``Telemetry.target_reached``; with several gala learners, every learner's own mean). The
run stops on that rule (checked every 0.1 s; the rollout in flight then finishes), usually
between two lines, so the crossing is normally the last line; that line is written at teardown,
so its time is taken as the training's end (``train_s``), not the moment the workers stopped.

Times: ``wall_s`` (at the crossing) and the curve's ``wall_s`` are training time, counted from the
moment every worker was ready (``metrics.jsonl``'s ``time_s``); start-up (spawning processes,
compiling kernels, first resets) is ``startup_s``, apart, so that runs on machines that start
slower compare on what they learn. Writes ``time_to_score.json`` into the run directory and
prints it as one JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

from fastrl.bench.machine import machine_info
from fastrl.config import ConfigError, parse_override

RESULT_FILE = "time_to_score.json"
TARGET_MIN_EPISODES = 10  # Telemetry.target_reached: a mean of at least min(window, 10) episodes
BENCH_KEYS = {"run.target_return": "--target", "run.max_seconds": "--max-minutes", "run.return_window": "--window"}


def check_options(target: float, max_minutes: float, window: int, overrides: list[str]) -> None:
    """Bad options are named before anything starts; the keys the options set cannot also be --set."""
    if not math.isfinite(target):
        raise ConfigError(f"--target {target!r}: expected a finite score")
    if not (math.isfinite(max_minutes) and max_minutes > 0):
        raise ConfigError(f"--max-minutes {max_minutes!r}: expected a number of minutes > 0")
    check_window(window)
    refuse_set_keys(overrides, BENCH_KEYS)


def check_window(window: int) -> None:
    if window < 1:
        raise ConfigError(f"--window {window!r}: expected an int >= 1 (episodes averaged)")


def refuse_set_keys(overrides: list[str], keys: dict[str, str]) -> None:
    """A ``--set`` of a key that a bench option sets (``keys``: key -> option) is named with the option to use."""
    for text in overrides:
        parsed = parse_override(text)
        for key, option in keys.items():
            section, name = key.split(".")
            if name in parsed.get(section, {}):
                raise ConfigError(f"--set {text!r}: {key} is what {option} sets here; use {option}")


def measure(
    config: str | None,
    target: float,
    max_minutes: float,
    window: int = 20,
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
) -> dict:
    """Train and return the result (also written to RUN_DIR/time_to_score.json).

    A run ended by Ctrl-C or a fault still writes its result (``stopped_by`` says so) before
    the exception goes on.
    """
    import fastrl
    from fastrl.api import resolve_config
    from fastrl.process.faults import RunFailed, RunInterrupted
    from fastrl.runs.run_dir import default_run_dir

    overrides = list(overrides)
    check_options(target, max_minutes, window, overrides)
    bench = [f"run.target_return={target!r}", f"run.max_seconds={max_minutes * 60.0!r}", f"run.return_window={window}"]
    resolved = resolve_config(config, [*overrides, *bench])
    run_path = Path(run_dir) if run_dir is not None else default_run_dir(resolved)
    error: BaseException | None = None
    try:
        fastrl.train(resolved, run_dir=run_path)
    except (RunFailed, RunInterrupted) as exc:
        error = exc
    if error is not None and not (run_path / "summary.json").is_file():
        raise error  # it ended before the run had anything to read
    result = {
        "config": None if config is None else str(config),
        "overrides": overrides,
        "target": target,
        "window": window,
        "max_minutes": max_minutes,
        **read_run(run_path, target, window),
    }
    (run_path / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n")
    if error is not None:
        raise error
    return result


def read_run(run_path: Path, target: float, window: int) -> dict:
    """The crossing, the curve and the run's figures from a finished run directory."""
    from fastrl.config import tomllib  # tomli on Python 3.10

    summary = json.loads((run_path / "summary.json").read_text())
    config = tomllib.loads((run_path / "config.toml").read_text(encoding="utf-8"))
    lines = [json.loads(text) for text in (run_path / "metrics.jsonl").read_text().splitlines() if text.strip()]
    curve = [{"wall_s": line["time_s"], "frames": line["frames"], "return_mean": line["return_mean"]} for line in lines]
    if curve:  # the last line is written at teardown, after training ended at train_s
        curve[-1]["wall_s"] = min(curve[-1]["wall_s"], summary["train_s"])
    crossing = first_crossing(lines, target, window)
    point = curve[crossing] if crossing is not None else None
    engine = config["engine"]
    return {
        "reached": point is not None,
        "wall_s": point["wall_s"] if point else None,
        "frames": point["frames"] if point else None,
        "episodes": lines[crossing]["episodes"] if crossing is not None else None,
        # the engine's own word ("target", "total_frames", "max_seconds"); a run that did not complete: its status
        "stopped_by": summary["stopped_by"] if summary["status"] == "complete" else summary["status"],
        "startup_s": summary["startup_s"],
        "train_s": summary["train_s"],
        "frames_trained": summary["frames"],
        "fps": summary["fps"],
        "final_return_mean": summary["final_return_mean"],
        "run_dir": str(run_path),
        "env_id": config["env"]["id"],
        "mode": engine["mode"],
        "layout": {
            key: engine.get(key)
            for key in (
                "envs",
                "executors",
                "actors",
                "inline_actors",
                "learners",
                "micro_batch",
                "device",
                "actor_device",
            )
        },
        "precision": _precision(config),
        "compile": config["model"].get("compile", False),
        "machine": machine_info(),
        "curve": curve,
    }


def first_crossing(lines: list[dict], target: float, window: int) -> int | None:
    """Index of the first metrics line on which the engine's stopping rule holds, or None."""
    enough = min(window, TARGET_MIN_EPISODES)
    for i, line in enumerate(lines):
        if "learners" in line:  # gala: every learner's mean over its own envs
            means = [learner["return_mean"] for learner in line["learners"]]
        else:
            means = [line["return_mean"]]
        if line["episodes"] >= enough and all(m is not None and m >= target for m in means):
            return i
    return None


def _precision(config: dict) -> str:
    """The precision the run computed in: config.toml keeps ``model.precision`` as given ("auto" too)."""
    import torch

    from fastrl.devices import device_kind
    from fastrl.models.precision import resolve_precision

    return resolve_precision(config["model"]["precision"], torch.device(device_kind(config["engine"]["device"])))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default job, configs/pong_sync.toml)")
    parser.add_argument("--target", type=float, required=True, help="the mean raw score to reach")
    parser.add_argument("--max-minutes", type=float, required=True, help="training time cap, in minutes")
    parser.add_argument("--window", type=int, default=20, help="episodes the mean is taken over (default 20)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--run-dir", help="run directory (default: run.dir/<time>_<env>_<mode>)")


def run(args: argparse.Namespace) -> int:
    """Measure with the parsed ``add_arguments`` options and print the JSON line; returns the exit code."""
    from fastrl.bench import report

    return report(lambda: measure(args.config, args.target, args.max_minutes, args.window, args.set, args.run_dir))
