"""The ``fastrl`` command: train, eval, export, plot, bench, cleanup, config.

Exit codes: 0 done, 1 a fault ended the run, 2 bad input (before anything started),
130 Ctrl-C, 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from typing import NoReturn

from fastrl.config import ConfigError
from fastrl.tuning import command as tune_command

EXIT_BAD_INPUT = 2


def _train(args: argparse.Namespace) -> int:
    from fastrl.api import shutdown

    try:
        return _run_training(args)
    finally:  # the command returns only once every process it started is gone and reaped
        shutdown()


def _run_training(args: argparse.Namespace) -> int:
    from fastrl.api import train
    from fastrl.process.faults import RunFailed, RunInterrupted, describe_exception

    try:
        if args.resume and args.config:
            raise ConfigError("give either CONFIG or --resume RUN_DIR: a resumed run keeps its own config")
        if args.resume:
            summary = train(None, args.set or [], resume=args.resume)
        else:
            summary = train(args.config, args.set or [], run_dir=args.run_dir)
    except ConfigError as exc:
        print(f"fastrl: bad config: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RunFailed as exc:
        _say(f"\nfastrl: the run failed and was stopped cleanly. {exc}")
        return exc.exit_code
    except RunInterrupted as exc:
        _say(f"\nfastrl: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:  # before the run started: nothing to clean
        print("\nfastrl: interrupted before the run started.", file=sys.stderr)
        return 130
    except OSError as exc:  # before the run started: its directory could not be written (a full disk)
        _say(f"fastrl: the run could not start: {describe_exception(exc, 0)}")
        return 1
    from fastrl.telemetry.progress import closing_line

    print(json.dumps(summary))
    _say(f"fastrl: {closing_line(summary)} ({summary['run_dir']})")
    return 0


def _say(text: str) -> None:
    """The run's closing paragraph, on stderr unless the terminal is gone (a dropped ssh session: SIGHUP,
    then every write fails with EIO); the run's files say how it ended either way."""
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass


