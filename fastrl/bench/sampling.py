"""How fast the whole engine collects Atari experience, against the references, in one run.

Runs fastrl (executors, queues, actors, and the learner's barriers without updates) for S
seconds with a uniform random or the config's model policy, then — in the same invocation,
one after the other — the raw emulator on every core (the physical limit) and ale-py's
AtariVectorEnv with the same preprocessing and number of envs. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import tempfile

import fastrl
from fastrl.bench.references import atari_vector_env_fps, raw_emulator_fps
from fastrl.envs.atari import is_atari_id, parse_atari_id


def engine_fps(config: str | None, seconds: float, policy: str, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        extra = ["algo.name='none'", f"run.max_seconds={seconds}", "run.total_frames=1_000_000_000_000",
                 "run.progress=false", f"run.dir='{workdir}'"]
        if policy == "random":
            extra.append("model.name='random'")
        resolved = fastrl.api.resolve_config(config, [*overrides, *extra])
        summary = fastrl.train(resolved)
    frame_skip = resolved.env.atari.frame_skip
    return {
        "config": config, "policy": policy, "envs": resolved.engine.envs, "executors": resolved.engine.executors,
        "actors": resolved.engine.actors, "mode": resolved.engine.mode, "seconds": summary["train_s"],
        "frames_per_s": summary["fps"], "agent_steps_per_s": round(summary["fps"] / frame_skip, 1),
        "time_split": summary["time_split"],
    }


def measure(config: str | None, seconds: float = 10.0, policy: str = "random", overrides: list[str] = ()) -> dict:
    resolved = fastrl.api.resolve_config(config, list(overrides))
    if not is_atari_id(resolved.env.id):
        raise ValueError(f"fastrl bench sampling measures Atari configs; env.id = {resolved.env.id!r} is not one")
    game, _ = parse_atari_id(resolved.env.id)
    ours = engine_fps(config, seconds, policy, list(overrides))
    raw = raw_emulator_fps(game, seconds)
    vector = atari_vector_env_fps(game, resolved.engine.envs, seconds)
    return {
        "fastrl": ours,
        "raw_emulator": {k: raw[k] for k in ("processes", "fps")},
        "atari_vector_env": {k: vector[k] for k in ("num_envs", "batch_size", "fps")},
        "of_raw_emulator": round(ours["frames_per_s"] / raw["fps"], 3),
        "vs_atari_vector_env": round(ours["frames_per_s"] / vector["fps"], 3),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="TOML config (default: the default config, Pong hts)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds each of the three measurements runs")
    parser.add_argument("--policy", choices=("random", "model"), default="random")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.config, args.seconds, args.policy, args.set)))


if __name__ == "__main__":
    main()
