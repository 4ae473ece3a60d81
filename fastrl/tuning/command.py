"""``fastrl tune CONFIG --param KEY=KIND:... --target R --max-minutes M [--seeds 0,1] [--trials N]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fastrl.config import ConfigError
from fastrl.errors import install_hint
from fastrl.tuning.params import PARAM_GRAMMAR, parse_param

EXIT_BAD_INPUT = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config or shipped config name (default: the default job)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=KIND:...", help=PARAM_GRAMMAR)
    parser.add_argument(
        "--objective", choices=("time-to-score",), default="time-to-score", help="what a trial minimises"
    )
    parser.add_argument("--target", type=float, required=True, help="the mean raw score to reach")
    parser.add_argument("--max-minutes", type=float, required=True, help="each seed's training time cap")
    parser.add_argument("--window", type=int, default=20, help="episodes the mean is taken over (default 20)")
    parser.add_argument("--seeds", default="0", help="comma-separated run.seed values each trial trains (default 0)")
    parser.add_argument("--trials", type=int, default=20, help="trials completed or pruned to end at (default 20)")
    parser.add_argument("--jobs", type=int, default=1, help="trials at once, each on its share of the cores")
    parser.add_argument(
        "--prune-every-frames",
        type=int,
        default=250_000,
        help="report the first seed's mean score every N frames to the median pruner (0: no pruning)",
    )
    parser.add_argument("--study", help="the study's folder (default: run.dir/tune-<config>); rerun to go on")
    parser.add_argument("--sampler-seed", type=int, default=0, help="the TPE sampler's seed")
    parser.add_argument(
        "--startup-trials",
        type=int,
        default=10,
        help="trials drawn at random before TPE models the others (default 10, Optuna's; lower it for short studies)",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="fixed config overrides")


def run(args: argparse.Namespace) -> int:
    try:
        options = _options(args)
        from fastrl.tuning.study import run_study

        summary = run_study(options)
    except ConfigError as exc:
        print(f"fastrl tune: bad input: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ImportError as exc:
        print(f"fastrl tune needs optuna: {install_hint('tune')} ({exc})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("\nfastrl tune: stopped; run the same command again to go on with the study", file=sys.stderr)
        return 130
    print(json.dumps(summary))
    return 0


def _options(args: argparse.Namespace):
    from fastrl.api import resolve_config
    from fastrl.tuning.study import TuneOptions

    try:
        seeds = tuple(int(s) for s in args.seeds.split(",") if s.strip())
    except ValueError:
        raise ConfigError(f"--seeds {args.seeds!r}: expected comma-separated integers, e.g. 0,1") from None
    if not seeds:
        raise ConfigError("--seeds: at least one seed")
    if args.startup_trials < 0:
        raise ConfigError(f"--startup-trials {args.startup_trials}: expected 0 or more trials")
    if args.prune_every_frames < 0:
        raise ConfigError(f"--prune-every-frames {args.prune_every_frames}: expected 0 (off) or more frames")
    base = resolve_config(args.config, args.set)
    name = Path(args.config).stem if args.config else "default"
    study = Path(args.study) if args.study else Path(base.run.dir).expanduser() / f"tune-{name}"
    return TuneOptions(
        config=args.config,
        params=tuple(parse_param(text) for text in args.param),
        study_dir=study,
        target=args.target,
        max_minutes=args.max_minutes,
        seeds=seeds,
        trials=args.trials,
        window=args.window,
        overrides=tuple(args.set),
        prune_every_frames=args.prune_every_frames,
        jobs=args.jobs,
        sampler_seed=args.sampler_seed,
        startup_trials=args.startup_trials,
    )
