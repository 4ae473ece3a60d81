"""Multi-agent learning, measured as a user checks it: train for a time, then play matches.

    fastrl bench matches [CONFIG] --minutes 15 [--opponent random --opponent connect_four_lookahead]
                         [--games 1000] [--set k=v] [--run-dir DIR]

An ordinary training run of CONFIG (default: configs/connect_four_selfplay.toml) capped at ``--minutes`` of
training (``run.max_seconds``; ``run.total_frames`` still applies, raise it with ``--set`` where it would end the
run first), then ``--games`` games of the trained policy against each ``--opponent``
(``fastrl.evaluation.matches``: the policy in each seat half the time, sampled actions, seed 0). Writes
``matches.json`` into the run directory and prints it as one JSON line: the training summary, the machine, and
each opponent's wins, draws and losses.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path

from fastrl.bench.machine import machine_info
from fastrl.bench.time_to_score import refuse_set_keys
from fastrl.config import ConfigError

DEFAULT_CONFIG = "connect_four_selfplay"
DEFAULT_OPPONENTS = ("random", "connect_four_lookahead")
RESULT_FILE = "matches.json"


def measure(
    config: str | None,
    minutes: float,
    opponents: Sequence[str] = DEFAULT_OPPONENTS,
    games: int = 1000,
    overrides: Sequence[str] = (),
    run_dir: str | Path | None = None,
    greedy: bool = False,
) -> dict:
    import fastrl
    from fastrl.api import resolve_config
    from fastrl.evaluation.matches import play_matches
    from fastrl.runs.run_dir import default_run_dir

    if not (math.isfinite(minutes) and minutes > 0):
        raise ConfigError(f"--minutes {minutes!r}: expected a number of minutes > 0")
    if games < 1:
        raise ConfigError(f"--games {games!r}: expected an int >= 1")
    refuse_set_keys(list(overrides), {"run.max_seconds": "--minutes"})
    resolved = resolve_config(config or DEFAULT_CONFIG, [*overrides, f"run.max_seconds={minutes * 60.0!r}"])
    run_path = Path(run_dir) if run_dir is not None else default_run_dir(resolved)
    summary = fastrl.train(resolved, run_dir=run_path)
    results = {opponent: play_matches(run_path, opponent, games=games, greedy=greedy) for opponent in opponents}
    result = {
        "config": config or DEFAULT_CONFIG,
        "overrides": list(overrides),
        "minutes": minutes,
        "train_s": summary["train_s"],
        "frames": summary["frames"],
        "fps": summary["fps"],
        "games": games,
        "greedy": greedy,
        "matches": {
            opponent: {k: r[k] for k in ("wins", "draws", "losses", "win_rate", "score_rate", "return_mean", "by_seat")}
            for opponent, r in results.items()
        },
        "run_dir": str(run_path),
        "env_id": resolved.env.id,
        "selfplay": resolved.selfplay.opponents,
        "machine": machine_info(),
    }
    (run_path / RESULT_FILE).write_text(json.dumps(result, indent=2) + "\n")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help=f"TOML config or shipped name (default: {DEFAULT_CONFIG})")
    parser.add_argument("--minutes", type=float, required=True, help="training time cap, in minutes")
    parser.add_argument(
        "--opponent",
        action="append",
        default=[],
        metavar="PLAYER",
        help=f"an opponent to play after training (repeat; default: {', '.join(DEFAULT_OPPONENTS)})",
    )
    parser.add_argument("--games", type=int, default=1000, help="games against each opponent (default 1000)")
    parser.add_argument(
        "--greedy", action="store_true", help="the policy (and a checkpoint opponent) plays its argmax, not a sample"
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key")
    parser.add_argument("--run-dir", help="run directory (default: run.dir/<time>_<env>_<mode>)")


def run(args: argparse.Namespace) -> int:
    from fastrl.bench import report

    opponents = args.opponent or DEFAULT_OPPONENTS
    return report(
        lambda: measure(args.config, args.minutes, opponents, args.games, args.set, args.run_dir, args.greedy)
    )
