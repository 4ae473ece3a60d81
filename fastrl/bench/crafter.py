"""``fastrl bench crafter``: the Crafter benchmark's score of a run, and what the engine costs on a slow Python env.

``fastrl bench crafter RUN_DIR``: the success rate of each of the 22 achievements over every episode of the run (the
share of episodes that unlocked it at least once, from the metrics lines' ``episode_stats``), and the score as
Crafter's paper (Hafner 2021, section 3) defines it, the geometric mean of the rates in percent, offset by one:
``exp(mean(ln(1 + s_i))) - 1``. It prints one JSON line and a bar chart of the rates; ``--out chart.png`` also
draws it (matplotlib). The paper's scores at 1M steps are beside it: PPO 4.6%, Rainbow 4.3%, DreamerV2 10.0%, and
DreamerV3 14.5% (Hafner 2023).

``fastrl bench crafter --speed [CONFIG]``: Crafter alone (``crafter.Env`` in a bare loop, one process per
executor, random actions), fastrl's adapters in the same bare loops, and the engine with the config's policy (its
model's forward, no learning), in the same rounds, between two readings of Crafter alone: the engine's steps/s as a
share of the env's own, over the rounds whose two readings agree (``fastrl bench sampling``'s rule).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from fastrl.config import ConfigError

PAPER_SCORES = {"ppo": 4.6, "rainbow": 4.3, "dreamerv2": 10.0, "dreamerv3": 14.5}  # percent, at 1M env steps
DEFAULT_CONFIG = "configs/crafter_ppo.toml"
BAR_WIDTH = 40


def score(rates: Mapping[str, float]) -> float:
    """Crafter's score of success rates in percent: exp(mean ln(1 + s)) - 1, in percent."""
    if not rates:
        raise ValueError("no success rates to score")
    return math.exp(statistics.fmean(math.log1p(rate) for rate in rates.values())) - 1.0


def success_rates(run_dir: str | Path) -> tuple[dict[str, float], int]:
    """Each achievement's success rate in percent over every episode of the run, and the episodes counted."""
    from fastrl.envs.crafter import achievements
    from fastrl.telemetry.episode_stats import run_totals
    from fastrl.telemetry.plot import load_run

    totals = run_totals(load_run(run_dir).lines)
    if not totals.episodes:
        raise ConfigError(f"{str(run_dir)!r}: no episode with achievements in its metrics (is it a Crafter run?)")
    missing = [name for name in achievements() if name not in totals.sums]
    if missing:
        raise ConfigError(f"{str(run_dir)!r}: its episodes report no {', '.join(missing)}: not a Crafter run")
    return {name: 100.0 * totals.sums[name] / totals.episodes for name in achievements()}, totals.episodes


def bar_chart(rates: Mapping[str, float]) -> str:
    """The rates as text bars, highest first (a log scale, as the paper draws them: 0.1% to 100%)."""
    lines = []
    for name, rate in sorted(rates.items(), key=lambda item: -item[1]):
        filled = 0 if rate <= 0.1 else round(BAR_WIDTH * math.log10(rate / 0.1) / 3)
        lines.append(f"{name:<20} {rate:6.2f}% {'#' * filled}")
    return "\n".join(lines)


