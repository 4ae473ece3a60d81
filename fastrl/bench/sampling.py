"""How fast the whole engine collects Atari experience, against the references, in one run.

Runs fastrl (executors, queues, actors, and the learner's barriers without updates) for S
seconds with a uniform random or the config's model policy, then — in the same invocation,
one after the other — the raw emulator on every core (the physical limit) and ale-py's
AtariVectorEnv with the same preprocessing and number of envs. Prints one JSON line.

``--adapter-loop`` adds a fourth measurement: the config's own env adapters stepped in one bare
loop per executor, no engine around them (``references.adapter_loop_fps``). ``of_adapter_loop``
is then the share of that the whole engine keeps: what its processes, queues, actors and
barriers cost, apart from what the preprocessing costs (the adapter loop against the raw emulator).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Sequence

import fastrl
from fastrl.bench.references import adapter_loop_fps, atari_vector_env_fps, raw_emulator_fps
from fastrl.config import resolved_int
from fastrl.envs.atari import is_atari_id, parse_atari_id
from fastrl.process.auto_layout import resolve_layout


def engine_fps(config: str | None, seconds: float, policy: str, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        extra = [
            "algo.name='none'",
            f"run.max_seconds={seconds}",
            "run.total_frames=1_000_000_000_000",
            "run.progress=false",
            f"run.dir='{workdir}'",
        ]
        if policy == "random":  # obs-blind: nothing to normalise, and no learner to move statistics
            extra += ["model.name='random'", "model.normalize_obs=false", "algo.normalize_returns=false"]
        resolved = resolve_layout(fastrl.api.resolve_config(config, [*overrides, *extra]))  # report the numbers
        summary = fastrl.train(resolved)
    frame_skip = resolved.env.atari.frame_skip
    return {
        "config": config,
        "policy": policy,
        "envs": resolved.engine.envs,
        "executors": resolved.engine.executors,
        "actors": resolved.engine.actors,
        "mode": resolved.engine.mode,
        "seconds": summary["train_s"],
        "frames_per_s": summary["fps"],
        "agent_steps_per_s": round(summary["fps"] / frame_skip, 1),
        "time_split": summary["time_split"],
    }


def measure(
    config: str | None,
    seconds: float = 10.0,
    policy: str = "random",
    overrides: Sequence[str] = (),
    rounds: int = 3,
    adapter_loop: bool = False,
) -> dict:
    """``rounds`` rounds of the three (with ``adapter_loop`` four) measurements, each order rotated
    by one per round; ratios are taken within a round and the medians reported (this VM's speed
    drifts by 15% over a minute)."""
    resolved = resolve_layout(fastrl.api.resolve_config(config, list(overrides)))  # the adapter loop's executors
    if not is_atari_id(resolved.env.id):
        raise ValueError(f"fastrl bench sampling measures Atari configs; env.id = {resolved.env.id!r} is not one")
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    game, _ = parse_atari_id(resolved.env.id)
    runs = {
        "fastrl": lambda: engine_fps(config, seconds, policy, list(overrides)),
        "raw_emulator": lambda: raw_emulator_fps(game, seconds),
        "atari_vector_env": lambda: atari_vector_env_fps(game, resolved.engine.envs, seconds),
    }
    if adapter_loop:
        runs["adapter_loop"] = lambda: adapter_loop_fps(
            resolved.env, resolved.engine.envs, resolved_int(resolved.engine.executors, "engine.executors"), seconds
        )
    names = list(runs)
    per_round = []
    for i in range(rounds):
        k = i % len(names)
        order = names[k:] + names[:k]
        per_round.append({name: runs[name]() for name in order})
    ours = [r["fastrl"] for r in per_round]
    of_raw = [r["fastrl"]["frames_per_s"] / r["raw_emulator"]["fps"] for r in per_round]
    vs_vector = [r["fastrl"]["frames_per_s"] / r["atari_vector_env"]["fps"] for r in per_round]
    median_run = sorted(ours, key=lambda r: r["frames_per_s"])[len(ours) // 2]
    result = {
        "fastrl": {
            **median_run,
            "frames_per_s": round(statistics.median(r["frames_per_s"] for r in ours), 1),
            "agent_steps_per_s": round(statistics.median(r["agent_steps_per_s"] for r in ours), 1),
        },
        "raw_emulator": {
            "processes": per_round[0]["raw_emulator"]["processes"],
            "fps": round(statistics.median(r["raw_emulator"]["fps"] for r in per_round), 1),
        },
        "atari_vector_env": {
            "num_envs": resolved.engine.envs,
            "batch_size": resolved.engine.envs,
            "fps": round(statistics.median(r["atari_vector_env"]["fps"] for r in per_round), 1),
        },
        "of_raw_emulator": round(statistics.median(of_raw), 3),
        "vs_atari_vector_env": round(statistics.median(vs_vector), 3),
        "rounds": [
            {
                "fastrl_fps": round(r["fastrl"]["frames_per_s"], 1),
                "raw_fps": round(r["raw_emulator"]["fps"], 1),
                "atari_vector_env_fps": round(r["atari_vector_env"]["fps"], 1),
                "of_raw_emulator": round(a, 3),
                "vs_atari_vector_env": round(b, 3),
            }
            for r, a, b in zip(per_round, of_raw, vs_vector)
        ],
    }
    if adapter_loop:
        of_loop = [r["fastrl"]["frames_per_s"] / r["adapter_loop"]["fps"] for r in per_round]
        result["adapter_loop"] = {
            "processes": resolved.engine.executors,
            "fps": round(statistics.median(r["adapter_loop"]["fps"] for r in per_round), 1),
        }
        result["of_adapter_loop"] = round(statistics.median(of_loop), 3)
        result["adapter_loop_of_raw_emulator"] = round(
            statistics.median(r["adapter_loop"]["fps"] / r["raw_emulator"]["fps"] for r in per_round), 3
        )
        for row, r, ratio in zip(result["rounds"], per_round, of_loop):
            row["adapter_loop_fps"], row["of_adapter_loop"] = round(r["adapter_loop"]["fps"], 1), round(ratio, 3)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default config, Pong hts)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds each of the three measurements runs")
    parser.add_argument("--policy", choices=("random", "model"), default="random")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds of the three measurements; the medians of the per-round ratios are reported",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--adapter-loop",
        action="store_true",
        help="also step the config's env adapters in bare loops, one per executor, without the "
        "engine: of_adapter_loop is the share of that the engine keeps",
    )


def run(args: argparse.Namespace) -> int:
    """Measure with the parsed ``add_arguments`` options and print the JSON line."""
    print(json.dumps(measure(args.config, args.seconds, args.policy, args.set, args.rounds, args.adapter_loop)))
    return 0
