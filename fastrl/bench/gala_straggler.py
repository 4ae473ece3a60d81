"""gala with a straggler: ring gossip keeps each learner at its own pace, allreduce waits for the slowest.

Learner i's envs step in ``step_s[i]`` seconds (DelayEnv, constant time), each learner's envs in
an executor of their own so their sleeps overlap like real parallel simulators. The same run is
made with ``gala.mixing = ring`` and ``allreduce``; each prints updates/s per learner. With the
ring a learner is held back only by its in-peer, and only after ``gala.max_staleness`` updates
without news, so a fast learner runs up to max_staleness + 1 updates per update of a slow
in-peer; allreduce needs every learner's gradient for every update (GALA's straggler claim).
Sleep-based, so it measures the engine's scheduling, not the CPU, and holds on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import fastrl
from fastrl.bench import A2C_SETTINGS
from fastrl.envs.delay import DelayEnv

FACTORY = "fastrl.bench.gala_straggler:straggler_env"


def straggler_env(env_index: int, envs_per_learner: int, step_s: list[float], episode_steps: int = 1000) -> DelayEnv:
    """A DelayEnv whose step time is its learner's: envs are owned in contiguous blocks."""
    return DelayEnv(mean_s=step_s[env_index // envs_per_learner], episode_steps=episode_steps)


def run_mixing(
    mixing: str, step_s: list[float], envs_per_learner: int, seconds: float, staleness: int, workdir: str
) -> dict:
    learners = len(step_s)
    overrides = [
        f"env.id='{FACTORY}'",
        f"env.kwargs={{ envs_per_learner = {envs_per_learner}, step_s = {list(step_s)} }}",
        "engine.mode='gala'",
        f"engine.learners={learners}",
        f"engine.envs={learners * envs_per_learner}",
        f"engine.executors={learners}",
        "engine.actors=1",  # one actor process, as its docs/results numbers were measured (not "auto")
        "engine.rollout=5",
        f"gala.mixing='{mixing}'",
        f"gala.max_staleness={staleness}",
        "model.name='mlp'",
        *A2C_SETTINGS,
        "run.total_frames=1_000_000_000",
        f"run.max_seconds={seconds}",
        "run.progress=false",
        f"run.dir='{workdir}'",
    ]
    summary = fastrl.train({}, overrides)
    return {
        "mixing": mixing,
        "step_s": list(step_s),
        "updates_per_s": [entry["updates_per_s"] for entry in summary["learners"]],
        "updates": [entry["updates"] for entry in summary["learners"]],
        "gossip_wait_s": [entry["gossip_wait_s"] for entry in summary["learners"]],
        "consensus_radius": summary["consensus_radius"],
        "train_s": summary["train_s"],
    }


def measure(
    step_s: tuple[float, ...] = (0.02, 0.002, 0.002, 0.002),
    envs_per_learner: int = 2,
    seconds: float = 20.0,
    staleness: int = 16,
) -> dict:
    with tempfile.TemporaryDirectory() as workdir:
        ring = run_mixing("ring", list(step_s), envs_per_learner, seconds, staleness, workdir)
        allreduce = run_mixing("allreduce", list(step_s), envs_per_learner, seconds, staleness, workdir)
    fastest = max(ring["updates_per_s"])
    return {
        "ring": ring,
        "allreduce": allreduce,
        "max_staleness": staleness,
        "fastest_ring_vs_allreduce": round(fastest / max(max(allreduce["updates_per_s"]), 1e-9), 2),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--step-s",
        type=float,
        nargs="+",
        default=[0.02, 0.002, 0.002, 0.002],
        help="env step time of each learner's envs (one value per learner)",
    )
    parser.add_argument("--envs-per-learner", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0, help="training time of each run")
    parser.add_argument("--staleness", type=int, default=16, help="gala.max_staleness of the ring run")


def run(args: argparse.Namespace) -> int:
    """Measure with the parsed ``add_arguments`` options and print the JSON line."""
    print(json.dumps(measure(tuple(args.step_s), args.envs_per_learner, args.seconds, args.staleness)), flush=True)
    return 0
