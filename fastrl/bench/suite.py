"""An Atari suite scored the way papers score: several games and seeds, human-normalised, IQM and median
with stratified-bootstrap intervals.

    fastrl bench suite [CONFIG] --games atari5 | G1 G2 ... --seeds N (--minutes M | --frames F)
                       [--out DIR] [--window W] [--set k=v]

Runs CONFIG (default: the default job) once per game and seed, one after another, the game put into
the config's own env id (``PongNoFrameskip-v4`` with ``--games Qbert`` runs ``QbertNoFrameskip-v4``;
``ALE/Pong-v5`` runs ``ALE/Qbert-v5``), each for ``M`` minutes of training (``run.max_seconds``) or
``F`` frames (``run.total_frames``; with ``--minutes`` the config's own stays, as a learning-rate
schedule's horizon, and should exceed what the minutes reach). Each run's directory is
``OUT/<game>-seed<s>`` and its result ``suite_run.json`` there: the final mean raw score over the last W
episodes (``run.return_window``), the best such mean, frames, times, and the curve. A finished run is
never run again, so an interrupted suite goes on where it stopped with the same command (a run cut short
is started afresh).

Then ``OUT/suite.json`` and ``OUT/suite.md``: every run's raw and human-normalised final score
(``fastrl.bench.atari_scores``), the per-game means, and the IQM, median and mean of the normalised
scores over games and seeds with 95% stratified-bootstrap intervals (``fastrl.bench.aggregate``), the
machine named; and ``OUT/suite.png`` (``fastrl plot`` of every run, against frames) when matplotlib is
installed. ``--games atari5`` is Atari-5 (Aitchison et al. 2023): Battle Zone, Double Dunk, Name This
Game, Phoenix, Q*bert.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fastrl.bench.aggregate import summarize
from fastrl.bench.atari_scores import ATARI5, RANDOM_HUMAN, human_normalized
from fastrl.bench.machine import bf16_units, machine_info
from fastrl.bench.time_to_score import check_window, refuse_set_keys
from fastrl.config import ConfigError
from fastrl.errors import install_hint

log = logging.getLogger(__name__)

RUN_RESULT = "suite_run.json"
SUITES = {"atari5": ATARI5}
SUITE_KEYS = {
    "env.id": "--games",
    "run.seed": "--seeds",
    "run.max_seconds": "--minutes",
    "run.return_window": "--window",
}


def resolve_games(names: list[str]) -> list[str]:
    """ROM ids (``battle_zone``) of ``--games``: suite names (``atari5``), ROM ids or ALE spellings (``BattleZone``)."""
    from fastrl.envs.atari import parse_atari_id

    games: list[str] = []
    for name in names:
        if name.lower() in SUITES:
            games += SUITES[name.lower()]
            continue
        try:
            rom, _ = parse_atari_id(f"ALE/{name}-v5")
        except ValueError as exc:
            raise ConfigError(f"--games {name!r}: {exc}") from None
        if rom not in RANDOM_HUMAN:
            raise ConfigError(
                f"--games {name!r}: no published random and human scores for {rom!r} (the 57 games "
                "of fastrl/bench/atari_scores.py have them)"
            )
        games.append(rom)
    if not games:
        raise ConfigError("--games: name at least one game, or 'atari5'")
    return list(dict.fromkeys(games))  # in order, once each


def game_env_id(env_id: str, rom: str) -> str:
    """``env_id`` with its game replaced by ``rom``, keeping its protocol (``NoFrameskip-v4``, ``ALE/...-v5``)."""
    from fastrl.envs.atari import _ID, _camel, is_atari_id

    match = _ID.match(env_id)
    if match is None or not is_atari_id(env_id):
        raise ConfigError(
            f"env.id = {env_id!r} is not an Atari id: a suite puts each game into the config's "
            "Atari id (e.g. 'PongNoFrameskip-v4' or 'ALE/Pong-v5')"
        )
    return f"{match['ale'] or ''}{_camel(rom)}{match['variant'] or ''}-v{match['version']}"


def check_options(seeds: int, minutes: float | None, frames: int | None, window: int, overrides: list[str]) -> None:
    if seeds < 1:
        raise ConfigError(f"--seeds {seeds}: expected an int >= 1 (seeds 0 .. N-1 of every game)")
    if (minutes is None) == (frames is None):
        raise ConfigError("give exactly one budget per run: --minutes M (training time) or --frames F")
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise ConfigError(f"--minutes {minutes!r}: expected a number of minutes > 0")
    if frames is not None and frames < 1:
        raise ConfigError(f"--frames {frames!r}: expected an int >= 1")
    check_window(window)
    refuse_set_keys(overrides, SUITE_KEYS | ({"run.total_frames": "--frames"} if frames is not None else {}))


def run_suite(
    config: str | None,
    games: list[str],
    seeds: int,
    minutes: float | None = None,
    frames: int | None = None,
    out: str | Path = "suite",
    window: int = 100,
    overrides: Sequence[str] = (),
) -> dict:
    """Run every game and seed not yet finished under ``out``, then aggregate them all (also written to
    ``out/suite.json`` and ``out/suite.md``); returns the suite's result."""
    from fastrl.api import resolve_config

    overrides = list(overrides)
    check_options(seeds, minutes, frames, window, overrides)
    roms = resolve_games(games)
    base = resolve_config(config, overrides)  # bad keys and a non-Atari env are named before any run
    env_ids = {rom: game_env_id(base.env.id, rom) for rom in roms}
    # --minutes keeps the config's run.total_frames: it may be a learning-rate schedule's horizon (the default
    # job anneals over 10M frames), so the time ends the run, not a frame budget lifted out of reach
    budget = [f"run.max_seconds={minutes * 60.0!r}"] if minutes is not None else [f"run.total_frames={frames}"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for rom in roms:
        for seed in range(seeds):
            settings = [
                *overrides,
                f"env.id='{env_ids[rom]}'",
                f"run.seed={seed}",
                f"run.return_window={window}",
                *budget,
            ]
            runs.append(_run_once(config, settings, out / f"{rom}-seed{seed}", rom, seed))
    result = aggregate_runs(runs, roms, seeds)
    result = {
        "config": None if config is None else str(config),
        "overrides": overrides,
        "games": roms,
        "seeds": seeds,
        "minutes": minutes,
        "frames": frames,
        "window": window,
        "machine": machine_info(),
        **result,
    }
    (out / "suite.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "suite.md").write_text(markdown(result))
    _plot(out, runs, result["machine"])
    return result


def _run_once(config: str | None, settings: list[str], run_dir: Path, rom: str, seed: int) -> dict:
    """The run's result: read back if it finished before, else trained now (from scratch)."""
    import fastrl

    done = run_dir / RUN_RESULT
    if done.is_file():
        log.info("%s: finished before, not run again", run_dir)
        return json.loads(done.read_text())
    if run_dir.exists():  # cut short last time: its partial curve would not be this budget's
        shutil.rmtree(run_dir)
    fastrl.train(config, settings, run_dir=run_dir)
    result = {"game": rom, "seed": seed, **read_run(run_dir)}
    done.write_text(json.dumps(result, indent=2) + "\n")
    return result


def read_run(run_dir: Path) -> dict:
    """Final and best mean score, frames, times and the curve of a finished run directory."""
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = [json.loads(text) for text in (run_dir / "metrics.jsonl").read_text().splitlines() if text.strip()]
    means = [line["return_mean"] for line in lines if line["return_mean"] is not None]
    return {
        "env_id": summary.get("env_id"),
        "final": means[-1] if means else None,
        "best": max(means) if means else None,
        "episodes": lines[-1]["episodes"] if lines else 0,
        "frames": summary["frames"],
        "train_s": summary["train_s"],
        "fps": summary["fps"],
        "curve": [
            {"wall_s": line["time_s"], "frames": line["frames"], "return_mean": line["return_mean"]} for line in lines
        ],
    }


def aggregate_runs(runs: list[dict], roms: list[str], seeds: int) -> dict:
    """Per-run normalised scores, per-game means and the aggregates over games and seeds."""
    rows = []
    for run in runs:
        final = run["final"]
        normalized = None if final is None else human_normalized(run["game"], final)
        rows.append(
            {
                key: run[key]
                for key in ("game", "seed", "env_id", "final", "best", "episodes", "frames", "train_s", "fps")
            }
            | {"normalized": normalized}
        )
    per_game = {}
    for rom in roms:
        finals = [row["final"] for row in rows if row["game"] == rom and row["final"] is not None]
        random, human = RANDOM_HUMAN[rom]
        per_game[rom] = {
            "random": random,
            "human": human,
            "final_mean": float(np.mean(finals)) if finals else None,
            "normalized_mean": float(np.mean([human_normalized(rom, f) for f in finals])) if finals else None,
        }
    missing = [f"{row['game']}-seed{row['seed']}" for row in rows if row["normalized"] is None]
    aggregates = None
    if not missing:
        table = np.array(
            [
                [next(r["normalized"] for r in rows if r["game"] == rom and r["seed"] == seed) for rom in roms]
                for seed in range(seeds)
            ]
        )
        aggregates = summarize(table)
    return {"runs": rows, "per_game": per_game, "aggregates": aggregates, "without_score": missing}


def markdown(result: dict) -> str:
    machine = result["machine"]
    budget = f"{result['minutes']:g} minutes" if result["minutes"] is not None else f"{result['frames']:,} frames"
    lines = [
        f"# Suite: {result['config'] or 'the default job'}, {len(result['games'])} games x {result['seeds']} seed(s), "
        f"{budget} each",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, "
        f"{bf16_units(machine)}, torch {machine['torch']}, "
        f"GPU {machine['gpu'] or 'none'}. "
        f"Score: the mean raw score of the last {result['window']} episodes at the end of each run; "
        "human-normalised: (score - random) / (human - random).",
        "",
        "| game | random | human | final score per seed | mean | human-normalised |",
        "|---|---|---|---|---|---|",
    ]
    for rom, game in result["per_game"].items():
        finals = [row["final"] for row in result["runs"] if row["game"] == rom]
        shown = " / ".join("-" if f is None else f"{f:.1f}" for f in finals)
        mean_ = "-" if game["final_mean"] is None else f"{game['final_mean']:.1f}"
        hns = "-" if game["normalized_mean"] is None else f"{game['normalized_mean']:.3f}"
        lines.append(f"| {rom} | {game['random']:g} | {game['human']:g} | {shown} | {mean_} | {hns} |")
    lines.append("")
    if result["aggregates"] is None:
        lines.append(f"No aggregate: runs without a finished episode: {', '.join(result['without_score'])}.")
    else:
        lines.append("| human-normalised | point | 95% CI (stratified bootstrap over seeds) |")
        lines.append("|---|---|---|")
        for name, value in result["aggregates"].items():
            low, high = value["ci"]
            lines.append(
                f"| {name.upper() if name == 'iqm' else name} | {value['point']:.3f} | [{low:.3f}, {high:.3f}] |"
            )
        if result["seeds"] == 1:
            lines.append("")
            lines.append("One seed per game: every bootstrap resample is that seed, so the intervals are points.")
    return "\n".join(lines) + "\n"


def _plot(out: Path, runs: list[dict], machine: dict) -> None:
    try:
        plot_suite(runs, machine, out / "suite.png")
    except ImportError:
        log.warning("no suite.png: the figure needs matplotlib (%s)", install_hint("plot"))


def plot_suite(runs: list[dict], machine: dict, path: Path) -> Path:
    """Each run's human-normalised mean score (its curve: the mean over the window at every metrics line)
    against env frames, every game on one scale, so games whose raw scores differ by 1,000x compare."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in runs:
        points = [
            (c["frames"], human_normalized(run["game"], c["return_mean"]))
            for c in run["curve"]
            if c["return_mean"] is not None
        ]
        if points:
            frames, scores = zip(*points)
            ax.plot(frames, scores, label=f"{run['game']}-seed{run['seed']}")
    ax.axhline(0.0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("env frames")
    ax.set_ylabel("human-normalised score")
    ax.set_title(f"{machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config with an Atari env.id (default: the default job)")
    parser.add_argument(
        "--games",
        nargs="+",
        required=True,
        metavar="GAME",
        help="'atari5', or games by ROM id or ALE name (battle_zone, BattleZone, Qbert)",
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 of every game (default 1)")
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--minutes", type=float, help="training time per run, in minutes")
    budget.add_argument("--frames", type=int, help="env frames per run")
    parser.add_argument("--out", default="suite", help="the suite's directory (default ./suite); runs go inside")
    parser.add_argument("--window", type=int, default=100, help="episodes the final mean is taken over (default 100)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")


def run(args: argparse.Namespace) -> int:
    from fastrl.bench import report

    return report(
        lambda: run_suite(
            args.config, args.games, args.seeds, args.minutes, args.frames, args.out, args.window, args.set
        ),
        lambda result: {key: result[key] for key in ("games", "seeds", "aggregates", "without_score")},
    )
