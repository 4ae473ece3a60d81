"""How fast the whole engine collects Atari experience, against the references, in one run.

Runs fastrl (executors, queues, actors, and the learner's barriers without updates) for S
seconds with a uniform random or the config's model policy and, in the same invocation, one
after the other, ale-py's AtariVectorEnv with the same preprocessing and number of envs, both
between two readings of the raw emulator on every core (the physical limit): rounds whose two
readings disagree ran on a machine whose speed moved and are left out. Prints one JSON line.

``--executors 1 2 4 8 14`` measures instead how the engine scales over cores: for each count N, fastrl with
N executors of ``--envs-per-executor`` envs each, the raw emulator in N processes (the same cores' limit)
and AtariVectorEnv with the same envs on N threads, asynchronous (it steps whichever half of its envs is
ready, its fastest setting); one row per count, in one JSON line (``scaling``).

``--backend ale_vector`` adds the engine again on that env backend (``env.backend``), in the same rounds.

``--adapter-loop`` adds a fourth measurement: the config's own env adapters stepped in one bare
loop per executor, no engine around them (``references.adapter_loop_fps``). ``of_adapter_loop``
is then the share of that the whole engine keeps: what its processes, queues, actors and
barriers cost, apart from what the preprocessing costs (the adapter loop against the raw emulator).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
from collections.abc import Sequence

import fastrl
from fastrl.bench.references import adapter_loop_fps, atari_vector_env_fps, raw_emulator_fps
from fastrl.config import Config, resolved_int
from fastrl.devices import resolve_devices
from fastrl.envs import probe_env
from fastrl.envs.atari import is_atari_id, parse_atari_id
from fastrl.process.auto_layout import resolve_layout

log = logging.getLogger(__name__)

# sampling without learning: any mode takes algo "none", and no learner is there to normalise returns (PPO's key,
# which the default job and crafter_ppo set true, would fail validation with another mode's algorithm)
SAMPLING_ONLY = ["algo.name='none'", "algo.normalize_returns=false"]


def sampling_layout(config: str | None, overrides: Sequence[str]) -> Config:
    """The config as the engine samples it (``SAMPLING_ONLY``), its layout resolved: for the references' sizes."""
    return resolve_layout(resolve_devices(fastrl.api.resolve_config(config, [*overrides, *SAMPLING_ONLY])))


