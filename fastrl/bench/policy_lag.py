"""Measured policy lag of ``async`` (IMPALA) against the number of envs, next to hts and sync.

HTS-RL's Claim 2: with one learner of fixed throughput, the lag of an asynchronous system grows
with the number of envs feeding it (more trajectories queue per update), while ``hts`` learns
with a lag of exactly 1 and ``sync`` with 0. Each row is one CartPole run learning with a
fixed batch (``algo.batch_slots``) and unroll; the lag is the learner's per-batch mean (its
version minus each step's behaviour version), averaged over the run's metrics lines, and the
largest per-batch max.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import fastrl
from fastrl.bench import A2C_SETTINGS


def run_one(mode: str, envs: int, frames: int, batch_slots: int, rollout: int, workdir: str) -> dict:
    algo = {"async": "impala", "hts": "a2c", "sync": "a2c"}[mode]
    overrides = [
        "env.id='CartPole-v1'",
        f"engine.mode='{mode}'",
        f"engine.envs={envs}",
        f"engine.rollout={rollout}",
        *A2C_SETTINGS,
        f"algo.name='{algo}'",
        f"algo.batch_slots={batch_slots}",
        "model.name='mlp'",
        "engine.executors=1",
        "engine.actors=1",  # the layout its docs/results numbers were measured with
        f"run.total_frames={frames}",
        "run.progress=false",
        "run.log_interval_s=0.25",
        f"run.dir='{workdir}'",
    ]
    run_dir = Path(workdir) / f"{mode}-{envs}"
    summary = fastrl.train({}, overrides, run_dir=run_dir)
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    lines = [line for line in lines if line["updates"] > 0]
    return {
        "mode": mode,
        "envs": envs,
        "batch_slots": batch_slots if mode == "async" else envs,
        "rollout": rollout,
        "frames": summary["frames"],
        "fps": summary["fps"],
        "updates": summary["updates"],
        "lag_mean": round(sum(line["policy_lag_mean"] for line in lines) / max(len(lines), 1), 3),
        "lag_max": max((line["policy_lag_max"] for line in lines), default=None),
    }


def measure(
    envs_list: tuple[int, ...] = (4, 8, 16, 32), frames: int = 60_000, batch_slots: int = 4, rollout: int = 20
) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for envs in envs_list:
            rows.append(run_one("async", envs, frames, batch_slots, rollout, workdir))
        for mode in ("hts", "sync"):
            rows.append(run_one(mode, envs_list[-1], frames, batch_slots, rollout, workdir))
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--envs", type=int, nargs="+", default=[4, 8, 16, 32], help="async runs, one per count")
    parser.add_argument("--frames", type=int, default=60_000, help="env frames per run")
    parser.add_argument("--batch-slots", type=int, default=4, help="async learner batch (trajectories)")
    parser.add_argument("--rollout", type=int, default=20, help="unroll T")


def run(args: argparse.Namespace) -> int:
    """Measure with the parsed ``add_arguments`` options and print one JSON line per env count."""
    for row in measure(tuple(args.envs), args.frames, args.batch_slots, args.rollout):
        print(json.dumps(row), flush=True)
    return 0