def draw(rates: Mapping[str, float], title: str, out: str | Path) -> None:
    from fastrl.telemetry.plot import import_figure

    figure = import_figure()(figsize=(9, 4.5), layout="constrained")
    ax = figure.subplots()
    names = sorted(rates, key=lambda name: -rates[name])
    ax.bar(range(len(names)), [max(rates[name], 1e-2) for name in names], color="C0")
    ax.set_yscale("log")
    ax.set_ylim(1e-2, 100)
    ax.set_xticks(range(len(names)), [name.replace("_", " ") for name in names], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("success rate (%)")
    ax.set_title(title, loc="left", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    figure.savefig(out)


def report(run_dir: str | Path, out: str | Path | None = None) -> dict:
    rates, episodes = success_rates(run_dir)
    result = {
        "run": str(run_dir),
        "episodes": episodes,
        "score": round(score(rates), 3),
        "success_rates": {name: round(rate, 3) for name, rate in rates.items()},
        "paper_scores_at_1m_steps": PAPER_SCORES,
    }
    if out is not None:
        draw(rates, f"{Path(run_dir).name}: score {result['score']:.2f}% over {episodes} episodes", out)
        result["chart"] = str(out)
    return result


# ---------------------------------------------------------------------- speed


def _bare_crafter_worker(kwargs: dict, env_indices: list[int], seconds: float, barrier, results) -> None:
    """crafter.Env alone, one per env, stepped with random actions in a bare loop."""
    import crafter
    import numpy as np

    envs = [crafter.Env(seed=int(e), **kwargs) for e in env_indices]
    for env in envs:
        env.reset()
    plan = np.random.default_rng(env_indices[0]).integers(17, size=4096).tolist()
    barrier.wait(timeout=120)
    start, steps = time.perf_counter(), 0
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for env in envs:
            if env.step(plan[steps & 4095])[2]:
                env.reset()
            steps += 1
    results.put((steps, time.perf_counter() - start))


def bare_env_reading(kwargs: dict, envs: int, processes: int, seconds: float) -> dict:
    """Crafter alone: ``envs`` envs in ``processes`` bare loops, their steps/s summed and per process."""
    from fastrl.bench.references import in_processes
    from fastrl.partition import split

    parts = [(dict(kwargs), [int(e) for e in part], seconds) for part in split(envs, processes)]
    per_process = [steps / elapsed for steps, elapsed in in_processes(_bare_crafter_worker, parts, seconds)]
    return {"processes": processes, "fps": sum(per_process), "fps_per_process": per_process}


def speed(config: str, seconds: float, rounds: int, overrides: list[str]) -> dict:
    """Each round: the adapters' loop and the engine (order rotated), between two readings of Crafter alone (as
    ``fastrl bench sampling`` brackets the raw emulator)."""
    from fastrl.bench.references import adapter_loop_fps
    from fastrl.bench.sampling import bracketing, engine_fps, sampling_layout
    from fastrl.config import resolved_int

    resolved = sampling_layout(config, overrides)
    envs, executors = resolved.engine.envs, resolved_int(resolved.engine.executors, "engine.executors")
    runs = {
        "adapter_loop": lambda: adapter_loop_fps(resolved.env, envs, executors, seconds)["fps"],
        "engine": lambda: engine_fps(config, seconds, "model", overrides)["frames_per_s"],  # one frame a step
    }
    per_round = []
    for i in range(rounds):  # each round's order rotated by one
        names = list(runs)[i % len(runs) :] + list(runs)[: i % len(runs)]
        before = bare_env_reading(resolved.env.kwargs, envs, executors, seconds)
        measured = {name: runs[name]() for name in names}
        alone = bracketing(before, bare_env_reading(resolved.env.kwargs, envs, executors, seconds))
        per_round.append(
            {
                **measured,
                "crafter_alone": alone["fps"],
                "alone_drift": alone["drift"],
                "alone_cores_spread": alone["cores_spread"],
            }
        )
    return {"config": config, "envs": envs, "executors": executors, **speed_summary(per_round)}


def speed_summary(per_round: list[dict]) -> dict:
    """Medians over the steady rounds (Crafter alone's two readings within ``STEADY_DRIFT``; all rounds where none
    was), each round's figures beside them."""
    from fastrl.bench.sampling import STEADY_DRIFT, steady_rounds

    steady, counted = steady_rounds(per_round, lambda r: r["alone_drift"])
    names = ("crafter_alone", "adapter_loop", "engine")
    return {
        "steps_per_s": {name: round(statistics.median(r[name] for r in counted), 1) for name in names},
        "engine_of_crafter_alone": round(statistics.median(r["engine"] / r["crafter_alone"] for r in counted), 3),
        "adapter_loop_of_crafter_alone": round(
            statistics.median(r["adapter_loop"] / r["crafter_alone"] for r in counted), 3
        ),
        "steady_rounds": len(steady),
        "rounds": [{**r, "steady": r["alone_drift"] <= STEADY_DRIFT} for r in per_round],
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", nargs="?", help="a Crafter run's directory: its score and success rates")
    parser.add_argument("--out", help="also draw the success rates to this file (png, pdf, svg)")
    parser.add_argument(
        "--speed",
        nargs="?",
        const=DEFAULT_CONFIG,
        metavar="CONFIG",
        help=f"instead: Crafter alone vs the engine with CONFIG's policy (default {DEFAULT_CONFIG})",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="--speed: seconds per measurement (10)")
    parser.add_argument("--rounds", type=int, default=3, help="--speed: rounds, each order rotated (3)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="--speed: override a key")


def run(args: argparse.Namespace) -> int:
    from fastrl.bench import report as report_json

    if args.speed is not None:
        return report_json(lambda: speed(args.speed, args.seconds, args.rounds, args.set))
    if args.run_dir is None:
        print("fastrl: bad options: give a Crafter run's directory, or --speed [CONFIG]", file=sys.stderr)
        return 2
    try:
        result = report(args.run_dir, args.out)
    except ConfigError as exc:
        print(f"fastrl: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    print(
        f"score {result['score']:.2f}% over {result['episodes']} episodes "
        f"(at 1M steps: PPO 4.6%, DreamerV2 10.0%, DreamerV3 14.5%)",
        file=sys.stderr,
    )
    print(bar_chart(result["success_rates"]), file=sys.stderr)
    return 0
