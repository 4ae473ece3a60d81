"""``fastrl bench paired``: settings compared by their sampling speed on a machine whose speed drifts.

A shared VM's cores can run 30% apart from one minute to the next, more than most settings change, so two runs made
minutes apart compare the machine with itself. Here each round runs every variant once, ``--seconds`` each, one
after another, the order reversed every other round (no variant always runs first or last), and each variant is read
as a ratio to the first variant of the same round: the median of those paired ratios is the comparison, the median
frames/s and the executors' waiting share beside it. The engine samples as ``fastrl bench sampling`` runs it
(``algo.name = "none"``; a uniform random policy, or the config's model with ``--policy model``).

    fastrl bench paired configs/pong_sync.toml --variant "sync: engine.mode='sync'" --variant "hts: engine.mode='hts'"

A variant is ``NAME: KEY=VALUE; KEY=VALUE`` (``NAME:`` alone runs the config as it is, with ``--set``'s keys).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass

from fastrl.bench.machine import machine_info
from fastrl.bench.sampling import SAMPLING_ONLY, engine_fps


@dataclass(frozen=True)
class Variant:
    name: str
    overrides: tuple[str, ...]


def parse_variant(text: str) -> Variant:
    """``NAME: KEY=VALUE; KEY=VALUE`` -> Variant; ValueError naming what is wrong."""
    name, colon, rest = text.partition(":")
    overrides = tuple(part.strip() for part in rest.split(";") if part.strip())
    if not colon or not name.strip():
        raise ValueError(f"--variant {text!r}: expected NAME: KEY=VALUE; KEY=VALUE (NAME: alone for the config as is)")
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ValueError(f"--variant {name.strip()!r}: {bad[0]!r} is not KEY=VALUE")
    return Variant(name.strip(), overrides)


def check(config: str | None, variants: list[Variant], common: list[str], rounds: int, seconds: float) -> None:
    """Bad input named before anything runs: the counts, the names, and every variant's config (its keys and values)."""
    import fastrl

    if len(variants) < 2:
        raise ValueError("give at least two --variant to compare")
    names = [v.name for v in variants]
    if len(set(names)) < len(names):
        raise ValueError(f"--variant names must differ: {names}")
    if rounds < 1 or seconds <= 0:
        raise ValueError("--rounds must be at least 1 and --seconds above 0")
    for variant in variants:
        fastrl.api.resolve_config(config, [*common, *variant.overrides, *SAMPLING_ONLY])  # ConfigError names the key


def measure(
    config: str | None, variants: list[Variant], common: list[str], rounds: int, seconds: float, policy: str
) -> dict:
    per_round: list[dict[str, dict]] = []
    for r in range(rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        per_round.append({v.name: engine_fps(config, seconds, policy, [*common, *v.overrides]) for v in order})
    first = variants[0].name
    results = {}
    for variant in variants:
        fps = [row[variant.name]["frames_per_s"] for row in per_round]
        paired = [row[variant.name]["frames_per_s"] / row[first]["frames_per_s"] for row in per_round]
        waiting = [row[variant.name]["time_split_by_role"]["executors"]["waiting"] for row in per_round]
        results[variant.name] = {
            "overrides": list(variant.overrides),
            "frames_per_s": round(statistics.median(fps), 1),
            "of_first": round(statistics.median(paired), 3),
            "per_round_fps": [round(f, 1) for f in fps],
            "per_round_of_first": [round(p, 3) for p in paired],
            "executors_waiting": round(statistics.median(waiting), 4),
        }
    return {
        "config": config,
        "policy": policy,
        "seconds": seconds,
        "rounds": rounds,
        "first": first,
        "variants": results,
        "machine": machine_info(),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default config)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="'NAME: KEY=VALUE; ...'",
        help="a setting to compare (two or more); the first is the one the others are read against",
    )
    parser.add_argument("--rounds", type=int, default=4, help="rounds, each running every variant once (default 4)")
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds each variant runs in a round (default 6)")
    parser.add_argument("--policy", choices=("random", "model"), default="random")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every variant")


def run(args: argparse.Namespace) -> int:
    from fastrl.bench import report

    def compared() -> dict:
        variants = [parse_variant(text) for text in args.variant]
        check(args.config, variants, args.set, args.rounds, args.seconds)
        return measure(args.config, variants, args.set, args.rounds, args.seconds, args.policy)

    try:
        return report(compared)
    except ValueError as exc:
        print(f"fastrl bench paired: {exc}", file=sys.stderr)
        return 2