def engine_fps(config: str | None, seconds: float, policy: str, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        extra = [
            *SAMPLING_ONLY,
            f"run.max_seconds={seconds}",
            "run.total_frames=1_000_000_000_000",
            "run.progress=false",
            f"run.dir='{workdir}'",
        ]
        if policy == "random":  # obs-blind: nothing to normalise, and no learner to move statistics
            extra += ["model.name='random'", "model.normalize_obs=false"]
        placed = resolve_devices(fastrl.api.resolve_config(config, [*overrides, *extra]))
        info = probe_env(placed.env)
        resolved = resolve_layout(placed, agents=info.agents)  # report the numbers (agent rows share executors)
        summary = fastrl.train(resolved)
    # the envs' pace: every row stepped, rollouts still in flight at the stop too; the learned frames/s of a run
    # this short leaves those out (up to a rollout in hts, the unfilled slots in async: 2048 of Crafter's ~7,000
    # steps in 8 s), which is no cost of sampling
    steps_per_s = summary["env_steps_per_s"]
    return {
        "config": config,
        "policy": policy,
        "envs": resolved.engine.envs,
        "executors": resolved.engine.executors,
        "actors": resolved.engine.actors,
        "mode": resolved.engine.mode,
        "seconds": summary["train_s"],
        "frames_per_s": round(steps_per_s * info.frames_per_step, 1),
        "agent_steps_per_s": steps_per_s,
        "learned_frames_per_s": summary["fps"],
        "time_split": summary["time_split"],
        "time_split_by_role": summary["time_split_by_role"],
    }


# a round whose two raw readings (before and after the others) differ by more than this share of their mean ran on
# a machine whose speed moved under it: its ratios compare the engine with a reference from another moment
STEADY_DRIFT = 0.10


def measure(
    config: str | None,
    seconds: float = 10.0,
    policy: str = "random",
    overrides: Sequence[str] = (),
    rounds: int = 3,
    adapter_loop: bool = False,
    backend: str | None = None,
    steady_drift: float = STEADY_DRIFT,
) -> dict:
    """``rounds`` rounds of the measurements (a fourth with ``adapter_loop``, another with ``backend``: the engine
    again with ``env.backend`` set to it), their order rotated by one per round, between two readings of the raw
    emulator: each ratio is taken to their mean, within its round. The medians are of the steady rounds (raw
    readings within ``steady_drift`` of each other), or of all rounds where none was steady: a VM's cores change
    speed by a third from one minute to the next, which three rounds alone do not average out."""
    resolved = sampling_layout(config, overrides)  # the adapter loop's executors
    if not is_atari_id(resolved.env.id):
        raise ValueError(f"fastrl bench sampling measures Atari configs; env.id = {resolved.env.id!r} is not one")
    if rounds < 1:
        raise ValueError(f"--rounds must be at least 1, got {rounds}")
    if not 0 < steady_drift <= 1:
        raise ValueError(f"--steady must be a share of the raw emulator's speed in (0, 1], got {steady_drift}")
    game, _ = parse_atari_id(resolved.env.id)
    runs = {
        "fastrl": lambda: engine_fps(config, seconds, policy, list(overrides)),
        "atari_vector_env": lambda: atari_vector_env_fps(game, resolved.engine.envs, seconds),
    }
    if backend is not None:
        runs["backend"] = lambda: engine_fps(config, seconds, policy, [*overrides, f"env.backend={backend!r}"])
    if adapter_loop:
        runs["adapter_loop"] = lambda: adapter_loop_fps(
            resolved.env, resolved.engine.envs, resolved_int(resolved.engine.executors, "engine.executors"), seconds
        )
    names = list(runs)
    per_round = []
    for i in range(rounds):
        k = i % len(names)
        before = raw_emulator_fps(game, seconds)
        measured = {name: runs[name]() for name in names[k:] + names[:k]}
        per_round.append({**measured, "raw_emulator": bracketing(before, raw_emulator_fps(game, seconds))})
    return _summary(per_round, steady_drift, resolved.engine.envs, resolved.engine.executors, backend)


def steady_rounds(per_round: list[dict], drift, steady_drift: float = STEADY_DRIFT) -> tuple[list[dict], list[dict]]:
    """The rounds whose reference readings agree (``drift(round)`` within ``steady_drift``), and the rounds to take
    medians of: those, or every round, with a warning, where none was steady."""
    steady = [r for r in per_round if drift(r) <= steady_drift]
    if not steady:
        log.warning(
            "no round was steady (reference readings within %.0f%% of each other): the medians are of all rounds, "
            "on a machine whose speed moved under them",
            100 * steady_drift,
        )
    return steady, steady or per_round


def _raw(r: dict) -> float:
    return r["raw_emulator"]["fps"]


def _engine(r: dict) -> float:
    return r["fastrl"]["frames_per_s"]


def _vector(r: dict) -> float:
    return r["atari_vector_env"]["fps"]


def _loop(r: dict) -> float:
    return r["adapter_loop"]["fps"]


def _summary(per_round: list[dict], steady_drift: float, envs: int, executors: int | str, backend: str | None) -> dict:
    """Medians over the steady rounds (all of them where none was), each round's own figures beside them."""
    steady, counted = steady_rounds(per_round, lambda r: r["raw_emulator"]["drift"], steady_drift)

    def median_of(value) -> float:
        return statistics.median(value(r) for r in counted)

    def median_ratio(numerator, denominator) -> float:
        return round(median_of(lambda r: numerator(r) / denominator(r)), 3)

    ours = [r["fastrl"] for r in counted]
    result = {
        "fastrl": {
            **sorted(ours, key=lambda r: r["frames_per_s"])[len(ours) // 2],
            "frames_per_s": round(median_of(_engine), 1),
            "agent_steps_per_s": round(statistics.median(r["agent_steps_per_s"] for r in ours), 1),
        },
        "raw_emulator": {"processes": per_round[0]["raw_emulator"]["processes"], "fps": round(median_of(_raw), 1)},
        "atari_vector_env": {"num_envs": envs, "batch_size": envs, "fps": round(median_of(_vector), 1)},
        "of_raw_emulator": median_ratio(_engine, _raw),
        "vs_atari_vector_env": median_ratio(_engine, _vector),
        "steady_rounds": len(steady),
        "steady_drift": steady_drift,
        "rounds": [_round_row(r, steady_drift) for r in per_round],
    }
    if backend is not None:
        result["backend"] = _backend_result(backend, counted)
    if "adapter_loop" in per_round[0]:
        result["adapter_loop"] = {"processes": executors, "fps": round(median_of(_loop), 1)}
        result["of_adapter_loop"] = median_ratio(_engine, _loop)
        result["adapter_loop_of_raw_emulator"] = median_ratio(_loop, _raw)
    return result


def _round_row(r: dict, steady_drift: float) -> dict:
    raw = r["raw_emulator"]
    row = {
        "fastrl_fps": round(_engine(r), 1),
        "raw_fps": round(_raw(r), 1),
        "raw_before_fps": round(raw["before_fps"], 1),
        "raw_after_fps": round(raw["after_fps"], 1),
        "raw_cores_spread": round(raw["cores_spread"], 3),
        "steady": raw["drift"] <= steady_drift,
        "atari_vector_env_fps": round(_vector(r), 1),
        "of_raw_emulator": round(_engine(r) / _raw(r), 3),
        "vs_atari_vector_env": round(_engine(r) / _vector(r), 3),
        "executors_waiting": r["fastrl"]["time_split_by_role"].get("executors", {}).get("waiting"),
    }
    if "adapter_loop" in r:
        row["adapter_loop_fps"], row["of_adapter_loop"] = round(_loop(r), 1), round(_engine(r) / _loop(r), 3)
    return row


def bracketing(before: dict, after: dict) -> dict:
    """A reference (the raw emulator; Crafter alone) read before and after a round's other measurements: the mean of
    its two readings, how far they lie apart (a share of the mean: ``drift``), and how far its processes' speeds lay
    apart (``cores_spread``: what a barrier waits for). Each reading: ``processes``, ``fps``, ``fps_per_process``."""
    fps = (before["fps"] + after["fps"]) / 2
    spreads = [
        (max(r["fps_per_process"]) - min(r["fps_per_process"])) / (r["fps"] / r["processes"]) for r in (before, after)
    ]
    return {
        "processes": before["processes"],
        "fps": fps,
        "before_fps": before["fps"],
        "after_fps": after["fps"],
        "drift": abs(after["fps"] - before["fps"]) / fps,
        "cores_spread": statistics.mean(spreads),
    }


def _backend_result(name: str, per_round: list[dict]) -> dict:
    """The engine on env backend ``name`` against the raw emulator, AtariVectorEnv and the engine on the config's
    own backend, medians of the per-round ratios."""

    def ratio(reference) -> float:
        return round(statistics.median(r["backend"]["frames_per_s"] / reference(r) for r in per_round), 3)

    return {
        "name": name,
        "frames_per_s": round(statistics.median(r["backend"]["frames_per_s"] for r in per_round), 1),
        "of_raw_emulator": ratio(lambda r: r["raw_emulator"]["fps"]),
        "vs_atari_vector_env": ratio(lambda r: r["atari_vector_env"]["fps"]),
        "vs_fastrl": ratio(lambda r: r["fastrl"]["frames_per_s"]),
        "time_split": sorted(per_round, key=lambda r: r["backend"]["frames_per_s"])[len(per_round) // 2]["backend"][
            "time_split"
        ],
    }


def scaling(
    config: str | None,
    executor_counts: Sequence[int],
    envs_per_executor: int = 4,
    seconds: float = 5.0,
    policy: str = "random",
    overrides: Sequence[str] = (),
) -> dict:
    """The engine against the raw emulator and asynchronous AtariVectorEnv on as many cores, per executor count."""
    resolved = fastrl.api.resolve_config(config, list(overrides))
    if not is_atari_id(resolved.env.id):
        raise ValueError(f"fastrl bench sampling measures Atari configs; env.id = {resolved.env.id!r} is not one")
    if min(executor_counts) < 1 or envs_per_executor < 1:
        raise ValueError("--executors and --envs-per-executor must be at least 1")
    game, _ = parse_atari_id(resolved.env.id)
    rows = []
    for count in executor_counts:
        envs = count * envs_per_executor
        ours = engine_fps(config, seconds, policy, [*overrides, f"engine.envs={envs}", f"engine.executors={count}"])
        raw = raw_emulator_fps(game, seconds, processes=count)
        vector = atari_vector_env_fps(game, envs, seconds, batch_size=max(1, envs // 2), threads=count)
        rows.append(
            {
                "executors": count,
                "envs": envs,
                "actors": ours["actors"],
                "fastrl_fps": round(ours["frames_per_s"], 1),
                "raw_fps": round(raw["fps"], 1),
                "atari_vector_env_async_fps": round(vector["fps"], 1),
                "of_raw_emulator": round(ours["frames_per_s"] / raw["fps"], 3),
                "vs_atari_vector_env_async": round(ours["frames_per_s"] / vector["fps"], 3),
                "time_split": ours["time_split"],
            }
        )
    return {"config": config, "policy": policy, "envs_per_executor": envs_per_executor, "scaling": rows}


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
    parser.add_argument(
        "--steady",
        type=float,
        default=STEADY_DRIFT,
        metavar="SHARE",
        help="a round counts when its raw readings before and after differ by at most this share of their mean "
        f"(default {STEADY_DRIFT})",
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--adapter-loop",
        action="store_true",
        help="also step the config's env adapters in bare loops, one per executor, without the "
        "engine: of_adapter_loop is the share of that the engine keeps",
    )
    parser.add_argument(
        "--executors",
        type=int,
        nargs="+",
        metavar="N",
        help="measure scaling instead: one row per executor count against the raw emulator and asynchronous "
        "AtariVectorEnv on as many cores (e.g. --executors 1 2 4 8 14)",
    )
    parser.add_argument("--envs-per-executor", type=int, default=4, help="with --executors: envs per executor")
    parser.add_argument(
        "--backend",
        metavar="NAME",
        help="also run the engine with env.backend = NAME (e.g. ale_vector), in the same rounds: its ratios to "
        "the raw emulator, AtariVectorEnv and the engine on the config's own backend",
    )


def run(args: argparse.Namespace) -> int:
    """Measure with the parsed ``add_arguments`` options and print the JSON line."""
    if args.executors:
        result = scaling(args.config, args.executors, args.envs_per_executor, args.seconds, args.policy, args.set)
    else:
        result = measure(
            args.config, args.seconds, args.policy, args.set, args.rounds, args.adapter_loop, args.backend, args.steady
        )
    print(json.dumps(result))
    return 0