def _eval(args: argparse.Namespace) -> int:
    from fastrl.envs.actions import UnsupportedEnvError
    from fastrl.evaluation import evaluate
    from fastrl.evaluation.matches import play_matches

    try:
        if args.opponent is not None:
            result = play_matches(
                args.target,
                opponent=args.opponent,
                games=args.episodes,
                seed=args.seed,
                greedy=args.greedy,
                params=args.params,
                trust_code=args.trust_code,
                env_id=args.env,
            )
        else:
            result = evaluate(
                args.target,
                episodes=args.episodes,
                params=args.params,
                seed=args.seed,
                greedy=args.greedy,
                max_steps=args.max_steps,
                video=args.video,
                trust_code=args.trust_code,
                env_id=args.env,
            )
    except (ConfigError, UnsupportedEnvError) as exc:  # --env naming no env fastrl can make is bad input too
        print(f"fastrl: cannot evaluate: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("\nfastrl: evaluation interrupted.", file=sys.stderr)
        return 130
    print(json.dumps(result))
    return 0


def _export(args: argparse.Namespace) -> int:
    import dataclasses

    from fastrl.evaluation.export import export_policy

    try:
        exported = export_policy(
            args.target,
            format=args.format,
            out=args.out,
            params=args.params,
            greedy=args.greedy,
            trust_code=args.trust_code,
        )
    except ConfigError as exc:
        print(f"fastrl export: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a full disk: the file that was at --out is as it was
        print(f"fastrl export: could not write the policy ({exc}); nothing was replaced", file=sys.stderr)
        return 1
    print(json.dumps(dataclasses.asdict(exported), default=str))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from fastrl.telemetry.plot import plot_runs

    out = args.out or (Path(args.runs[0]) / "plot.png" if len(args.runs) == 1 else Path("plot.png"))
    try:
        plot_runs(args.runs, x=args.x, out=out)
    except ConfigError as exc:
        print(f"fastrl plot: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(out)
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    from fastrl.buffers.arena import SHM_DIR, foreign_stale_segments, sweep_stale_segments
    from fastrl.process.lifeline import kill_workers_of_dead_runs

    killed = kill_workers_of_dead_runs()  # first: they hold the segments' memory until they are gone
    if killed:
        print(f"fastrl cleanup: killed {len(killed)} worker processes of dead runs:")
        for pid, name in sorted(killed.items()):
            print(f"  pid {pid}  (mapped {name})")
    removed = sweep_stale_segments()
    for name, size, uid in foreign_stale_segments():
        print(
            f"fastrl cleanup: left {name} ({size / 2**20:.1f} MiB) alone: a dead run of uid {uid}; only they or root "
            "can remove it"
        )
    if not removed:
        print(f"fastrl cleanup: no segments of this user's dead runs in {SHM_DIR}")
        return 0
    mib = sum(size for _, size in removed) / 2**20
    print(f"fastrl cleanup: removed {len(removed)} shared-memory segments of dead runs ({mib:.1f} MiB) from {SHM_DIR}:")
    for name, size in removed:
        print(f"  {name}  {size / 2**20:.1f} MiB")
    return 0


def _bench(args: argparse.Namespace) -> int:
    """Each benchmark prints its JSON; its exit code: 2 for bad input, a training run's own codes, 1 if a
    rank failed."""
    return args.bench_run(args)


def _config(args: argparse.Namespace) -> int:
    from fastrl.config import DEFAULT_JOB, field_docs, reference_markdown

    if args.markdown:
        print(reference_markdown(), end="")
        return 0
    print(
        f"# the defaults every config starts from (an empty config gets them); `fastrl train` with no CONFIG runs "
        f"the shipped {DEFAULT_JOB.name}"
    )
    for key, default, doc in field_docs():
        print(f"{key:40s} {default!r:>22}  {doc}")
    return 0


def _benches() -> dict:
    """``fastrl bench NAME``: each benchmark module's ``add_arguments`` and ``run``, with its help line."""
    from fastrl.bench import (
        ale_states,
        crafter,
        device_check,
        gala_straggler,
        hts_speedup,
        instructions,
        invariance,
        learner,
        matches,
        multinode,
        paired,
        policy_lag,
        references,
        sampling,
        soak,
        startup,
        suite,
        time_to_score,
        two_player,
    )

    return {
        "sampling": (sampling, "engine vs raw emulator vs AtariVectorEnv"),
        "paired": (paired, "settings compared by sampling speed, run in turn round after round: paired ratios"),
        "instructions": (
            instructions,
            "instructions and simulated cache misses an agent step under cachegrind: raw emulator, adapters, engine",
        ),
        "references": (references, "the Atari references alone: raw emulator on every core, AtariVectorEnv"),
        "learner": (learner, "a config's training step and actor forward: eager vs compiled, fp32 vs bf16, by threads"),
        "hts-speedup": (hts_speedup, "sync vs hts on DelayEnv (HTS-RL Claim 1)"),
        "policy-lag": (policy_lag, "async policy lag vs envs, next to hts and sync"),
        "gala-straggler": (gala_straggler, "gala ring vs allreduce with a slow learner"),
        "multinode": (
            multinode,
            "gradient all-reduce per update, 1 and 2 ranks on localhost (gloo), projected to N nodes",
        ),
        "time-to-score": (
            time_to_score,
            "train until the mean score of the last W episodes reaches a target, or a time cap",
        ),
        "matches": (matches, "a multi-agent config trained for a time, then matches against named opponents"),
        "two-player": (two_player, "the engine on a two-player Atari game against the one-player game"),
        "soak": (soak, "a long run watched: RSS slope per role, fds, segments, fastrl plot, kill -9 and exact resume"),
        "startup": (startup, "a run's seconds from train() to return, workers forked from the fork server vs spawned"),
        "crafter": (crafter, "a Crafter run's score and 22 success rates; --speed: Crafter alone vs the engine"),
        "suite": (suite, "a config on several Atari games and seeds: human-normalised IQM and median with intervals"),
        "invariance": (invariance, "a device's forward: rows that change with their batch, error against the CPU"),
        "device-check": (device_check, "every GPU measurement in one capped run, each step's JSON as it finishes"),
        "ale-states": (ale_states, "per Atari ROM: does ALE's saved state go on alike elsewhere (exact resume)?"),
    }


def _configs(args: argparse.Namespace) -> int:
    from fastrl.config.reference import shipped_config_lines

    print("# the shipped configs: fastrl train NAME (from any directory); fastrl train alone runs pong_sync")
    for line in shipped_config_lines():
        print(line)
    return 0


def _add_trust_code(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-code",
        action="store_true",
        help="import and call the module:factory env or model the checkpoint's config names "
        "(refused without it: a shared run's config could name any code)",
    )


def build_parser(with_benches: bool = True) -> argparse.ArgumentParser:
    """The CLI's parser. ``with_benches=False`` leaves ``fastrl bench``'s sub-commands out: their modules import
    torch (~2 s), which a command that never runs a benchmark (``--help``, a config refused) should not wait for."""
    parser = argparse.ArgumentParser(prog="fastrl", description="shared-memory high-throughput deep RL")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=_version_line())
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser(
        "train",
        help="train an agent (no CONFIG: the default job, pong_sync)",
        description="Train an agent. With no CONFIG, the default job (pong_sync: PPO on Pong) runs until the mean "
        "raw score of the last 20 episodes reaches 18 (run.target_return, run.return_window) or 10M frames "
        "(run.total_frames), whichever comes first; the last line says which, after how long and how many frames.",
    )
    train.add_argument("config", nargs="?", help="a TOML config file, or a shipped config by name (fastrl configs)")
    train.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key, e.g. engine.envs=8")
    train.add_argument("--run-dir", help="run directory (default: run.dir/<time>_<env>_<mode>)")
    train.add_argument(
        "--resume", metavar="RUN_DIR", help="go on with a stopped run (or from one of its checkpoints/ckpt-*.pt files)"
    )
    train.set_defaults(func=_train)
    evaluate = sub.add_parser("eval", help="play a trained policy for some episodes; prints its returns as JSON")
    evaluate.add_argument(
        "target", metavar="TARGET", help="run directory, its checkpoints/ folder or a checkpoint file"
    )
    evaluate.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    evaluate.add_argument(
        "--params",
        default="auto",
        metavar="auto|average|learner-<i>|policy-<name>",
        help="which parameters: auto (the target's checkpoint), average or learner-<i> (gala runs), policy-<name> "
        "(a named policy of multiagent.policies)",
    )
    evaluate.add_argument(
        "--seed", type=int, default=0, help="seeds the episodes' resets and sampled actions (default 0)"
    )
    evaluate.add_argument("--greedy", action="store_true", help="take the argmax action instead of sampling")
    evaluate.add_argument(
        "--opponent",
        metavar="PLAYER",
        help="multi-agent runs: play --episodes games against PLAYER (random, connect_four_lookahead, a "
        "package.module:factory or a run directory) and count wins, draws and losses",
    )
    evaluate.add_argument("--max-steps", type=int, metavar="N", help="cut each episode after N agent steps")
    evaluate.add_argument(
        "--env",
        metavar="ENV_ID",
        help="play on this env instead of the run's, where its rows are the run's (a self-play Pong policy as "
        "the one player of PongNoFrameskip-v4; with --opponent, a multi-agent game: a one-player Pong policy "
        "in pettingzoo.atari:pong_v3)",
    )
    evaluate.add_argument(
        "--video",
        metavar="FILE",
        help="record the episodes into FILE.mp4 or FILE.gif "
        "(Atari: the emulator's colour screen); needs pip install 'fastrl-engine[video]'",
    )
    _add_trust_code(evaluate)
    evaluate.set_defaults(func=_eval)
    export = sub.add_parser(
        "export",
        help="write a trained policy as an ONNX or TorchScript file that runs without "
        "fastrl (normalisers inside; prints its inputs and outputs as JSON)",
    )
    export.add_argument("target", metavar="RUN", help="run directory, its checkpoints/ folder or a checkpoint file")
    export.add_argument(
        "--format",
        choices=("onnx", "torchscript"),
        default="onnx",
        help="onnx (needs pip install 'fastrl-engine[export]') or torchscript (default onnx)",
    )
    export.add_argument("--out", metavar="FILE", help="where to write (default RUN/policy.onnx or RUN/policy.pt)")
    export.add_argument(
        "--params",
        default="auto",
        metavar="auto|average|learner-<i>|policy-<name>",
        help="which parameters: auto (the target's checkpoint), average or learner-<i> (gala runs), policy-<name> "
        "(a named policy of multiagent.policies)",
    )
    export.add_argument(
        "--greedy",
        action="store_true",
        help="also output the greedy action (the argmax, per dimension; a Gaussian's mean) first",
    )
    _add_trust_code(export)
    export.set_defaults(func=_export)
    plot = sub.add_parser("plot", help="learning curves of runs (return, fps, time split) into a PNG")
    plot.add_argument("runs", nargs="+", metavar="RUN", help="run directories (each holds metrics.jsonl)")
    plot.add_argument(
        "--x", choices=("frames", "seconds"), default="frames", help="x axis: env frames (default) or training seconds"
    )
    plot.add_argument(
        "--out",
        metavar="FILE.png",
        help="where to write (default RUN/plot.png for one run, "
        "./plot.png for several); .pdf and .svg work too; needs pip install 'fastrl-engine[plot]'",
    )
    plot.set_defaults(func=_plot)
    cleanup = sub.add_parser("cleanup", help="free the shared memory left in /dev/shm by runs that were killed")
    cleanup.set_defaults(func=_cleanup)
    bench = sub.add_parser("bench", help="throughput benchmarks; each prints JSON")
    benches = bench.add_subparsers(dest="bench", required=True)
    for name, (module, text) in (_benches() if with_benches else {}).items():
        bench_parser = benches.add_parser(name, help=text)
        module.add_arguments(bench_parser)
        bench_parser.set_defaults(bench_run=module.run)
    bench.set_defaults(func=_bench)
    tune = sub.add_parser("tune", help="search config values for the least time to a score (Optuna; resumable)")
    tune_command.add_arguments(tune)
    tune.set_defaults(func=tune_command.run)
    configs = sub.add_parser("configs", help="list the shipped configs, one line each (run one by name)")
    configs.set_defaults(func=_configs)
    config = sub.add_parser("config", help="list every config key with its default and meaning")
    config.add_argument(
        "--markdown", action="store_true", help="as the Markdown page docs/config-reference.md (one table per section)"
    )
    config.set_defaults(func=_config)
    return parser


def _version_line() -> str:
    import fastrl

    return f"fastrl {fastrl.__version__} (distribution {fastrl.DISTRIBUTION}, Python {sys.version.split()[0]})"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(with_benches="bench" in argv).parse_args(argv)
    _working_folder_importable()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return args.func(args)


def _working_folder_importable() -> None:
    """A ``module:factory`` env, model or algorithm in the folder fastrl runs from imports, as under ``python -m``:
    the console script's path starts at its own folder. Appended, so it never shadows an installed module."""
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)


def run() -> NoReturn:
    """The ``fastrl`` command as a process: ``main``, then exit without the interpreter's last full collection."""
    code = main()
    # Python's shutdown walks every object torch and its imports made (~0.8 s of a short run on 2 cores) to find
    # cycles that are about to be freed with the process anyway; frozen objects are skipped. atexit handlers
    # (log and TensorBoard flushes) still run.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    run()
